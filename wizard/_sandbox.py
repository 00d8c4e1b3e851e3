"""The one sandbox verl-init runs untrusted code in: `run(argv, ...)` with bubblewrap (`bwrap`). Ground floor of the
import layers (the planner, check and verify all use it).

Used by the bash expansion of launch scripts (wizard.check.bashtrace), by `check --deep` (wizard.check.deep) and by
the planner's tool check (wizard.planner.agent.import_problem). Nothing else in verl-init imports or executes what a
checked file names.

What holds inside:
- the whole filesystem read-only; a fresh /tmp, /dev/shm and a scratch folder /dev/vi-out, each a size-capped tmpfs
  (disk); /dev itself read-only; the caller's own files (stubs, the config under test) bound read-only at /dev/vi-bin;
  the running Python's installation bound read-only at its own path when it lies under /tmp (a venv there);
- no network, its own PID, IPC, UTS and user namespaces (--unshare-all), a new session, and it dies with its parent;
- an empty environment but for an allow-list (PATH, HOME=/tmp, LANG, and what the caller passes explicitly):
  bubblewrap itself is started with that environment, so not even /proc/1/environ holds a variable of the caller;
- limits for the whole tree: time (wall and CPU), memory per process (RLIMIT_AS) and for all of them together,
  process count (RLIMIT_NPROC, a pids cgroup where one can be made, and a watcher on the process tree), file size
  (RLIMIT_FSIZE), and output: stdout and stderr are read through pipes with a cap applied while reading.
- The host opens no file the sandbox wrote: what comes back, comes back through those pipes. `read_capped` is the
  one reader for a path the sandbox may have touched (O_NOFOLLOW, regular file only, capped while reading).
- When the command ends, is killed or overruns, every process of the tree is gone before `run` returns.
"""

from __future__ import annotations

import functools
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

BIN = "/dev/vi-bin"  # the caller's read-only files (never under /tmp: a --workdir /tmp cannot hide them)
SCRATCH = "/dev/vi-out"  # writable, size-capped
PATH = f"{BIN}:/usr/local/bin:/usr/bin:/bin"
# Python inside: one thread per library pool (threads count against the process limit)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
              "RAY_DISABLE_IMPORT_WARNING": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) and "
                "allow unprivileged user namespaces")


@dataclass(frozen=True)
class Limits:
    wall_s: float = 5.0
    cpu_s: int = 5
    proc_memory: int = 1 << 30  # address space of each process
    tree_memory: int = 2 << 30  # resident memory of all the sandbox's processes together
    nproc: int = 64
    tmp_bytes: int = 64 << 20  # each tmpfs (/tmp, /dev/shm, the scratch folder)
    file_bytes: int = 64 << 20
    output_bytes: int = 1 << 20  # stdout and stderr, each


@dataclass
class Result:
    status: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    reason: str = ""  # "" when the command ended by itself within every limit
    left: list[int] = field(default_factory=list)  # processes of the tree still alive after the end (should be none)

    @property
    def ok(self) -> bool:
        return not self.reason


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-list: nothing of the caller's environment."""
    env = {"PATH": PATH, "HOME": "/tmp", "LANG": "C.UTF-8"}
    for k, v in (extra or {}).items():
        if k and "=" not in k and "\0" not in k + v:
            env[k] = v
    return env


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """bwrap exists and can make a sandbox here (user namespaces allowed)."""
    if not shutil.which("bwrap") or not os.path.exists("/bin/sh"):
        return False
    try:
        r = run(["/bin/sh", "-c", "echo ok"], limits=Limits(wall_s=10))
    except OSError:
        return False
    return r.ok and r.status == 0 and r.stdout.strip() == b"ok"


# the folders the sandbox mounts fresh (empty tmpfs): whatever the host keeps under them is hidden inside
FRESH = ("/tmp", "/dev/shm")


def binds_back(paths: Sequence[str]) -> list[tuple[str, str]]:
    """(path, path) read-only binds for the host paths a fresh mount would hide (under /tmp or /dev/shm, never the
    mount point itself), the outermost only: a folder bound covers what lies inside it."""
    hidden = {p for p in paths if p not in FRESH and any(p.startswith(top + "/") for top in FRESH)}
    out: list[str] = []
    for p in sorted(hidden, key=len):
        if not any(p.startswith(o + "/") for o in out):
            out.append(p)
    return [(p, p) for p in out]


