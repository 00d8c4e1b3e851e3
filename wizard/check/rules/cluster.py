"""Launches that run on a Ray cluster: where checkpoints land (VI770), what a job uploads (VI771) and where Ray puts
its sockets (VI773).

VI770 (warning): verl takes trainer.default_local_dir as given (verl/trainer/config/ppo_trainer.yaml:217, relative by
default) and hands it to every rank (trainer/ppo/ray_trainer.py:986-989); each FSDP rank writes its own shard there on
its own node (utils/checkpoint/fsdp_checkpoint_manager.py:310-318). A relative folder resolves against each worker's
working folder: under `ray job submit` with a working_dir, each node's copy of it (/tmp/ray/session_*/
runtime_resources/working_dir_files/_ray_pkg_*), else the folder `ray start` ran in. With trainer.nnodes > 1 the shards
are split across nodes (verl#625, verl#1535); the bundle side says the same as VI556
(wizard.planner.stages.checkpoints, whose wording this reuses).

VI771 (error): `ray job submit --working-dir DIR` (or a runtime env's working_dir) is zipped and uploaded to the GCS,
which refuses a package of GCS_STORAGE_MAX_SIZE or more (ray/_private/runtime_env/packaging.py:446-449; the limit is
ray_constants.GRPC_CPP_MAX_MESSAGE_SIZE, read here from the installed Ray). Ray skips what the runtime env's excludes and
each folder's .gitignore / .rayignore name (packaging.py _dir_travel, get_excludes_from_ignore_files); model weights left
in the folder are uploaded (verl#696). The walk is bounded (MAX_ENTRIES, MAX_DEPTH).

VI773 (error): when verl starts Ray itself (trainer/main_ppo.py:57-74) Ray's temp root is RAY_TMPDIR, else TMPDIR
(ray/_common/utils.py:327-333), plus "ray" (get_default_ray_temp_dir); its sockets go to
<root>/session_<%Y-%m-%d_%H-%M-%S_%f>_<pid>/sockets/plasma_store (ray/_private/node.py:203-206, 774-776, 1264-1266),
and ray/_private/utils.py:1750-1762 refuses a socket path over 107 bytes (verl#1120).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import os
from pathlib import Path
from typing import Any

from wizard.check.rules.context import Ctx, Facts, script_text, submit_words
from wizard.check.rules.slurm import OWN_CLUSTER, sbatch_options

LOCAL_DIR = "trainer.default_local_dir"
WEIGHTS = (".safetensors", ".bin", ".pt", ".pth")
MAX_ENTRIES = 50_000  # files and folders the VI771 walk looks at
MAX_DEPTH = 12
MAX_IGNORE_BYTES = 1 << 16
MAX_RUNTIME_ENV_BYTES = 1 << 20
# Ray's socket path, from ray/_private/node.py: the session folder's name and the longest default socket name
SESSION_STAMP = "%Y-%m-%d_%H-%M-%S_%f"  # node.py:203-205
SOCKET_NAME = "plasma_store"  # node.py:338-339 (the raylet's is "raylet")
PID_DIGITS = 7  # Linux's largest pid_max, 4194304 (PID_MAX_LIMIT on 64-bit)
SOCKET_MAX = 108 - 1  # ray/_private/utils.py:1758 on Linux


def _flag(words: list[str], name: str) -> str | None:
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w[len(name) + 1:]
    return None


def script_commands(c: Ctx) -> str:
    """The script's lines that are not comments."""
    return "\n".join(line for line in (script_text(c) or "").splitlines() if not line.lstrip().startswith("#"))


def joins_cluster(c: Ctx) -> str:
    """Why main_ppo's ray.init attaches to a running cluster ("" when it starts its own)."""
    ex = c.src.extraction
    if submit_words(c) is not None:
        return "`ray job submit`"
    if (ex is not None and "RAY_ADDRESS" in ex.env_names) or "RAY_ADDRESS" in c.env:
        return "RAY_ADDRESS"
    if c.res.flat.get("ray_kwargs.ray_init.address"):
        return "ray_kwargs.ray_init.address"
    return ""


def job_runtime_env(c: Ctx, words: list[str]) -> tuple[dict[str, Any], str]:
    """The job's runtime env (--runtime-env FILE / --runtime-env-json, --working-dir on top) and why it could not be
    read ("" when it was, or when the submit names none)."""
    from wizard._io import UnsafeInput, read_user_file, safe_json, safe_yaml

    doc: Any = None
    why = ""
    try:
        if (text := _flag(words, "--runtime-env-json")) is not None:
            doc = safe_json(text)
        elif (path := _flag(words, "--runtime-env")) is not None:
            file = Path(path) if Path(path).is_absolute() else c.src.workdir / path
            try:
                doc = safe_yaml(read_user_file(str(file), MAX_RUNTIME_ENV_BYTES).decode("utf-8"))
            except OSError:
                why = f"the runtime env {path} is not readable here"
    except (ValueError, UnsafeInput, UnicodeError):
        why = "the job's runtime env cannot be read"
    env = dict(doc) if isinstance(doc, dict) else {}
    if (wd := _flag(words, "--working-dir")) is not None:
        env["working_dir"] = wd
    return env, why


