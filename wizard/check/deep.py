"""`check --deep` (and `check --verl`): run verl's own code on the config, in the sandbox (wizard._sandbox) only.

The host writes the config as a bundle folder (verl_config.yaml, the same document `--verl` always checked) into a
folder of its own, and starts `python -m wizard.check.deep_child` in the sandbox: read-only filesystem, a fresh
size-capped /tmp, no network, its own PID namespace, an environment of the allow-list plus PYTHONPATH (verl-init,
then the folder verl runs in), bounded time, memory, processes and output. What the user's files name (reward
function, reward manager, dataset class, tool classes) is imported there, never in verl-init's own process. The
answer is one JSON line on the sandbox's stdout; every process of the run is gone when `run_deep` returns.
Without bubblewrap, `--deep` refuses (one line: how to install it).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wizard import _sandbox
from wizard.check.items import OVERRIDES_FILE, bundle_doc, hydra_overrides, user_items
from wizard.check.source import Source, write_yaml
from wizard.intent.errors import Problem, UserError

TIMEOUT_S = 300.0  # importing verl (torch with it) alone takes 5-25 s on a loaded 2-core machine
LIMITS = _sandbox.Limits(wall_s=TIMEOUT_S, cpu_s=int(TIMEOUT_S), proc_memory=32 << 30, tree_memory=6 << 30,
                         nproc=256, tmp_bytes=512 << 20, file_bytes=256 << 20, output_bytes=1 << 20)
PHASES = ("config", "reward", "data", "tools")


@dataclass
class Deep:
    problems: list[Problem] = field(default_factory=list)
    verl: dict[str, Any] | None = None  # verify_with_verl's report, as a dict
    notes: list[str] = field(default_factory=list)


def refuse_without_sandbox(flag: str = "--deep") -> None:
    if not _sandbox.available():
        raise UserError(f"{flag} runs verl's code on your config only inside the bubblewrap sandbox, which is not "
                        "available here", _sandbox.INSTALL_HINT, rule="VI877", keys=(flag,))


def _binds(src: Source, doc: Any, model_dir: str | None) -> list[tuple[str, str]]:
    """Host paths under /tmp or /dev/shm the run reads (the sandbox mounts both fresh): the folder verl runs in, the
    model folder and every path the config names that exists here."""
    wanted: list[str] = []
    workdir = str(src.workdir.resolve()) if src.workdir.is_dir() else ""
    if workdir:
        wanted.append(workdir)
    if model_dir:
        wanted.append(os.path.abspath(model_dir))

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and node and len(node) < 4096 and "\0" not in node and "://" not in node:
            path = os.path.expanduser(node)
            path = path if os.path.isabs(path) else os.path.join(workdir or os.getcwd(), path)
            try:
                if os.path.exists(path):
                    wanted.append(os.path.realpath(path))
            except (OSError, ValueError):
                pass

    walk(doc)
    return _sandbox.binds_back(wanted)


def run_deep(src: Source, *, model_dir: str | None = None, phases: tuple[str, ...] = PHASES,
             limits: _sandbox.Limits = LIMITS, sft: dict[str, Any] | None = None) -> Deep:
    """verl's code on `src`'s config, in the sandbox; what raised, as findings (VI874 config, VI875 reward,
    VI876 data, VI863 tools; VI877 when the run itself stopped at a bound). phases=("sft",): an sft_trainer launch,
    `sft` its resolved {"data": ..., "model": ...} keys, built into verl's SFT dataset (VI876)."""
    refuse_without_sandbox("--deep" if set(phases) != {"config"} else "--verl")
    if phases == ("sft",):  # an sft_trainer launch: its resolved data and model keys, for verl's SFT dataset
        doc, overrides = dict(sft or {}), []
    else:
        items, engine, _ = user_items(src)
        doc = bundle_doc(src, items, only_valid=False, with_overrides=False, engine=engine)
        overrides = hydra_overrides(src, items)
    root = str(Path(__file__).resolve().parents[2])  # the folder holding verl-init's own package
    workdir = str(src.workdir.resolve()) if src.workdir.is_dir() else "/tmp"
    with tempfile.TemporaryDirectory(prefix="verl-init-deep-") as tmp:
        write_yaml(Path(tmp) / "verl_config.yaml", doc)
        (Path(tmp) / OVERRIDES_FILE).write_text(json.dumps(overrides), encoding="utf-8")
        bundle = f"{_sandbox.BIN}/bundle"
        binds = [(tmp, bundle), *_binds(src, doc, model_dir)]
        binds += _sandbox.binds_back([root])
        env = {"PYTHONPATH": f"{root}:{workdir}", "TMPDIR": "/tmp", **_sandbox.ONE_THREAD}
        argv = [sys.executable, "-B", "-m", "wizard.check.deep_child", bundle,
                os.path.abspath(model_dir) if model_dir else "", ",".join(phases)]
        r = _sandbox.run(argv, env=env, binds=binds, chdir=workdir, limits=limits)
    deep = Deep()
    if r.reason:
        deep.problems.append(Problem("VI877", "error", ("--deep",), f"verl's code on this config, run in the "
                                     f"sandbox, stopped: it {r.reason}", "run check without --deep, or check the "
                                     "reward function, dataset class and tool modules the config names"))
        return deep
    line = next((ln for ln in reversed(r.stdout.decode("utf-8", errors="replace").splitlines())
                 if ln.startswith("VI-DEEP ")), None)
    try:
        answer = json.loads(line[len("VI-DEEP "):]) if line else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        tail = r.stderr.decode("utf-8", errors="replace").strip().splitlines()
        deep.problems.append(Problem("VI877", "error", ("--deep",), "verl's code on this config, run in the sandbox, "
                                     f"gave no answer (exit status {r.status}"
                                     + (f": {tail[-1][:200]}" if tail else "") + ")",
                                     "run check without --deep; check that verl imports here (verl-init doctor)"))
        return deep
    for f in answer.get("findings") or []:
        try:
            severity = f.get("severity") if f.get("severity") in ("error", "warning") else "error"
            deep.problems.append(Problem(str(f["rule"]), severity, tuple(str(k) for k in f.get("keys") or ()),
                                         f"[--deep, {f['phase']} phase] {f['message']}", str(f.get("hint") or "")))
        except (KeyError, TypeError, ValueError):
            continue
    deep.verl = answer.get("verl") if isinstance(answer.get("verl"), dict) else None
    deep.notes = [str(n) for n in answer.get("notes") or []]
    if deep.verl:
        for c in deep.verl.get("checks") or []:
            if isinstance(c, dict) and not c.get("ok") and not c.get("skipped"):
                deep.problems.append(Problem("VI874", "error", (), f"[--deep, config phase] verl's "
                                             f"{c.get('name')}: {c.get('detail')}",
                                             "fix the key verl's message names"))
        if deep.verl.get("blocked"):
            deep.notes.append(f"verl's config checks did not run: {deep.verl['blocked']}")
    return deep


def verify_report(verl: dict[str, Any] | None, label: str) -> Any:
    """The VerifyReport `check --verl` prints, rebuilt from the sandbox's answer."""
    from wizard.verify.harness import Check, VerifyReport

    if not verl:
        return VerifyReport(label, "?", blocked="verl's checks gave no answer from the sandbox")
    checks = []
    for c in verl.get("checks") or []:
        if isinstance(c, dict):
            checks.append(Check(str(c.get("name")), bool(c.get("ok")), str(c.get("detail") or ""),
                                bool(c.get("skipped")), str(c.get("source") or "verl")))
    return VerifyReport(label, str(verl.get("verl_version") or "?"), checks,
                        {str(k): str(v) for k, v in (verl.get("substitutions") or {}).items()},
                        str(verl.get("blocked") or ""))
