"""VI911: the custom reward function looks for a string the model's tokenizer marks special (real case verl#1724).

verl 0.9.1 (paths under verl/):
- The reward loop loads the tokenizer of actor_rollout_ref.model.tokenizer_path, else model.path
  (experimental/reward_loop/reward_loop.py:121-125), and the reward manager reward.reward_manager.name names
  (source `register`: trainer/ppo/reward.py:92-95, the registry of experimental/reward_loop/reward_manager/).
- Every manager that registry holds decodes the response with `skip_special_tokens=True` before it calls the custom
  function (reward.custom_reward_function, loaded by trainer/ppo/reward.py:70-80) with that text as `solution_str`
  (naive.py:55, then :66-83): a token the tokenizer marks special never reaches the function. Nothing else the
  function receives holds the response (extra_info is the row's, plus num_turns and rollout_reward_scores,
  naive.py:44-52), and no config key keeps special tokens.
- A `source: importlib` manager is the user's own class: its decode is not known, so nothing is said.

Special, as transformers' decode skips them: tokenizer.json's added_tokens with "special": true,
tokenizer_config.json's added_tokens_decoder entries with "special": true, and the named special tokens
(bos/eos/unk/sep/pad/cls/mask). The reward file is read as text (bounded) and parsed with `ast`, never imported:
its string constants count (comments and docstrings do not), except where the token's absence leaves the
expression unchanged (`s.replace(TOK, "")`, `s.split(TOK)[0]`, `removesuffix(TOK)`, ...).
"""

from __future__ import annotations

import ast
from pathlib import Path

from wizard.check.rules.context import M, Ctx, Facts, local_path, model_folder, parse_module
from wizard.check.shellargs import PLACEHOLDER

FN = "reward.custom_reward_function"
MANAGER = "reward.reward_manager"
WHERE = "experimental/reward_loop/reward_manager/"
# the line of each registered manager's `self.tokenizer.decode(valid_response_ids, skip_special_tokens=True)`
# (tests/test_reward_special_tokens.py reads verl's registry and these lines)
DECODES = {"naive": "naive.py:55", "dapo": "dapo.py:65", "gdpo": "gdpo.py:49", "rate_limited": "limited.py:415",
           "remote": "remote.py:96"}
NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
MAX_TOKENIZER_JSON = 64 << 20
MAX_CONFIG = 4 << 20
SHOWN = 4  # tokens named in the message


def _json(path: Path, limit: int) -> dict:
    from wizard._io import UnsafeInput, read_user_file, safe_json

    try:
        doc = safe_json(read_user_file(str(path), limit)) if path.is_file() else {}
    except (OSError, ValueError, UnsafeInput):
        return {}
    return doc if isinstance(doc, dict) else {}