def interpreter_binds() -> list[tuple[str, str]]:
    """The running Python's own installation (its prefixes and its executable's folder) where a fresh tmpfs would
    hide it: a virtual environment under /tmp stays the interpreter the sandbox runs (`sys.executable`), read-only."""
    found = [q for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
                         os.path.dirname(sys.executable)) if p
             for q in {os.path.abspath(p), os.path.realpath(p)} if os.path.isdir(q)]
    return binds_back(found)


def bwrap_argv(argv: Sequence[str], *, env: Mapping[str, str], binds: Sequence[tuple[str, str]] = (),
               chdir: str = "/tmp", limits: Limits = Limits()) -> list[str]:
    size = str(limits.tmp_bytes)
    out = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm",
           "--size", size, "--tmpfs", SCRATCH]
    for host, inside in [*interpreter_binds(), *binds]:
        out += ["--ro-bind", host, inside]
    out += ["--remount-ro", "/dev", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--chdir", chdir]
    for k, v in env.items():
        out += ["--setenv", k, v]
    return out + ["--", *argv]


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None, binds: Sequence[tuple[str, str]] = (),
        chdir: str = "/tmp", limits: Limits = Limits(), stdin: bytes | None = None) -> Result:
    """Run `argv` in the sandbox; `env` is added to the allow-list; `binds` are (host path, path inside) pairs
    bound read-only (a host path under /tmp stays visible at its own path when bound there)."""
    full = bwrap_argv(argv, env=clean_env(env), binds=binds, chdir=chdir, limits=limits)
    cgroup = _Cgroup.make(limits)
    stdin_file = None
    if stdin is not None:
        stdin_file = tempfile.TemporaryFile()
        stdin_file.write(stdin[:limits.output_bytes])
        stdin_file.seek(0)
    try:
        proc = subprocess.Popen(full, stdin=stdin_file if stdin_file is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"},
                                preexec_fn=_limits(limits, cgroup), start_new_session=True, close_fds=True)
    except BaseException:
        if cgroup:
            cgroup.remove()
        raise
    finally:
        if stdin_file is not None:
            stdin_file.close()
    try:
        return _watch(proc, limits, cgroup)
    finally:
        if cgroup:
            cgroup.remove()