def rule_checkpoint_nodes(c: Ctx, f: Facts) -> None:
    """VI770."""
    where = c.v(LOCAL_DIR)
    save = c.num("trainer.save_freq")
    if not isinstance(where, str) or c.unknown(LOCAL_DIR) or save is None or save <= 0:
        return
    from wizard.planner.stages.checkpoints import SHARED_STORAGE, WORKING_DIR_COPY, node_relative

    if not node_relative(where) or c.src.bundle_dir is not None:
        return  # a verl-init bundle: its plan knows where the nodes mount it (a KubeRay PVC) and says so (VI556)
    words = submit_words(c)
    job_dir = job_runtime_env(c, words)[0].get("working_dir") if words is not None else None
    nodes = f.nnodes or 1
    # a script that starts Ray itself (`ray start` / `srun ... ray start`) starts the workers in its own folder
    if not job_dir and (nodes <= 1 or c.src.kind != "script" or OWN_CLUSTER.search(script_commands(c))):
        return
    if job_dir:
        lands = WORKING_DIR_COPY.format(what=f"working_dir {job_dir} (/tmp/ray/session_*/runtime_resources/"
                                             "working_dir_files/_ray_pkg_*)")
    else:
        lands = ("in the working folder of each node's Ray workers (the folder `ray start` ran in on that node), not "
                 "the folder verl was launched from")
    split = (f"; with trainer.nnodes={nodes} each node's ranks write their shards there on their own node "
             "(fsdp_checkpoint_manager.py:310-318), so no folder holds a whole checkpoint and resume fails"
             if nodes > 1 else "")
    c.add("VI770", "warning", (LOCAL_DIR, "trainer.nnodes"),
          f"{LOCAL_DIR}={where} is relative: verl hands it to every rank as is (ray_trainer.py:986-989), so "
          f"checkpoints go {lands}{split}",
          f"set {LOCAL_DIR} to {SHARED_STORAGE}, e.g. /mnt/shared/{where}")


def ray_upload_limit(env: dict[str, str]) -> int | None:
    """GCS_STORAGE_MAX_SIZE of the installed Ray (ray/_private/runtime_env/packaging.py:53-55): RAY_max_grpc_message_size,
    else ray_constants.GRPC_CPP_MAX_MESSAGE_SIZE, read from its source without importing Ray. None without Ray."""
    if (given := env.get("RAY_max_grpc_message_size", "")).isdigit():
        return int(given)
    try:
        spec = importlib.util.find_spec("ray")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "_private" / "ray_constants.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "GRPC_CPP_MAX_MESSAGE_SIZE"
                                                for t in node.targets):
            return _int_expr(node.value)
    return None


def _int_expr(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.LShift)):
        a, b = _int_expr(node.left), _int_expr(node.right)
        if a is None or b is None:
            return None
        return a * b if isinstance(node.op, ast.Mult) else a + b if isinstance(node.op, ast.Add) else a << b
    return None


def _patterns(lines: list[str]) -> list[str]:
    return [p.strip() for p in lines if p.strip() and not p.strip().startswith(("#", "!"))]


def _matches(rel: str, is_dir: bool, patterns: list[str]) -> bool:
    """gitwildmatch, the part Ray's excludes and ignore files use: `/x` anchored, `x/` folders only, `**`, globs."""
    name = rel.rsplit("/", 1)[-1]
    for p in patterns:
        dir_only = p.endswith("/")
        p = p.strip("/") if p.startswith("/") or "/" in p.rstrip("/") else p.rstrip("/")
        if dir_only and not is_dir:
            continue
        anchored = "/" in p
        if (fnmatch.fnmatchcase(rel, p) or fnmatch.fnmatchcase(rel, p.replace("**/", ""))) if anchored else \
                fnmatch.fnmatchcase(name, p):
            return True
    return False


def _read_ignore(folder: Path) -> list[str]:
    out: list[str] = []
    names = (".rayignore",) if os.environ.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE") == "1" else (".gitignore", ".rayignore")
    for name in names:
        try:
            with open(folder / name, "rb") as fh:
                out += _patterns(fh.read(MAX_IGNORE_BYTES).decode("utf-8", errors="replace").splitlines())
        except OSError:
            pass
    return out


def weights_uploaded(root: Path, excludes: list[str]) -> tuple[int, list[tuple[int, str]], bool]:
    """Bytes of model weights Ray would zip from `root`, the largest files, and whether the walk was cut short."""
    total, files, seen = 0, [], 0
    stack: list[tuple[Path, int, list[tuple[Path, list[str]]]]] = [(root, 0, [])]
    while stack:
        folder, depth, rules = stack.pop()
        rules = rules + [(folder, _read_ignore(folder))]
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                return total, sorted(files, reverse=True)[:3], True
            rel = os.path.relpath(e.path, root).replace(os.sep, "/")
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if _matches(rel, is_dir, excludes) or any(
                    _matches(os.path.relpath(e.path, base).replace(os.sep, "/"), is_dir, pats) for base, pats in rules):
                continue
            if is_dir:
                if depth < MAX_DEPTH:
                    stack.append((Path(e.path), depth + 1, rules))
            elif e.name.endswith(WEIGHTS):
                try:
                    size = e.stat().st_size
                except OSError:
                    continue
                total += size
                files.append((size, rel))
    return total, sorted(files, reverse=True)[:3], False