def _content(value: object) -> str | None:
    """A token as tokenizer files write it: a string, or an AddedToken's dict with "content"."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def special_tokens(folder: Path) -> tuple[set[str], set[str]]:
    """(the tokens the tokenizer in `folder` marks special, those of them named bos/eos/pad/...), read from its files
    (nothing loaded). Tokens that are blank or one character long are left out (a substring of any text)."""
    found: set[str] = set()
    named: set[str] = set()
    added = _json(folder / "tokenizer.json", MAX_TOKENIZER_JSON).get("added_tokens")
    for entry in added if isinstance(added, list) else []:
        if isinstance(entry, dict) and entry.get("special") is True:
            found.add(_content(entry) or "")
    config = _json(folder / "tokenizer_config.json", MAX_CONFIG)
    decoder = config.get("added_tokens_decoder")
    for entry in decoder.values() if isinstance(decoder, dict) else []:
        if isinstance(entry, dict) and entry.get("special") is True:
            found.add(_content(entry) or "")
    for doc in (config, _json(folder / "special_tokens_map.json", MAX_CONFIG)):
        for key in NAMED:
            token = _content(doc.get(key))
            if token:
                named.add(token)
    found |= named
    keep = {t for t in found if len(t.strip()) > 1}
    return keep, named & keep


def _index(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, int):
        return -node.operand.value
    return None


KEEPS = {"split": (0, -1), "rsplit": (0, -1), "partition": (0,), "rpartition": (2, -1)}


def _harmless(node: ast.Constant, parent: dict[ast.AST, ast.AST]) -> bool:
    """Whether the string is used so that, without the token in the text, the expression is the text itself:
    removing it (replace(TOK, ""), re.sub(TOK, "", s), removeprefix/removesuffix) or taking the part before/after it
    (split(TOK)[0], split(TOK)[-1], partition(TOK)[0], rpartition(TOK)[-1])."""
    call = parent.get(node)
    if not (isinstance(call, ast.Call) and call.args and call.args[0] is node and isinstance(call.func, ast.Attribute)):
        return False
    attr = call.func.attr
    empty = len(call.args) >= 2 and isinstance(call.args[1], ast.Constant) and call.args[1].value == ""
    if attr in ("removeprefix", "removesuffix") or (attr in ("replace", "sub") and empty):
        return True
    if attr in KEEPS:
        sub = parent.get(call)
        return isinstance(sub, ast.Subscript) and sub.value is call and _index(sub.slice) in KEEPS[attr]
    return False


def tokens_looked_for(path: Path, specials: set[str]) -> dict[str, list[int]]:
    """{special token: lines}, in the order the file names them, for the string constants of a Python file that
    contain it (docstrings and the uses `_harmless` names do not count); {} when the file cannot be read or parsed
    (VI870 / VI871 say why)."""
    from wizard.planner.agent import MODULE_BYTES

    try:
        tree = parse_module(path, MODULE_BYTES)
    except SyntaxError:
        return {}
    if tree is None:
        return {}
    parent: dict[ast.AST, ast.AST] = {}
    docs: set[int] = set()
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # a docstring, a bare string
            docs.add(id(node.value))
    hits: list[tuple[int, int, int, str]] = []  # (line, column, offset in the string, token)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            named = [(node.value.find(t), t) for t in specials if t in node.value]
            if named and not _harmless(node, parent):
                hits += [(node.lineno, node.col_offset, at, t) for at, t in named]
    found: dict[str, list[int]] = {}
    for line, _, _, token in sorted(hits):
        found.setdefault(token, []).append(line)
    return found


def _given(c: Ctx, key: str) -> str | None:
    value = c.v(key)
    if isinstance(value, str) and value and not c.unknown(key) and PLACEHOLDER not in value:
        return value
    return None


def rule_reward_special_tokens(c: Ctx, f: Facts) -> None:
    """VI911 (the module's docstring has verl's side): a registered reward manager, a local reward file and the
    tokenizer's files here (a local folder or the Hugging Face cache); otherwise nothing is said."""
    fn_path = _given(c, f"{FN}.path")
    source, name = c.v(f"{MANAGER}.source") or "register", c.v(f"{MANAGER}.name") or "naive"
    if fn_path is None or source != "register" or name not in DECODES or c.unknown(f"{MANAGER}.name"):
        return
    model_key = f"{M}.tokenizer_path" if c.v(f"{M}.tokenizer_path") else f"{M}.path"
    model = _given(c, model_key)
    reward = local_path(c, fn_path)
    folder = model_folder(c, model) if model is not None else None
    if folder is None or reward is None or not reward.is_file():
        return
    specials, named = special_tokens(folder)
    found = tokens_looked_for(reward, specials) if specials else {}
    if not found:
        return
    fn = c.v(f"{FN}.name") or "compute_score"
    tokens = list(found)
    shown = ", ".join(f"{t!r} (line {', '.join(map(str, sorted(set(found[t]))[:3]))})" for t in tokens[:SHOWN])
    more = f" and {len(tokens) - SHOWN} more" if len(tokens) > SHOWN else ""
    it = "it" if len(tokens) == 1 else "them"
    eos = [t for t in tokens if t in named]
    tags = [t for t in tokens if t not in named]
    hint = []
    if tags:
        hint.append(f"keep {', '.join(map(repr, tags[:SHOWN]))} in the response by making them ordinary added tokens: "
                    f"\"special\": false for them in {model}'s tokenizer.json added_tokens (and tokenizer_config.json's "
                    "added_tokens_decoder), and out of additional_special_tokens / extra_special_tokens (their ids, so "
                    "the model's weights, stay the same); or score without them (the text between the tags, the answer "
                    "itself), or decode the response yourself with skip_special_tokens=False in a reward manager of "
                    f"your own ({MANAGER}.source=importlib)")
    if eos:
        hint.append(f"drop the check for {', '.join(map(repr, eos))}: the tokenizer's bos/eos/pad/... tokens, which "
                    "the decode always removes (a response that ended has lost its eos already)")
    c.add("VI911", "warning", (f"{FN}.path", f"{FN}.name", model_key, f"{MANAGER}.name"),
          f"{reward.name}: the reward function looks for {shown}{more}, which {model}'s tokenizer marks special; verl's "
          f"{name!r} reward manager decodes each response with skip_special_tokens=True "
          f"({WHERE}{DECODES[name]}) before calling {fn}, so solution_str never contains "
          f"{it}: a test for {it} never finds {it} (verl#1724: a format reward of 0 for every response, no "
          "learning, no error)",
          "; ".join(hint))
