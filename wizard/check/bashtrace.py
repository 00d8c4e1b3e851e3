"""Read a launch script as bash really expands it: bash runs the script inside a sandbox and recording
stubs catch the `main_ppo` command line.

The sandbox is wizard._sandbox (bubblewrap): a read-only view of the whole filesystem, size-capped
tmpfs for /tmp and the trace folder, no network, its own process, IPC and user namespaces, an environment of the
allow-list and the variables given (nothing of verl-init's own), and it ends with the caller. `python`, `python3`,
`uv`, `ray`, `torchrun`, `hf`, `huggingface-cli`, `pip`, `nvidia-smi`, `curl`, `wget` and `git` are stubs that run
nothing: the stub of the launcher writes its argument vector to the trace folder and exits 0; `python -c ...` exits 1
(as if the module were missing, the default GPU path of verl's scripts). A wrapper prints the first launch back
through a pipe (the host opens no file the script wrote). So no command of the user's script changes anything outside
the sandbox. Time (5 s wall and CPU), memory (1 GiB a process, 1 GiB all together), processes (64), disk (64 MiB a
tmpfs), the recorded argument vector (1 MiB) and what comes back are bounded.

Where bubblewrap is missing or not allowed (no user namespaces), `available()` says so and `check`
reads the script with the static reader (wizard.check.shellargs) alone.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wizard import _sandbox as sandbox_run  # the one runner (bash, --deep, the tool import)

TIMEOUT_S = 5.0  # verl's own scripts take ~30 ms
MEMORY_BYTES = 1 << 30
FILE_BYTES = 64 << 20  # any file the run writes (its stderr, the recorded launch)
ARGV_BYTES = 1 << 20
# variables whose VALUES the trace keeps (every other exported variable: its name only)
TRACED_VALUES = ("RAY_TMPDIR", "TMPDIR", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                 "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES", "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL",
                 "NCCL_CUMEM_HOST_ENABLE", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
RETRIES = 16  # variables the script needs from its environment, added one at a time
TOTAL_S = 10.0  # every try together (with the default per-try TIMEOUT_S; scaled with a caller's timeout)
STUBS = ("python", "python3", "uv", "ray", "torchrun", "hf", "huggingface-cli", "pip", "pip3", "nvidia-smi",
         "npu-smi", "curl", "wget", "git")
OUT = sandbox_run.SCRATCH  # the stubs write the launch here (a size-capped tmpfs inside the sandbox)
BIN = sandbox_run.BIN  # the stubs, read-only, outside /tmp: a --workdir /tmp cannot hide them
TREE_MEMORY_BYTES = 1 << 30  # all of the script's processes together
PROCESSES = 64
DISK_BYTES = 64 << 20  # each writable tmpfs inside (/tmp, /dev/shm, the trace folder)
PRELUDE = BIN + "/prelude.sh"
PLACEHOLDER = "UNSET_"  # wizard.check.shellargs.PLACEHOLDER: a value the script takes from its environment

# Read by bash before the script (BASH_ENV): commands whose only effect is on files, limits or time do
# nothing (the filesystem is read-only anyway; a `mkdir logs` must not stop a `set -e` script).
_PRELUDE = """
for _vi_cmd in mkdir touch rm rmdir cp mv ln chmod chown install sleep ulimit; do
  eval "$_vi_cmd() { return 0; }"
done
unset _vi_cmd
"""

# The sandbox's command: runs the script with no way back but this folder, then prints what the stub recorded:
# the first launch (a regular file only, not a link, FIFO or device; at most VI_ARGV_BYTES + 1 bytes) and the tail of
# bash's stderr, base64 on one line each. The host reads it from a pipe with a cap: it opens nothing the script wrote.
_WRAP = r"""exec 3>&1 >/dev/null
/bin/bash --noprofile --norc "$1" 3>&- </dev/null >/dev/null 2>"$VI_TRACE_OUT/.stderr"
s=$?
n=0
for f in "$VI_TRACE_OUT"/launch-*; do [ -e "$f" ] || [ -L "$f" ] && n=$((n + 1)); done
printf 'status %d\nlaunches %d\n' "$s" "$n" >&3
f="$VI_TRACE_OUT/launch-0"
if [ -f "$f" ] && [ ! -L "$f" ]; then
  printf 'launch ' >&3; head -c "$((VI_ARGV_BYTES + 1))" -- "$f" | base64 -w0 >&3; printf '\n' >&3