def rule_working_dir_upload(c: Ctx, f: Facts) -> None:
    """VI771."""
    words = submit_words(c)
    base = str(c.src.workdir)
    if words is not None:
        env = job_runtime_env(c, words)[0]
    else:
        env = c.res.flat.get("ray_kwargs.ray_init.runtime_env") or {}
        if not isinstance(env, dict):
            return
        if "working_dir" not in env and "ray_kwargs.ray_init.runtime_env.working_dir" in c.res.flat:
            env = {**env, "working_dir": c.res.flat["ray_kwargs.ray_init.runtime_env.working_dir"]}
    wd = env.get("working_dir")
    if not isinstance(wd, str) or not wd or "://" in wd or wd.endswith(".zip"):
        return
    root = Path(wd) if Path(wd).is_absolute() else Path(base) / wd
    limit = ray_upload_limit(dict(c.env))
    if limit is None or not root.is_dir():
        return
    excludes = env.get("excludes")
    total, largest, _cut = weights_uploaded(root, _patterns([str(x) for x in excludes]) if isinstance(excludes, list)
                                             else [])
    if total < limit:
        return
    mib = 1 << 20
    names = ", ".join(f"{rel} ({size / mib:,.0f} MiB)" for size, rel in largest)
    c.add("VI771", "error", ("target",),
          f"the job's working_dir {wd} holds {total / mib:,.0f} MiB of model weights Ray would upload (e.g. {names}), "
          f"not excluded by the runtime env's excludes or a .gitignore/.rayignore: Ray zips the working_dir and refuses "
          f"a package of {limit / mib:,.0f} MiB or more (ray/_private/runtime_env/packaging.py:446-449), so the job "
          "never starts",
          "move the weights out of the working_dir (point actor_rollout_ref.model.path at them), or add "
          "\"*.safetensors\", \"*.bin\", \"*.pt\" to the runtime env's excludes (or a .rayignore there)")


def ray_socket_path(root: str, pid_digits: int = PID_DIGITS) -> str:
    """The plasma store socket Ray makes under temp root `root` (the folder that gets session_*)."""
    import datetime

    stamp = datetime.datetime(2000, 1, 1).strftime(SESSION_STAMP)
    return os.path.join(root, f"session_{stamp}_{'9' * pid_digits}", "sockets", SOCKET_NAME)


def rule_ray_socket_path(c: Ctx, f: Facts) -> None:
    """VI773."""
    if joins_cluster(c):
        return
    explicit = c.res.flat.get("ray_kwargs.ray_init._temp_dir")
    if isinstance(explicit, str) and explicit and not c.unknown("ray_kwargs.ray_init._temp_dir"):
        where, root = "ray_kwargs.ray_init._temp_dir", explicit
    else:
        ex = c.src.extraction
        found = {k: v for k, v in (ex.temp_env if ex is not None else {}).items() if c.env.get(k) != v}
        text = script_text(c)
        if text and "TMPDIR" not in found:
            for part in sbatch_options(text).get("export", "").split(","):
                name, eq, value = part.partition("=")
                if eq and name in ("RAY_TMPDIR", "TMPDIR") and name not in found:
                    found[name] = value
        if OWN_CLUSTER.search(script_commands(c)) and "--temp-dir" in script_commands(c):
            return
        name = "RAY_TMPDIR" if found.get("RAY_TMPDIR") else "TMPDIR" if found.get("TMPDIR") else ""
        if not name or not found[name].startswith("/"):
            return
        where, root = name, os.path.join(found[name], "ray")
    path = ray_socket_path(root)
    if len(path.encode("utf-8")) <= SOCKET_MAX:
        return
    digits = next(d for d in range(1, PID_DIGITS + 1) if len(ray_socket_path(root, d).encode("utf-8")) > SOCKET_MAX)
    c.add("VI773", "error", ("target",) if where != "ray_kwargs.ray_init._temp_dir" else (where,),
          f"{where}={root if where.startswith('ray_kwargs') else found[name]}: Ray puts its sockets at {path} "
          f"({len(path.encode('utf-8'))} bytes with a {PID_DIGITS}-digit process id; "
          + ("over the limit whatever the process id" if digits == 1 else f"over the limit from {digits} digits on")
          + "), and refuses an AF_UNIX path over {SOCKET_MAX} bytes "
          "(ray/_private/utils.py:1750-1762): verl's ray.init (main_ppo.py:57-74) fails at start-up with "
          "'AF_UNIX path length cannot exceed 107 bytes'",
          f"export RAY_TMPDIR to a short folder before the launch (e.g. export RAY_TMPDIR=/tmp/ray_$SLURM_JOB_ID); "
          f"it must be {SOCKET_MAX - len(ray_socket_path('/')) - (0 if where.startswith('ray_') else len('/ray'))} "
          "characters or fewer")
