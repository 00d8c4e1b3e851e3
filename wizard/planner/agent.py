"""Multi-turn tool calling: the `agent`, `tool` and `max_turns` answers → verl's tool agent loop (VI560-VI565).

`b` is the planner's working state (wizard.planner.state.Build); this module does not import the pipeline (the
import graph has no cycle), so it is typed loosely here.

verl 0.9.1 facts, each with its source (paths under the installed `verl/`):

- Rollout is always an async server (workers/config/rollout.py:280-286 refuses mode=sync); the agent loops run on
  it for every registered engine (vllm, sglang, trtllm): experimental/agent_loop/agent_loop.py has no engine
  check, so both of verl-init's rollout engines support agent=tool.
- Two agent loops are registered: `single_turn_agent` and `tool_agent` (agent_loop.py:470 `register`,
  tool_agent_loop.py:101). A row's `agent_name` column picks one; rows without it get
  `rollout.agent.default_agent_loop` (agent_loop.py:610-612), whose default is single_turn_agent: tools configured
  but the default loop kept means the tools never fire.
- Tools: `rollout.multi_turn.tool_config_path`, a YAML list of `{class_name, config: {type: native}, tool_schema}`
  read by tools/tool_registry.py:initialize_tools_from_config (class_name imported with importlib find_spec, so
  the module must be importable where the AgentLoopWorker runs: the bundle folder is on the Ray workers' sys.path,
  as the driver's working folder (ray/_private/worker.py:2715-2718 adds it to every worker's sys.path, and workers
  start in their raylet's working folder) or a Ray job's working_dir). verl 0.9.1 ships no GSM8K tool (verl.tools
  has base_tool, function_tool, schemas, tool_registry only), so the bundle carries one. On KubeRay the pods get
  the bundle's files from its ConfigMap, mounted at the same relative path in every pod's working folder
  (renderer/artefacts/cluster.py); a class of the user's is imported from the pods' image (VI565).
- A row's `extra_info.tools_kwargs` reaches the tool: `{tool_name: {"create_kwargs": {...}}}`
  (utils/dataset/rl_dataset.py:403-410; tool_agent_loop.py:143); `interaction_kwargs` too, but 0.9.1 has no
  interaction config key any more (multi_turn.interaction_config_path is gone).
- Token arithmetic: every tool reply is part of the response (response_mask 0, so it is not trained on, but it is
  in the sequence: memory and token budgets count it), cut to `max_tool_response_length` characters
  (tool_agent_loop.py:499-500; a token holds at least one character, so at most that many tokens plus the chat
  template's few), and generation stops
  once the response reaches `response_length` (tool_agent_loop.py:290, :394): wizard.verlspec.arithmetic.turn_budget.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from wizard.planner.dataprep import GSM8K_TOOL_NAME
from wizard.verlspec.arithmetic import turn_budget
from wizard.verlspec.keys import PRE

DEFAULT_TURNS = 3
# verl's multi_turn.max_tool_response_length default (trainer/config/rollout/rollout.yaml), in characters
# (tool_agent_loop.py:499): an upper bound of the reply's tokens
TOOL_RESPONSE_TOKENS = 256
MIN_TURN_TOKENS = 128  # fewer assistant tokens per turn than this cannot reason, call a tool and answer
TOOL_FORMAT = "hermes"  # verl's default tool-call parser (rollout.yaml multi_turn.format), kept when unproven
TOOLS_DIR = "verl_init_tools"  # a package in the bundle folder: importable by verl's workers (see above)
TOOL_CONFIG = f"{TOOLS_DIR}/tool_config.yaml"
GSM8K_CLASS = f"{TOOLS_DIR}.gsm8k_tool.Gsm8kTool"
IMPORT_TIMEOUT_S = 20.0


def tool_class(tool: str) -> str:
    """The class_name verl's tool registry imports for a `tool` answer."""
    return GSM8K_CLASS if tool == "gsm8k" else tool


_IMPORTS: contextvars.ContextVar[bool] = contextvars.ContextVar("verl_init_tool_imports", default=False)
MODULE_BYTES = 1 << 20  # a module file larger than this is not parsed
NOT_TRIED = "read, not imported: its import was not tried (pass --import-tool to render, --deep to check)"


@contextlib.contextmanager
def tool_imports(allowed: bool = True) -> Iterator[None]:
    """Within this block the planner (and check's agent rules) may import the user's tool module to check it, and
    then only in the sandbox (wizard._sandbox). Outside it, a tool class is checked by reading its file."""
    token = _IMPORTS.set(allowed)
    try:
        yield
    finally:
        _IMPORTS.reset(token)


def imports_allowed() -> bool:
    return _IMPORTS.get()