fi
for part in via names temp; do
  f="$VI_TRACE_OUT/$part-0"
  if [ -f "$f" ] && [ ! -L "$f" ]; then
    printf '%s ' "$part" >&3; head -c 65536 -- "$f" | base64 -w0 >&3; printf '\n' >&3
  fi
done
f="$VI_TRACE_OUT/.stderr"
if [ -f "$f" ] && [ ! -L "$f" ]; then
  printf 'stderr ' >&3; tail -c 4096 -- "$f" | base64 -w0 >&3; printf '\n' >&3
fi
"""

# The stub: find `-m verl.trainer.main_ppo*` (or a main_ppo*.py path, or another of verl's entry points, or a
# recipe's: wizard.check.entrypoints) in its arguments and record it with what follows.
_STUB = r"""#!/bin/bash
name=${0##*/}
i=0
found=
for a in "$@"; do
  i=$((i + 1))
  if [ -n "$found" ]; then break; fi
  case "$a" in
    verl.trainer.main_ppo*|*/main_ppo*.py|main_ppo*.py@ENTRIES@) found=$i ;;
    recipe.*|*/recipe/*.py|recipe/*.py)  # a recipe's own entry module or file (entrypoints.RECIPE_MODULE)
      if [[ "$a" =~ ^(.*/)?recipe([./][A-Za-z_][A-Za-z0-9_]*)*[./]([A-Za-z0-9]+_)*main(_[A-Za-z0-9_]*)?(\.py)?$ ]]; then
        found=$i
      fi ;;
  esac
done
if [ -n "$found" ]; then
  n=0
  for f in "$VI_TRACE_OUT"/launch-*; do [ -e "$f" ] && n=$((n + 1)); done
  { printf '%s\0' "${@:found}"; } > "$VI_TRACE_OUT/launch-$n"
  # how it was started (the launcher and its words before the entry point: `ray job submit ... -- python3 -m`) and
  # the NAMES of the variables exported to it (never their values)
  { printf '%s\0' "$name" "${@:1:found-1}"; } > "$VI_TRACE_OUT/via-$n"
  compgen -e > "$VI_TRACE_OUT/names-$n"
  # and the VALUES of Ray's temp-root variables (paths; VI773 measures Ray's socket paths under them), of the
  # visible-device lists (device indices; VI934 counts the GPUs a Ray started by verl sees, VI944 compares the ROCm
  # ones), of NCCL's peer-to-peer switches (0/1/levels; VI945) and of the socket interface names (VI948) only
  exported=$'\n'$(compgen -e)$'\n'
  for v in RAY_TMPDIR TMPDIR CUDA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES \
      RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES NCCL_P2P_DISABLE NCCL_P2P_LEVEL NCCL_CUMEM_HOST_ENABLE \
      NCCL_SOCKET_IFNAME HCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME; do
    case "$exported" in *$'\n'"$v"$'\n'*) printf '%s=%s\0' "$v" "${!v}" ;; esac
  done > "$VI_TRACE_OUT/temp-$n"
  exit 0
fi
if [ "$name" != python ] && [ "$name" != python3 ]; then  # uv run ... python3 ARGS acts as that python
  i=0
  for a in "$@"; do
    i=$((i + 1))
    case "$a" in python|python3|*/python|*/python3) name=python3; shift "$i"; break ;; esac
  done
fi
case "$name" in
  python|python3)
    # the default GPU path of verl's scripts: a CUDA device, no NPU; any other Python fails as if a
    # module were missing
    if [ "$1" = -c ]; then code=$2; elif [ $# -eq 0 ] || [ "$1" = - ]; then code=$(head -c 65536); else exit 0; fi
    case "$code" in
      *get_device_name*) echo cuda; exit 0 ;;
      *cuda.is_available*) echo True; exit 0 ;;
    esac
    exit 1 ;;
