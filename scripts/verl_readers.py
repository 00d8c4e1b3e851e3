#!/usr/bin/env python3
"""Regenerate wizard/check/data/verl_readers.json: which of verl's modules read each config key ("who reads what").

    python scripts/verl_readers.py            # from the installed verl's source
    python scripts/verl_readers.py --check    # exit 1 if the shipped table is stale

Walks every module of the installed verl with `ast` (nothing is imported) and records each place a config key
is read: an attribute chain (`config.actor_rollout_ref.hybrid_engine`), `.get("key")`, `["key"]`,
`getattr(x, "key")` and `OmegaConf.select(cfg, "a.b")`. A read is attributed to a key of verl's tree by its last
name and the name before it (`rollout_cfg.nnodes` is a read of `...rollout.nnodes`; a name that is not a config
node, such as `self.config.nnodes`, matches every key with that leaf, so a key is never thought unread when it
might be read). Reads inside verl's config dataclasses (verl/workers/config, verl/trainer/config) are left out:
they validate a value, they do not act on it.

Each file lies in a *scope*: the configuration under which verl runs it (an engine for one strategy, a rollout
server, a trainer mode, an entry point other than main_ppo), from verl's dispatch code cited in SCOPES below;
files outside every scope run for every configuration of main_ppo. wizard.check.rules.readers warns on a key the
user sets that only modules of inactive scopes read. An engine package's helper module (workers/engine/<engine>/*.py
defining no registered engine) takes the scope of the engine modules that import it, when only they do
(_helper_scopes): verl/workers/engine/fsdp/utils.py:28 reads model.use_liger and only
verl/workers/engine/fsdp/transformer_impl.py:140 imports it, so use_liger on the Megatron engine is read by nothing.

One scope is computed, not cited: `orphan`, the modules verl never runs because nothing loads them (orphan_modules):
no module of verl imports them (`import`, `from ... import`, relative or absolute, at any depth of the code), no string
of verl's code or YAML names them (a `_target_`, an importlib path, a dotted prefix an f-string completes), and they
are not scripts (`if __name__ == "__main__"`). In verl 0.9.1 workers/rollout/schemas.py (AsyncRolloutRequest, the
multi-turn request of the removed SGLang multi-turn rollout) is one: the only reader of
rollout.multi_turn.tokenization_sanity_check_mode and use_inference_chat_template (schemas.py:117-118, :390, :606-663),
so those settings do nothing (VI656).

`dead` is the strict subset of `unread` that no code of verl can act on (wizard.check.rules.deadkeys, VI797): a key
whose leaf name (1) is declared as a field of a config dataclass (verl/workers/config, verl/trainer/config), (2) occurs
nowhere else in verl's code outside tests/ -- not as a name, an attribute, a keyword, a parameter, an import, nor a
word of any string (getattr(x, "leaf"), .get("leaf"), docstrings) -- and (3) whose declaring dataclass is never
iterated field by field: no `fields(x)` / `asdict(x)` / `astuple(x)` / `vars(x)` on a parameter annotated with that
class or one of its bases (VeOmniEngineConfig: workers/engine/veomni/transformer_impl.py:77 forwards every
`*_implementation` field to VeOmni). The other wholesale conversions in verl are of whole trees for logging or of
other libraries' objects (OmegaConf.to_container(config) for the trackers and pprint; Megatron's TransformerConfig at
utils/checkpoint/megatron_checkpoint_manager.py:111), and none of them is of a dataclass declaring a dead key's leaf
by construction of (2): a `**` or to_container of a sub-tree handed to a callee in verl would need the callee to name
the leaf. Keys whose whole subtree verl passes on (override_transformer_config.*, ray_kwargs.ray_init.*, ...) are
not dataclass fields, so (1) leaves them out. Each dead key lists its declaration(s) as evidence.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections import defaultdict
from pathlib import Path
from collections.abc import Iterator
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from wizard.check.recipes import access_chain  # noqa: E402 - after the path above

OUT = ROOT / "wizard" / "check" / "data" / "verl_readers.json"

# scope: (path prefixes under verl/, condition, where verl dispatches on it). A condition is
# {"key": dotted key | "@strategy" (the role's strategy: actor_rollout_ref.actor.strategy / critic.strategy) |
#  "@entry" (the entry point), "in": [values]}.
SCOPES: dict[str, dict[str, Any]] = {
    "rollout:vllm": {"paths": ["workers/rollout/vllm_rollout/"], "key": "actor_rollout_ref.rollout.name",
                     "in": ["vllm"], "cite": "verl/workers/rollout/replica.py (RolloutReplicaRegistry by rollout.name)"},
    "rollout:sglang": {"paths": ["workers/rollout/sglang_rollout/"], "key": "actor_rollout_ref.rollout.name",
                       "in": ["sglang"], "cite": "verl/workers/rollout/replica.py (RolloutReplicaRegistry by rollout.name)"},
    "rollout:trtllm": {"paths": ["workers/rollout/trtllm_rollout/"], "key": "actor_rollout_ref.rollout.name",
                       "in": ["trtllm"], "cite": "verl/workers/rollout/replica.py (RolloutReplicaRegistry by rollout.name)"},
    "trainer:legacy": {"paths": ["trainer/main_ppo_v0.py", "trainer/ppo/ray_trainer.py"], "key": "trainer.use_v1",
                       "in": [False], "cite": "verl/trainer/main_ppo.py:183 (if config.trainer.use_v1 ... else main_ppo_v0)"},
    "trainer:separate_async": {"paths": ["trainer/ppo/v1/trainer_separate_async.py"], "key": "trainer.v1.trainer_mode",
                               "in": ["separate_async"], "cite": "verl/trainer/main_ppo.py:141 (get_trainer_cls(trainer_mode))"},
    "trainer:colocate_async": {"paths": ["trainer/ppo/v1/trainer_colocate_async.py"], "key": "trainer.v1.trainer_mode",
                               "in": ["colocate_async"], "cite": "verl/trainer/main_ppo.py:141 (get_trainer_cls(trainer_mode))"},
    "mode:separation": {"paths": ["experimental/separation/"], "key": "trainer.v1.trainer_mode", "in": ["separate_async"],
                        "or": [{"key": "@entry", "in": ["fully_async", "one_step_off"]}],
                        "cite": "verl/trainer/ppo/v1/trainer_separate_async.py:26, "
                                "verl/experimental/fully_async_policy/fully_async_main.py:29 (its only importers)"},
    "reward:model": {"paths": ["experimental/reward_loop/reward_model.py"], "key": "reward.reward_model.enable",
                     "in": [True], "cite": "verl/experimental/reward_loop/reward_loop.py:281-302 "
                                           "(RewardModelManager only when reward.reward_model.enable)"},
    "ignored": {"paths": [], "key": "@never", "in": [],
                "cite": "a read that only warns the key is ignored (GUARDED below)"},
    "entry:fully_async": {"paths": ["experimental/fully_async_policy/"], "key": "@entry", "in": ["fully_async"],
                          "cite": "verl/experimental/fully_async_policy/fully_async_main.py:222"},
    "entry:one_step_off": {"paths": ["experimental/one_step_off_policy/"], "key": "@entry", "in": ["one_step_off"],
                           "cite": "verl/experimental/one_step_off_policy/main_ppo.py:109"},
    "entry:sft": {"paths": ["trainer/sft_trainer.py", "trainer/sft_trainer_ray.py"], "key": "@entry", "in": ["sft"],
                  "cite": "verl/trainer/sft_trainer.py:461"},
    "entry:generation": {"paths": ["trainer/main_generation_server.py"], "key": "@entry", "in": ["generation"],
                         "cite": "verl/trainer/main_generation_server.py:122"},
    "entry:eval": {"paths": ["trainer/main_eval.py"], "key": "@entry", "in": ["eval"],
                   "cite": "verl/trainer/main_eval.py:41"},
}
# Reads verl makes only on one branch, checked by hand (file, how the line starts) → the scope of that
# branch: LLMServerManager reads the rollout pool's size only without a worker group, i.e. standalone rollout
# (llm_server.py:389 `assert worker_group is not None or ...nnodes > 0`, :455-458 `world_size = worker_group.world_size
# if self.worker_group else n_gpus_per_node * nnodes`); a worker group is what colocated (hybrid) modes pass.
GUARDED: dict[tuple[str, str], str] = {
    ("workers/rollout/llm_server.py", "assert worker_group is not None or self.rollout_config.nnodes > 0"):
        "mode:separation",
    ("workers/rollout/llm_server.py", "else self.rollout_config.n_gpus_per_node * self.rollout_config.nnodes"):
        "mode:separation",
    # the V1 trainer reads max_num_gen_batches only to warn that it is ignored (trainer_base.py:205-211)
    ("trainer/ppo/v1/trainer_base.py", 'max_num_gen_batches = filter_groups.get("max_num_gen_batches", 0)'): "ignored",
}
SKIP = ("tests/", "workers/config/", "trainer/config/", "version/")
PER_SCOPE = 3  # file:line examples kept per scope and key


def verl_root() -> Path:
    spec = importlib.util.find_spec("verl")
    if spec is None or spec.origin is None:
        raise SystemExit("verl is not installed")
    return Path(spec.origin).parent


ENGINES = "workers/engine/"


def engine_scopes(root: Path) -> dict[str, dict[str, Any]]:
    """One scope per engine module: the strategies (actor/critic `strategy`, i.e. EngineRegistry backends) whose
    registered engine class is, or inherits from, a class the module defines (`@EngineRegistry.register(...,
    backend=[...])` in verl/workers/engine/*/; VeOmni's engines subclass the FSDP ones, Mindspeed's the Megatron
    ones). A module no registered engine inherits from is left to run always."""
    classes: dict[str, tuple[str, list[str], list[str]]] = {}  # class → (module, base names, backends)
    for path in sorted((root / ENGINES).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            backends: list[str] = []
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("EngineRegistry.register"):
                    for kw in dec.keywords:
                        if kw.arg == "backend":
                            v = ast.literal_eval(kw.value)
                            backends += [v] if isinstance(v, str) else list(v)
            bases = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases]
            classes[node.name] = (rel, bases, backends)

    def lineage(name: str, seen: set[str]) -> set[str]:
        if name not in classes or name in seen:
            return set()
        seen.add(name)
        mod, bases, _ = classes[name]
        return {mod}.union(*(lineage(b, seen) for b in bases))

    per_module: dict[str, set[str]] = defaultdict(set)
    for name, (_, _, backends) in classes.items():
        if backends:
            for mod in lineage(name, set()):
                per_module[mod].update(backends)
    _helper_scopes(root, per_module)
    return {f"engine:{mod[len(ENGINES):-3]}": {"paths": [mod], "key": "@strategy", "in": sorted(b),
                                                "cite": f"verl/{mod}: EngineRegistry.register backends of the engines "
                                                        "defined or inheriting here"}
            for mod, b in sorted(per_module.items())}


def _modules(root: Path) -> dict[str, str]:
    """dotted name -> path of each of verl's modules, tests/ left out."""
    return {_module_name(rel): rel for p in sorted(root.rglob("*.py"))
            if not (rel := p.relative_to(root).as_posix()).startswith("tests/")}


def _parsed(root: Path, modules: dict[str, str]) -> Iterator[tuple[str, str, ast.Module]]:
    """(dotted name, path, parsed tree) of each module; a file that does not parse is skipped."""
    for name, rel in modules.items():
        try:
            yield name, rel, ast.parse((root / rel).read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue


def _imported(node: ast.AST, name: str, rel: str) -> list[str]:
    """The dotted names an import statement of module `name` (at `rel`) loads: `import a.b`; `from a import b` and
    `from a.b import x` (the module and each name under it), relative or absolute."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    package = name if rel.endswith("__init__.py") else name.rsplit(".", 1)[0]
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join(up + ([base] if base else []))
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def importers(root: Path) -> dict[str, set[str]]:
    """module path -> the paths of verl's modules (tests/ left out) that import it: `import a.b`, `from a import b`,
    `from a.b import x`, relative or absolute, at any depth of the code."""
    modules = _modules(root)
    out: dict[str, set[str]] = defaultdict(set)
    for name, rel, tree in _parsed(root, modules):
        for node in ast.walk(tree):
            for n in _imported(node, name, rel):
                if n in modules and modules[n] != rel:
                    out[modules[n]].add(rel)
    return out


def _helper_scopes(root: Path, per_module: dict[str, set[str]]) -> None:
    """An engine package's helper module (workers/engine/<engine>/*.py defining no registered engine) runs only where
    the engine modules that import it run: verl/workers/engine/fsdp/utils.py's apply_npu_fsdp_patches, the one reader
    of model.use_liger besides the FSDP engine, is imported by verl/workers/engine/fsdp/transformer_impl.py:140 alone.
    A helper every importer of which is an engine module (or such a helper) gets the union of their backends; one any
    other module imports keeps running always. Repeated until nothing changes (helpers of helpers)."""
    by = importers(root)
    changed = True
    while changed:
        changed = False
        for rel in sorted(by):
            if not rel.startswith(ENGINES) or rel.endswith("__init__.py") or rel in per_module:
                continue
            users = by[rel] - {rel}
            if users and all(u in per_module for u in users):
                per_module[rel] = set().union(*(per_module[u] for u in users))
                changed = True


REWARD_MANAGERS = "experimental/reward_loop/reward_manager/"
_REGISTER = re.compile(r"""^@register\(["']([\w.-]+)["']\)""", re.M)


ORPHAN = "orphan"
_MAIN = re.compile(r"""__name__\s*==\s*['"]__main__['"]""")


def _module_name(rel: str) -> str:
    parts = rel[:-3].split("/")
    return ".".join(["verl", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def orphan_modules(root: Path) -> list[str]:
    """The modules of verl (paths under verl/, tests/ and packages' __init__ left out) that nothing loads: the
    module docstring's criterion. A dotted prefix in a string ("verl.models.transformers." completed by an f-string)
    counts as naming every module under it, so a module loaded by a computed name is never called an orphan."""
    modules = _modules(root)
    imported: set[str] = set()
    texts: list[str] = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*.yaml"))]
    for name, rel, tree in _parsed(root, modules):
        for node in ast.walk(tree):
            imported.update(_imported(node, name, rel))
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value)
    blob = "\n".join(texts)
    prefixes = {m.group(0).rstrip("./") for m in re.finditer(r"verl[./][\w./]*[./](?=[^\w./]|$)", blob)}
    out = []
    for name, rel in modules.items():
        if rel.endswith("__init__.py") or name in imported or _MAIN.search((root / rel).read_text(encoding="utf-8")):
            continue
        if name in blob or f"verl/{rel}" in blob or name.replace(".", "/") in blob:
            continue
        if any(name.startswith(p.replace("/", ".") + ".") for p in prefixes):
            continue
        out.append(rel)
    return out


def scope_of(rel: str, text: str = "") -> str:
    """The scope of a module: orphan (nothing loads it), one of SCOPES, a reward manager by the name it registers
    under (verl builds the one named by reward.reward_manager.name, experimental/reward_loop/reward_manager/
    registry.py), or always."""
    if rel in _ORPHANS:
        return ORPHAN
    if rel.startswith(REWARD_MANAGERS) and _REGISTER.search(text):
        return f"reward_manager:{_REGISTER.search(text).group(1)}"
    for name, s in {**SCOPES, **_ENGINE_SCOPES}.items():
        if any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in s["paths"]):
            return name
    return "always"


_ENGINE_SCOPES: dict[str, dict[str, Any]] = {}
_ORPHANS: set[str] = set()


def _norm(name: str) -> str:
    for suffix in ("_config", "_cfg", "_conf"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def reads_of(tree: ast.AST) -> list[tuple[list[str], int]]:
    """Every access chain with its line (assignments and an object's own attributes left out)."""
    out: list[tuple[list[str], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            continue  # an assignment, not a read
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            ch = access_chain(node)
            if ch and len(ch) == 2 and ch[0] in ("self", "cls"):
                continue  # an object's own attribute (self.nnodes), not a config read (self.config.nnodes is)
            if ch and len(ch) >= 2:
                out.append((ch, node.lineno))
    return out


def key_paths() -> list[str]:
    from wizard.check.tree import flatten
    from wizard.verlspec.keys import load_snapshot

    keys: set[str] = set()
    for tree in load_snapshot()["engines"].values():
        for k in flatten(tree):
            if "._target_" not in k and not k.endswith("_target_"):
                keys.add(k)
    return sorted(keys)


CONFIG_DIRS = ("workers/config/", "trainer/config/")
WHOLESALE_CALLS = ("fields", "asdict", "astuple", "vars")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _declarations(root: Path) -> tuple[dict[str, list[tuple[str, str]]], dict[str, list[str]], set[tuple[str, int]]]:
    """leaf -> [(file:line, class)] of the config dataclasses' fields; class -> its base names; the declaring
    (file, line) pairs, which are not uses."""
    decl: dict[str, list[tuple[str, str]]] = defaultdict(list)
    bases: dict[str, list[str]] = {}
    spots: set[tuple[str, int]] = set()
    for d in CONFIG_DIRS:
        for path in sorted((root / d).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef):
                    continue
                bases[node.name] = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        decl[stmt.target.id].append((f"verl/{rel}:{stmt.lineno}", node.name))
                        spots.add((rel, stmt.lineno))
    return decl, bases, spots


def _uses_and_wholesale(root: Path, spots: set[tuple[str, int]],
                        skip: frozenset[str] = frozenset()) -> tuple[set[str], dict[str, str]]:
    """Every word verl's code (tests/ and the modules in `skip` left out) names outside the field declarations, and
    the classes whose instances it iterates field by field (class -> file:line)."""
    words: set[str] = set()
    wholesale: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("tests/") or rel in skip:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                if (rel, node.lineno) not in spots or not isinstance(node.ctx, ast.Store):
                    words.add(node.id)
            elif isinstance(node, ast.Attribute):
                words.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                words.add(node.arg)
            elif isinstance(node, ast.arg):
                words.add(node.arg)
            elif isinstance(node, ast.alias):
                words.update(_WORD.findall(f"{node.name} {node.asname or ''}"))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                words.update(_WORD.findall(node.value))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                ann = {a.arg: ast.unparse(a.annotation) for a in [*node.args.args, *node.args.kwonlyargs]
                       if a.annotation is not None}
                for call in ast.walk(node):
                    if (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name)
                            and ast.unparse(call.func).rsplit(".", 1)[-1] in WHOLESALE_CALLS
                            and call.args[0].id in ann):
                        for cls in _WORD.findall(ann[call.args[0].id]):
                            wholesale.setdefault(cls, f"verl/{rel}:{call.lineno}")
    return words, wholesale


def dead_keys(root: Path, keys: list[str], unread: list[str]) -> dict[str, dict[str, Any]]:
    """The unread keys nothing in verl can act on (the module docstring's criterion), with the evidence."""
    decl, bases, spots = _declarations(root)
    words, wholesale = _uses_and_wholesale(root, spots)

    def iterated(cls: str, seen: frozenset[str] = frozenset()) -> str | None:
        if cls in wholesale:
            return wholesale[cls]
        return next((w for b in bases.get(cls, ()) if b not in seen
                     if (w := iterated(b, seen | {cls})) is not None), None)

    out: dict[str, dict[str, Any]] = {}
    for k in unread:
        leaf = k.rsplit(".", 1)[-1]
        if leaf not in decl or leaf in words:
            continue
        if any(iterated(cls) for _, cls in decl[leaf]):
            continue
        out[k] = {"declared": sorted({f"{where} ({cls})" for where, cls in decl[leaf]})}
    return out


def orphan_only(root: Path, found: dict[str, dict[str, list[str]]], unread: list[str], dead: dict[str, Any],
                orphans: list[str]) -> dict[str, dict[str, Any]]:
    """Keys only modules nothing loads act on (VI656): every read is in an orphan module, or the key is unread and
    its leaf, a config dataclass field, occurs in verl's code (the dead-key walk) only inside orphan modules."""
    out: dict[str, dict[str, Any]] = {}
    for k, scopes in found.items():
        if set(scopes) == {ORPHAN}:
            out[k] = {"read_in": sorted(scopes[ORPHAN])}
    decl, _, spots = _declarations(root)
    live, _ = _uses_and_wholesale(root, spots, frozenset(orphans))
    for k in unread:
        leaf = k.rsplit(".", 1)[-1]
        if k in dead or leaf not in decl or leaf in live:
            continue
        hits = []
        for rel in orphans:
            for n, line in enumerate((root / rel).read_text(encoding="utf-8").splitlines(), 1):
                if re.search(rf"\b{re.escape(leaf)}\b", line) and len(hits) < PER_SCOPE:
                    hits.append(f"verl/{rel}:{n}")
        if hits:
            out[k] = {"read_in": hits}
    return out


def build() -> dict[str, Any]:
    from importlib.metadata import version

    root = verl_root()
    _ENGINE_SCOPES.clear()
    _ENGINE_SCOPES.update(engine_scopes(root))
    orphans = orphan_modules(root)
    _ORPHANS.clear()
    _ORPHANS.update(orphans)
    keys = key_paths()
    leaves: dict[str, list[str]] = defaultdict(list)
    parents: set[tuple[str, str]] = set()
    segments: set[str] = set()
    for k in keys:
        parts = k.split(".")
        leaves[parts[-1]].append(k)
        segments.update(parts)
        for i in range(1, len(parts)):
            parents.add((parts[i - 1], parts[i]))
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    managers: dict[str, dict[str, Any]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(SKIP):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        own = scope_of(rel, source)
        if own.startswith("reward_manager:"):
            managers[own] = {"any": [{"key": "reward.reward_manager.name", "in": [own.split(":", 1)[1]]}],
                             "cite": f"verl/{rel} (@register) via reward.reward_manager.name", "paths": [rel]}
        for ch, line in reads_of(tree):
            text = lines[line - 1].strip()
            scope = next((g for (f, start), g in GUARDED.items() if f == rel and text.startswith(start)), own)
            for i in range(1, len(ch)):
                leaf, before = ch[i], _norm(ch[i - 1])
                if leaf not in leaves:
                    continue
                for k in leaves[leaf]:
                    parts = k.split(".")
                    up = parts[-2] if len(parts) > 1 else ""
                    if before != up and ((before, leaf) in parents or before in segments):
                        continue  # the name before says it is another key's read
                    where = f"verl/{rel}:{line}"
                    lst = found[k][scope]
                    if where not in lst and len(lst) < PER_SCOPE:
                        lst.append(where)
    return {
        "verl_version": version("verl"),
        "generated_by": "scripts/verl_readers.py",
        "scopes": {n: {"any": [{"key": s["key"], "in": s["in"]}, *s.get("or", [])], "cite": s["cite"], "paths": s["paths"]}
                   for n, s in {**SCOPES, **_ENGINE_SCOPES}.items()} | managers
                  | {ORPHAN: {"any": [{"key": "@orphan", "in": []}], "paths": orphans,
                              "cite": "modules no code of verl imports or names (scripts/verl_readers.py orphan_modules)"}},
        "keys": {k: {s: v for s, v in sorted(found[k].items())} for k in keys if k in found},
        "unread": [k for k in keys if k not in found],
        "dead": (dead := dead_keys(root, keys, [k for k in keys if k not in found])),
        "orphan_only": orphan_only(root, found, [k for k in keys if k not in found], dead, orphans),
    }


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