def _watch(proc: subprocess.Popen[bytes], limits: Limits, cgroup: _Cgroup | None) -> Result:
    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    sel = selectors.DefaultSelector()
    for stream in bufs:
        assert stream is not None
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + limits.wall_s
    reason = ""
    seen: set[int] = set()
    next_look = 0.0
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline:
            reason = f"did not finish within {limits.wall_s:g} s"
            break
        for key, _ in sel.select(min(0.05, deadline - now)):
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf = bufs[key.fileobj]  # type: ignore[index]
            buf += chunk[:max(0, limits.output_bytes - len(buf))]
            if len(chunk) and len(buf) >= limits.output_bytes:
                reason = f"wrote more than {limits.output_bytes >> 10} KiB of output"
        if reason:
            break
        if now >= next_look:
            next_look = now + 0.05
            tree = _tree(proc.pid)
            seen |= set(tree)
            if len(tree) > limits.nproc + 2:  # bwrap and its init are not the user's
                reason = f"started more than {limits.nproc} processes"
                break
            if _rss(tree) > limits.tree_memory:
                reason = f"used more than {limits.tree_memory >> 20} MiB of memory"
                break
    sel.close()
    seen |= set(_tree(proc.pid))
    if reason:
        _kill(proc)
    try:
        status = proc.wait(timeout=max(0.5, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        reason = reason or f"did not finish within {limits.wall_s:g} s"
        _kill(proc)
        status = proc.wait()
    if status is not None and not reason:
        # the signal that ended it: a negative status, or bwrap's exit status 128 + the signal that ended its child
        sig = -status if status < 0 else status - 128 if status > 128 else 0
        if sig == signal.SIGXCPU:
            reason = f"used more than {limits.cpu_s} s of CPU"
    left = _reap(seen, cgroup)
    for stream in bufs:
        stream.close()  # type: ignore[union-attr]
    return Result(status, bytes(bufs[proc.stdout]), bytes(bufs[proc.stderr]), reason, left)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """bwrap dies; its init in the sandbox gets SIGKILL (--die-with-parent) and the kernel ends the namespace."""
    for pid in _tree(proc.pid)[::-1]:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _reap(seen: set[int], cgroup: _Cgroup | None, wait_s: float = 3.0) -> list[int]:
    """Wait until every process the tree ever showed is gone (killing what is left); what still lives."""
    end = time.monotonic() + wait_s
    alive = [p for p in seen if _alive(p)]
    if cgroup:
        alive = sorted(set(alive) | set(cgroup.pids()))
    while alive and time.monotonic() < end:
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
        alive = [p for p in alive if _alive(p)]
    return alive


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read(4096)
    except OSError:
        return False
    return data.rpartition(b")")[2].split()[:1] != [b"Z"]


def _stat_all() -> dict[int, tuple[int, int]]:
    """pid → (parent, resident pages) for every process."""
    out: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read(4096).rpartition(b")")[2].split()
            out[int(name)] = (int(fields[1]), int(fields[21]))
        except (OSError, IndexError, ValueError):
            continue
    return out


def _tree(root: int) -> list[int]:
    """`root` and its descendants, parents first."""
    table = _stat_all()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], [root] if root in table else []
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def _rss(pids: Sequence[int]) -> int:
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read(256).split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def _limits(limits: Limits, cgroup: _Cgroup | None):  # noqa: ANN202 - a preexec_fn
    def apply() -> None:
        import resource

        if cgroup:
            cgroup.join(os.getpid())
        resource.setrlimit(resource.RLIMIT_AS, (limits.proc_memory, limits.proc_memory))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        try:  # counted per user namespace (Linux ≥ 5.14); root is not bound by it (the pids cgroup and watcher are)
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.nproc + 8, limits.nproc + 8))
        except (ValueError, OSError):
            pass

    return apply


class _Cgroup:
    """A pids (and memory) cgroup v1/v2 for one run, where this process may make one; else None."""

    def __init__(self, dirs: list[str]):
        self.dirs = dirs

    @classmethod
    def make(cls, limits: Limits) -> _Cgroup | None:
        made: list[str] = []
        name = f"verl-init-sandbox-{os.getpid()}-{time.monotonic_ns()}"
        try:
            for controller, settings in (("pids", {"pids.max": str(limits.nproc + 8)}),
                                         ("memory", {"memory.limit_in_bytes": str(limits.tree_memory)})):
                base = _own_cgroup(controller)
                if base is None:
                    continue
                path = os.path.join(base, name)
                os.mkdir(path)
                made.append(path)
                for key, value in settings.items():
                    with open(os.path.join(path, key), "w") as fh:
                        fh.write(value)
        except OSError:
            cls(made).remove()
            return None
        return cls(made) if made else None

    def join(self, pid: int) -> None:
        for path in self.dirs:
            with open(os.path.join(path, "cgroup.procs"), "w") as fh:
                fh.write(str(pid))

    def pids(self) -> list[int]:
        out: set[int] = set()
        for path in self.dirs:
            try:
                with open(os.path.join(path, "cgroup.procs")) as fh:
                    out |= {int(x) for x in fh.read().split()}
            except (OSError, ValueError):
                pass
        return sorted(out)

    def remove(self) -> None:
        for path in self.dirs:
            for _ in range(50):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    for pid in self.pids():
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except OSError:
                            pass
                    time.sleep(0.02)


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup v1 folder for `controller`, when it is mounted and writable."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(","):
            base = os.path.join("/sys/fs/cgroup", controller, path.lstrip("/"))
            return base if os.access(base, os.W_OK) else None
    return None


def read_capped(path: str | os.PathLike[str], cap: int) -> bytes | None:
    """A file the sandbox may have written or linked: opened without following a link, a regular file only, and at
    most `cap` bytes read (counted while reading, not from st_size); None when it is anything else or larger."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 16, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                return None
        return b"".join(chunks)
    finally:
        os.close(fd)