esac
exit 0
"""


def _entry_patterns() -> str:
    """bash `case` patterns for the other entry points: the module, and the file with or without its folder."""
    from wizard.check.entrypoints import ENTRIES

    pats: list[str] = []
    for e in ENTRIES:
        if e.module == "verl.trainer.main_ppo":
            continue
        path = e.module.replace(".", "/") + ".py"
        pats += [e.module, "*/" + "/".join(path.split("/")[-2:]), path.rsplit("/", 1)[-1]]
    return "".join("|" + p for p in dict.fromkeys(pats))


_STUB = _STUB.replace("@ENTRIES@", _entry_patterns())


@dataclass
class Traced:
    """What bash passed to main_ppo (the arguments after the module or script), or why nothing was caught."""

    module: str | None = None
    args: list[str] = field(default_factory=list)
    launches: int = 0
    status: int | None = None
    reason: str = ""
    error: str = ""  # bash's last line on stderr when it stopped before a launch (bounded)
    via: list[str] = field(default_factory=list)  # the launcher and its words before the entry point ("ray", "job", ...)
    env_names: list[str] = field(default_factory=list)  # the variables exported to the launch: names only
    needed: list[str] = field(default_factory=list)  # variables given UNSET_<NAME> because the script stopped without
    temp_env: dict[str, str] = field(default_factory=dict)  # TRACED_VALUES as exported to the launch (values)
    # of `needed`: those bash stopped on as "unbound variable" (read under `set -u`, never set), with the line
    unbound: list[tuple[str, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.module is not None


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """bwrap and bash exist and a sandbox can be made here (user namespaces allowed)."""
    if not (sandbox_run.available() and os.path.exists("/bin/bash")):
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="vi-trace-") as tmp:
            probe = Path(tmp) / "probe.sh"
            probe.write_text("python3 -m verl.trainer.main_ppo ok\n", encoding="utf-8")
            return trace(probe, {}, _probe=True).args == ["ok"]
    except OSError:
        return False


_NEEDED = re.compile(r"line \d+: ([A-Za-z_][A-Za-z0-9_]*): ")
_UNBOUND = re.compile(r"line (\d+): ([A-Za-z_][A-Za-z0-9_]*): unbound variable")


def trace(script: str | os.PathLike[str], env: Mapping[str, str], *, workdir: str | None = None,
          timeout: float = TIMEOUT_S, _probe: bool = False) -> Traced:
    """Run `script` under bash in the sandbox; return the first main_ppo launch it made. A variable the
    script needs from its environment (`set -u`, `${X:?}`) and that `env` lacks is given the placeholder
    UNSET_<NAME> and the script run again; `needed` names them (`unbound`: those `set -u` stopped on, with the line)."""
    if not _probe and not available():
        return Traced(reason="no sandbox here (bubblewrap missing or not allowed)")
    env = dict(env)
    needed: list[str] = []
    unbound: list[tuple[str, int]] = []
    deadline = time.monotonic() + TOTAL_S * timeout / TIMEOUT_S  # all tries together: a script cannot amplify retries
    for _ in range(RETRIES + 1):
        left = deadline - time.monotonic()
        if left <= 0.05:
            return Traced(reason=f"the script's tries took over {TOTAL_S * timeout / TIMEOUT_S:g} s in all "
                                 "(check's bound on reading a launch script)", needed=needed)
        result = _trace_once(script, env, workdir, min(timeout, left))
        m = _NEEDED.search(result.error)
        if result.ok or not m or m.group(1) in env:
            break
        needed.append(m.group(1))
        u = _UNBOUND.search(result.error)
        if u is not None and u.group(2) == m.group(1):
            unbound.append((u.group(2), int(u.group(1))))
        env[m.group(1)] = PLACEHOLDER + m.group(1)
    result.needed, result.unbound = needed, unbound
    return result


def _trace_once(script: str | os.PathLike[str], env: Mapping[str, str], workdir: str | None,
                timeout: float = TIMEOUT_S) -> Traced:
    path = Path(script).resolve()
    workdir = workdir or str(path.parent)
    with tempfile.TemporaryDirectory(prefix="vi-trace-") as tmp:
        stubs = Path(tmp) / "bin"
        stubs.mkdir()
        for name in STUBS:
            stub = stubs / name
            stub.write_text(_STUB, encoding="utf-8")
            stub.chmod(0o755)
        (stubs / "prelude.sh").write_text(_PRELUDE, encoding="utf-8")
        (stubs / "wrap.sh").write_text(_WRAP, encoding="utf-8")
        binds = [(shown, shown) for shown in dict.fromkeys((str(path.parent), workdir))  # under the fresh /tmp
                 if shown == "/tmp" or shown.startswith("/tmp/")]
        full = {**{k: v for k, v in env.items() if k not in ("PATH", "HOME")}, "HOME": env.get("HOME", "/tmp"),
                "VI_TRACE_OUT": OUT, "BASH_ENV": PRELUDE, "VI_ARGV_BYTES": str(ARGV_BYTES)}
        limits = sandbox_run.Limits(wall_s=timeout, cpu_s=max(1, int(timeout)), proc_memory=MEMORY_BYTES,
                                    tree_memory=TREE_MEMORY_BYTES, nproc=PROCESSES, tmp_bytes=DISK_BYTES,
                                    file_bytes=FILE_BYTES, output_bytes=4 * ARGV_BYTES)
        result = sandbox_run.run(["/bin/bash", "--noprofile", "--norc", f"{BIN}/wrap.sh", str(path)], env=full,
                                 binds=[(str(stubs), BIN), *binds], chdir=workdir, limits=limits)
    return _parse(result)


def _parse(result: sandbox_run.Result) -> Traced:
    """What wrap.sh printed: `status N`, `launches N`, then base64 lines of the first launch and of bash's stderr
    tail. Anything else (a script may write there too) is ignored; nothing here is trusted beyond its size."""
    if result.reason:
        return Traced(reason=f"bash {result.reason}")
    fields: dict[str, str] = {}
    for line in result.stdout.decode("ascii", errors="replace").splitlines():
        key, _, value = line.partition(" ")
        if key in ("status", "launches", "launch", "stderr", "via", "names", "temp") and key not in fields:
            fields[key] = value.strip()
    try:
        status = int(fields.get("status", ""))
        count = int(fields.get("launches", "0"))
        raw = base64.b64decode(fields.get("launch", ""), validate=False)
        err = base64.b64decode(fields.get("stderr", ""), validate=False)
        via = base64.b64decode(fields.get("via", ""), validate=False).decode("utf-8", errors="replace")
        names = base64.b64decode(fields.get("names", ""), validate=False).decode("ascii", errors="replace")
        temp = base64.b64decode(fields.get("temp", ""), validate=False).decode("utf-8", errors="replace")
    except (ValueError, binascii.Error):
        return Traced(status=result.status, reason="bash's trace could not be read")
    tail = err.decode("utf-8", errors="replace").strip().splitlines()
    if not count or not raw:
        last = next((line for line in reversed(tail) if not line.startswith("+")), "")
        return Traced(status=status, reason=f"bash reached no verl launch (exit status {status})", error=last[:300])
    if len(raw) > ARGV_BYTES:
        return Traced(status=status, reason=f"the launch's arguments exceed {ARGV_BYTES >> 20} MiB")
    words = raw.decode("utf-8", errors="replace").split("\0")[:-1]
    if not words:
        return Traced(status=status, reason="empty launch")
    return Traced(module=words[0], args=words[1:], launches=count, status=status, via=via.split("\0")[:-1][:256],
                  env_names=[n for n in names.split() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)][:4096],
                  temp_env={k: v[:4096] for k, _, v in (p.partition("=") for p in temp.split("\0")[:-1])
                            if k in TRACED_VALUES})