def module_file(module: str, folders: Sequence[str]) -> Path | None:
    """The file Python would load for `module` from the first of `folders` that has it (a `.py` or a package's
    `__init__.py`; each package level must exist), found without importing anything."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    for folder in folders:
        base = Path(folder).joinpath(*parts)
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            try:
                if path.is_file() and all((Path(folder).joinpath(*parts[:i]) / "__init__.py").is_file()
                                          or Path(folder).joinpath(*parts[:i]).is_dir() for i in range(1, len(parts))):
                    return path
            except OSError:
                continue
    return None


def installed_folders() -> list[str]:
    """sys.path without the current folder: where an installed package lives (read, never imported)."""
    return [p for p in sys.path if p and os.path.isdir(p) and os.path.abspath(p) != os.getcwd()]


def read_class(path: Path, name: str) -> str | None:
    """None when the module file defines (or imports) `name` at its top level, else why not: a bounded static read
    (at most MODULE_BYTES, parsed with ast, never run)."""
    import ast

    try:
        with open(path, "rb") as fh:
            data = fh.read(MODULE_BYTES + 1)
    except OSError as exc:
        return f"{path.name} cannot be read ({exc.strerror})"
    if len(data) > MODULE_BYTES:
        return f"{path.name} is larger than {MODULE_BYTES >> 20} MiB: not read"
    try:
        tree = ast.parse(data.decode("utf-8", errors="replace"))
    except SyntaxError as exc:
        return f"{path.name} has a syntax error (line {exc.lineno})"
    except (RecursionError, MemoryError, ValueError):
        return f"{path.name} cannot be parsed (nested too deep)"
    defined: set[str] = set()
    for n in tree.body:
        if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            defined |= {a.asname or a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.Assign):
            defined |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            defined.add(n.target.id)
    return None if name in defined else f"{path.name} defines no {name}"


def static_problem(class_path: str, folders: Sequence[str]) -> str | None | bool:
    """`module.Class` read from `folders`: None when a module file there defines the class, a problem when the file
    does not, False when no folder holds the module."""
    module, _, name = class_path.rpartition(".")
    path = module_file(module, folders)
    return False if path is None else read_class(path, name)


@lru_cache(maxsize=64)  # the planner re-plans to confirm suggestions: one import per class and folder
def import_problem(class_path: str, cwd: str, timeout: float = IMPORT_TIMEOUT_S) -> str | None:
    """Why `module.Class` does not import (as verl's get_tool_class does it), or None: imported in the sandbox
    (wizard._sandbox: read-only filesystem, no network, clean environment, own PID namespace, bounded time, memory
    and output), with `cwd` on sys.path as the bundle folder is for verl's workers. Never in verl-init's process.
    Raises UserError when no sandbox can run here."""
    from wizard import _sandbox
    from wizard.intent.errors import UserError

    if not _sandbox.available():
        raise UserError("importing your tool module needs the bubblewrap sandbox, which is not available here",
                        _sandbox.INSTALL_HINT, rule="VI563", keys=("tool",))
    module, _, name = class_path.rpartition(".")
    code = ("import importlib, os, sys\n"
            "sys.path.insert(0, '.')\n"
            "out = os.dup(1)\n"
            "null = os.open(os.devnull, os.O_WRONLY)\n"
            "os.dup2(null, 1)\n"
            "os.dup2(null, 2)\n"
            "try:\n"
            f"    getattr(importlib.import_module({module!r}), {name!r})\n"
            "except BaseException as exc:\n"
            "    msg = ' '.join(f'{type(exc).__name__}: {exc}'.split())[:300]\n"
            "    os.write(out, ('FAIL ' + msg + '\\n').encode())\n"
            "    os._exit(1)\n"
            "os.write(out, b'OK\\n')\n"
            "os._exit(0)\n")
    folder = os.path.abspath(cwd) if cwd else "/tmp"  # "": the sandbox's own empty /tmp
    binds = [(folder, folder)] if cwd and (folder == "/tmp" or folder.startswith("/tmp/")) else []
    limits = _sandbox.Limits(wall_s=timeout, cpu_s=max(1, int(timeout)), proc_memory=16 << 30, tree_memory=4 << 30,
                             nproc=256, output_bytes=64 << 10)
    r = _sandbox.run([sys.executable, "-B", "-c", code], env={"PYTHONPATH": folder, **_sandbox.ONE_THREAD},
                     binds=binds, chdir=folder, limits=limits)
    if r.reason:
        # the wall clock or the CPU limit (cpu_s is the timeout too), whichever fires first on this machine
        timed_out = "did not finish" in r.reason or "of CPU" in r.reason
        return (f"importing {module} took longer than {timeout:g} s" if timed_out
                else f"importing {module} stopped: it {r.reason}")
    lines = [line for line in r.stdout.decode("utf-8", errors="replace").splitlines() if line.strip()]
    if r.status == 0 and lines and lines[-1] == "OK":
        return None
    fails = [line[5:] for line in lines if line.startswith("FAIL ")]
    if fails:
        return fails[-1]
    tail = [line for line in r.stderr.decode("utf-8", errors="replace").splitlines() if line.strip()]
    return (tail[-1] if tail else f"exit status {r.status}")[:300]


NO_VERL = "No module named 'verl'"  # verl-init without verl beside it cannot try a BaseTool subclass


def rules(b: Any) -> None:
    """Rule stage: the agent answers against each other, the data and the response length (VI560-VI565)."""
    a, f = b.a, b.f
    if a.agent != "tool":
        stray = [k for k in ("tool", "max_turns") if getattr(a, k) is not None]
        if stray:
            f.error("VI560", ("agent", *stray), f"{' and '.join(stray)} set but agent=single_turn: verl's single-turn "
                    "agent loop never calls a tool", "set agent=tool, or remove " + " and ".join(stray))
        return
    tool = a.tool or "gsm8k"
    turns = a.max_turns or DEFAULT_TURNS
    b.facts["agent"] = {"tool": tool, "class": tool_class(tool), "turns": turns}
    if tool == "gsm8k":
        from wizard.planner.dataprep import resolve

        fmt = resolve(a, b.base).answer_format
        if fmt != "number":
            f.error("VI561", ("tool", "answer_format"), f"tool=gsm8k checks a number after '####' but the answers are "
                    f"answer_format={fmt}", "use numeric (GSM8K-style) data, or tool=<module.Class> of your own")
    elif a.cluster == "kuberay":
        # The pods get the bundle's tool_config.yaml (and verl_init_tools/) from the ConfigMap
        # (renderer/artefacts/cluster.py), but a class of yours is imported from the image: this machine says nothing.
        module = tool.rpartition(".")[0]
        f.warning("VI565", ("tool", "cluster"), f"tool={tool} with cluster=kuberay: the pods get "
                  f"{TOOL_CONFIG} from the bundle's ConfigMap but import {module} from their image",
                  f"install {module} in the image the pods run (the image answer), where verl's agent-loop workers "
                  "import it")
    else:
        _tool_imports(b, tool)
    if a.train_files:
        f.warning("VI564", ("agent", "train_files"), "agent=tool with your own train_files: verl passes each row's "
                  "extra_info.tools_kwargs to the tool, and rows without agent_name use the default agent loop",
                  "check the files with `verl-init validate-dataset FILE --agent tool` (or let data/prepare_data.py "
                  "write them)")
    fmt, why, readers = tool_format(a.model)
    b.facts["agent"].update(format=fmt, format_why=why)
    if readers == []:
        f.warning("VI569", ("agent", "model"), f"no tool-call parser of verl reads the tool call {a.model}'s chat "
                  f"template writes ({why}): verl's tool agent loop would end every turn with no tool called",
                  "use a model whose chat template writes calls a verl parser reads (Qwen's hermes <tool_call> JSON, "
                  "for one), or register a ToolParser for this one and set multi_turn.format")
    budget = turn_budget(a.max_response_length, turns, TOOL_RESPONSE_TOKENS)
    b.facts["turn_budget"] = budget
    if budget.per_turn < MIN_TURN_TOKENS:
        need = budget.tool_tokens + turns * MIN_TURN_TOKENS
        fit = max((t for t in range(1, turns) if turn_budget(a.max_response_length, t, TOOL_RESPONSE_TOKENS).per_turn
                   >= MIN_TURN_TOKENS), default=0)
        f.error("VI562", ("max_response_length", "max_turns"),
                f"max_response_length={a.max_response_length} covers all {turns} turns: {budget.tool_replies} tool "
                f"replies of up to {TOOL_RESPONSE_TOKENS} tokens leave {max(budget.assistant_tokens, 0)} tokens for the "
                f"model's own, under {MIN_TURN_TOKENS} per turn (verl stops the conversation when the response is full)",
                f"set max_response_length ≥ {need}" + (f", or max_turns ≤ {fit}" if fit else ""))


_PROBES: dict[tuple[int, str], Any] = {}  # the wizard plans many times per walk


def tool_format(model: str) -> tuple[str, str, list[str] | None]:
    """(multi_turn.format, why, the parsers that read the model's call or None when unproven). With the model's
    tokenizer in a local folder and verl installed, verl's own parsers read the tool call the model's chat template
    writes (wizard.verlspec.toolcall): verl's default when it reads it, else the first that does. Otherwise verl's
    default, unproven; `check --deep --model-dir` proves it later."""
    import importlib.util

    from wizard.planner import overlong

    unproven = f"verl's default parser; `check --deep --model-dir` compares it with {model}'s chat template"
    folder = overlong.local_tokenizer(model)
    if folder is None or importlib.util.find_spec("verl") is None:
        return TOOL_FORMAT, unproven, None
    tok, _ = overlong.load_tokenizer(folder)
    if tok is None or not getattr(tok, "chat_template", None):
        return TOOL_FORMAT, unproven, None
    from wizard.verlspec.toolcall import probe

    key = (id(tok), tok.chat_template)  # load_tokenizer caches per folder and stamp: probe each template once
    found = _PROBES[key] if key in _PROBES else _PROBES.setdefault(key, probe(tok))
    if found.rendered is None:
        return TOOL_FORMAT, f"{model}'s chat template writes no tool call ({found.reason[:80]})", []
    turn = " ".join(found.rendered.split())[:60]
    if not found.readers:
        return TOOL_FORMAT, f"it writes {turn!r}", []
    pick = TOOL_FORMAT if TOOL_FORMAT in found.readers else found.readers[0]
    return pick, f"verl's {pick} parser reads the tool call {model}'s chat template writes ({turn!r})", found.readers


def _tool_imports(b: Any, tool: str) -> None:
    """VI563: the user's class must import where verl runs, the bundle folder (on the workers' sys.path). Checked in
    the bundle folder when known (else an empty folder) and the installed packages, then in the current folder: a
    module found only there is a file beside the answers that the bundle does not carry. By default the module files
    are read (never run); inside `tool_imports()` (render --import-tool) they are imported, in the sandbox only."""
    a, f = b.a, b.f
    bundle = b.bundle if b.bundle and os.path.isdir(b.bundle) else ""
    tried = imports_allowed()
    if tried:
        if import_problem(tool, bundle) is None:
            return
        why = import_problem(tool, b.base)
    else:
        found = static_problem(tool, [*([bundle] if bundle else []), *installed_folders()])
        if found is None:
            return
        here = static_problem(tool, [b.base])
        why = (f"no module file for {tool.rpartition('.')[0]} in {b.base} or the installed packages"
               if here is False and found is False else here if here is not False else found)
    note = "" if tried else f" ({NOT_TRIED})"
    if why is not None and NO_VERL in why:
        f.warning("VI563", ("tool",), f"tool={tool} could not be tried here: verl is not installed beside verl-init "
                  f"({why})", "install verl here to have the class checked, or check it where verl runs")
        return
    if why is None:
        module = tool.rpartition(".")[0]
        f.warning("VI563", ("tool",), f"tool={tool} is found here only in {b.base} (the folder verl-init runs in), "
                  f"not where verl runs: the bundle folder, which does not carry it{note}",
                  f"copy {module.replace('.', '/')}.py (or its package) into the bundle folder, or install it")
        return
    (f.error if a.cluster == "local" else f.warning)(
        "VI563", ("tool",), f"tool={tool} does not import here ({why}){note}: verl's tool registry imports it in "
        "every agent-loop worker", "install its package where verl runs, or put the module in the bundle "
        "folder (it is on the workers' sys.path)")


def keys(b: Any) -> None:
    """Key stage (after the rollout keys): verl's multi-turn and agent-loop keys."""
    agent = b.facts.get("agent")
    if agent is None:
        return
    s, given, budget = b.s, b.given, b.facts["turn_budget"]
    turns = agent["turns"]
    src = "answer" if "max_turns" in given else "default"
    s.set(f"{PRE}.rollout.mode", "async", "verl 0.9.1's only rollout mode: the agent loop talks to an async "
          f"{b.a.rollout_engine} server")
    s.set(f"{PRE}.rollout.multi_turn.enable", True, "agent=tool", "answer")
    s.set(f"{PRE}.rollout.multi_turn.max_assistant_turns", turns,
          "max_turns" if src == "answer" else f"{turns}: think, call the tool, answer", src)
    s.set(f"{PRE}.rollout.multi_turn.max_user_turns", turns, "tool replies count as user turns: never the binding limit")
    where = ("relative: every pod's working folder holds it, from the ConfigMap" if b.a.cluster == "kuberay"
             else "relative: run.sh starts verl in the bundle folder")
    s.set(f"{PRE}.rollout.multi_turn.tool_config_path", TOOL_CONFIG,
          f"the bundle's tool config ({agent['class']}); {where}",
          "answer" if "tool" in given else "default")
    s.set(f"{PRE}.rollout.multi_turn.max_tool_response_length", TOOL_RESPONSE_TOKENS,
          f"each tool reply cut to {TOOL_RESPONSE_TOKENS} characters (≤ as many tokens): {budget.tool_replies} replies take at most "
          f"{budget.tool_tokens} of the {budget.response_length} response tokens")
    s.set(f"{PRE}.rollout.multi_turn.format", agent["format"], agent["format_why"])
    s.set(f"{PRE}.rollout.agent.default_agent_loop", "tool_agent",
          "rows without agent_name use the tool agent loop too (data/prepare_data.py also writes agent_name)", "answer")
