"""Read a launch script as bash really expands it: bash runs the script inside a sandbox and recording
stubs catch the `main_ppo` command line.

The sandbox (bubblewrap, `bwrap`) gives bash a read-only view of the whole filesystem, a fresh empty /tmp,
no network, its own process and IPC namespaces (nothing outside can be signalled), no environment but the
one given, and ends with the caller. `python`, `python3`, `uv`, `ray`, `torchrun`, `hf`, `huggingface-cli`,
`pip`, `nvidia-smi`, `curl`, `wget` and `git` are stubs that run nothing: the stub of the launcher writes
its argument vector to the one writable folder and exits 0; `python -c ...` exits 1 (as if the module
were missing, the default GPU path of verl's scripts). So no command of the user's script changes anything
outside the sandbox's /tmp, which is thrown away. Time (5 s wall, 5 s CPU), memory (1 GiB address
space), the recorded argument vector (1 MiB) and bash's output (discarded) are bounded.

Where bubblewrap is missing or not allowed (no user namespaces), `available()` says so and `check`
reads the script with the static reader (wizard.check.shellargs) alone.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

TIMEOUT_S = 5.0  # verl's own scripts take ~30 ms
MEMORY_BYTES = 1 << 30
FILE_BYTES = 64 << 20  # any file the run writes (its stderr, the recorded launch)
ARGV_BYTES = 1 << 20
RETRIES = 16  # variables the script needs from its environment, added one at a time
STUBS = ("python", "python3", "uv", "ray", "torchrun", "hf", "huggingface-cli", "pip", "pip3", "nvidia-smi",
         "npu-smi", "curl", "wget", "git")
OUT = "/tmp/vi-trace-out"
BIN = "/tmp/vi-trace-bin"
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

# The stub: find `-m verl.trainer.main_ppo*` (or a main_ppo*.py path) in its arguments and record what follows.
_STUB = r"""#!/bin/bash
name=${0##*/}
i=0
found=
for a in "$@"; do
  i=$((i + 1))
  if [ -n "$found" ]; then break; fi
  case "$a" in
    verl.trainer.main_ppo*|*/main_ppo*.py|main_ppo*.py) found=$i ;;
  esac
done
if [ -n "$found" ]; then
  n=$(ls "$VI_TRACE_OUT" | wc -l)
  { printf '%s\0' "${@:found}"; } > "$VI_TRACE_OUT/launch-$n"
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


@dataclass
class Traced:
    """What bash passed to main_ppo (the arguments after the module or script), or why nothing was caught."""

    module: str | None = None
    args: list[str] = field(default_factory=list)
    launches: int = 0
    status: int | None = None
    reason: str = ""
    error: str = ""  # bash's last line on stderr when it stopped before a launch (bounded)
    needed: list[str] = field(default_factory=list)  # variables given UNSET_<NAME> because the script stopped without

    @property
    def ok(self) -> bool:
        return self.module is not None


def _bwrap_argv(script: Path, workdir: str, out: str, stubs: str, env: Mapping[str, str]) -> list[str]:
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--bind", out, OUT, "--ro-bind", stubs, BIN]
    for shown in dict.fromkeys((str(script.parent), workdir)):  # still visible when under the fresh /tmp
        if shown == "/tmp" or shown.startswith("/tmp/"):
            argv += ["--ro-bind", shown, shown]
    argv += ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--chdir", workdir]
    full = {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", **{k: v for k, v in env.items() if k != "PATH"},
            "VI_TRACE_OUT": OUT, "BASH_ENV": PRELUDE}
    for k, v in full.items():
        if k and "=" not in k and "\0" not in k + v:
            argv += ["--setenv", k, v]
    return argv + ["/bin/bash", "--noprofile", "--norc", str(script)]


def _limits() -> None:  # in the child, before bwrap starts
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (int(TIMEOUT_S), int(TIMEOUT_S) + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """bwrap and bash exist and a sandbox can be made here (user namespaces allowed)."""
    if not (shutil.which("bwrap") and os.path.exists("/bin/bash")):
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="vi-trace-") as tmp:
            probe = Path(tmp) / "probe.sh"
            probe.write_text("python3 -m verl.trainer.main_ppo ok\n", encoding="utf-8")
            return trace(probe, {}, _probe=True).args == ["ok"]
    except OSError:
        return False


_NEEDED = re.compile(r"line \d+: ([A-Za-z_][A-Za-z0-9_]*): ")


def trace(script: str | os.PathLike[str], env: Mapping[str, str], *, workdir: str | None = None,
          timeout: float = TIMEOUT_S, _probe: bool = False) -> Traced:
    """Run `script` under bash in the sandbox; return the first main_ppo launch it made. A variable the
    script needs from its environment (`set -u`, `${X:?}`) and that `env` lacks is given the placeholder
    UNSET_<NAME> and the script run again; `needed` names them."""
    if not _probe and not available():
        return Traced(reason="no sandbox here (bubblewrap missing or not allowed)")
    env = dict(env)
    needed: list[str] = []
    for _ in range(RETRIES + 1):
        result = _trace_once(script, env, workdir, timeout)
        m = _NEEDED.search(result.error)
        if result.ok or not m or m.group(1) in env:
            break
        needed.append(m.group(1))
        env[m.group(1)] = PLACEHOLDER + m.group(1)
    result.needed = needed
    return result


def _trace_once(script: str | os.PathLike[str], env: Mapping[str, str], workdir: str | None,
                timeout: float = TIMEOUT_S) -> Traced:
    path = Path(script).resolve()
    with tempfile.TemporaryDirectory(prefix="vi-trace-") as tmp:
        out, stubs = Path(tmp) / "out", Path(tmp) / "bin"
        out.mkdir()
        stubs.mkdir()
        for name in STUBS:
            stub = stubs / name
            stub.write_text(_STUB, encoding="utf-8")
            stub.chmod(0o755)
        (stubs / "prelude.sh").write_text(_PRELUDE, encoding="utf-8")
        argv = _bwrap_argv(path, workdir or str(path.parent), str(out), str(stubs), env)
        try:
            with open(Path(tmp) / "stderr", "w+b") as err:
                proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                      timeout=timeout, preexec_fn=_limits, check=False)
                err.seek(max(0, err.seek(0, os.SEEK_END) - 4096))
                tail = err.read().decode("utf-8", errors="replace").strip().splitlines()
            status: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            return Traced(reason=f"bash did not finish within {timeout:g} s")
        launches = sorted(out.iterdir(), key=lambda p: int(p.name.rsplit("-", 1)[-1]))
        if not launches:
            last = next((line for line in reversed(tail) if not line.startswith("+")), "")
            return Traced(status=status, reason=f"bash reached no main_ppo launch (exit status {status})",
                          error=last[:300])
        first = launches[0]
        if first.stat().st_size > ARGV_BYTES:
            return Traced(status=status, reason=f"the launch's arguments exceed {ARGV_BYTES >> 20} MiB")
        words = first.read_bytes().decode("utf-8", errors="replace").split("\0")[:-1]
        if not words:
            return Traced(status=status, reason="empty launch")
        module = words[0]
        return Traced(module=module, args=words[1:], launches=len(launches), status=status)
