"""The only writer: a rendered bundle goes to disk atomically, or not at all.

How a bundle is written, and what is on disk at every instant:

1. The files are written into a temporary folder beside `out` (`.<name>.tmp-XXXX`). `out` is untouched.
2. With `--force` and an existing bundle, every file of the old bundle that the new render does not
   produce (data/*.parquet, checkpoints/, outputs/, logs, files you added) is hard-linked into the
   temporary folder: the new bundle carries them and the old one is untouched. A file that cannot be
   linked (another filesystem, e.g. a mount inside the bundle) stops the write before anything moves.
3. The two folders are swapped in one step (Linux renameat2 RENAME_EXCHANGE): `out` holds the old
   bundle, then the new one, never nothing. Where the exchange is not available, the old bundle is
   first renamed to a backup folder whose path is printed, and renamed back on any failure.
4. The old bundle (now only links to files the new one also holds) is removed.

Every bundle records the files it rendered, with their SHA-256, in `.verl-init-files.json` (MANIFEST). With
`--force`, a file the old bundle rendered (in its manifest, unchanged since) that the new render does not produce
(e.g. k8s/rayjob.yaml after cluster=kuberay became cluster=ray) is not carried: it would describe another run.
A rendered file you edited since, and every file you added, is carried as before.

Ctrl-C and SIGTERM are held during the write (handlers are installed around it and the previous ones
restored): the temporary folder is removed and the message says what is on disk (`Interrupted`). An
OSError (permission denied, disk full, name too long, a file where a folder should be ...) becomes one
`UserError` line naming the path and what to do.

Test hook: with `VERL_INIT_TEST_PAUSE_AT=<step>` in the environment the writer prints
`verl-init: test pause at <step>` on stderr and waits (up to 30 s, less if a signal arrives) at that
step, so tests can kill it there. Steps: `tmp` (temporary folder made, empty), `written` (new bundle
complete in the temporary folder), `backup` (fallback only: old bundle at the backup path, `out`
absent), `swapped` (new bundle at `out`, old one not yet removed).
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, Iterator, Mapping, Optional

from wizard.intent.errors import Interrupted, UserError
from wizard.intent.text import one_line, out_problem, shown
from wizard.renderer.render import EXECUTABLE

PAUSE_ENV = "VERL_INIT_TEST_PAUSE_AT"


def _check_names(files: Mapping[str, str]) -> None:
    for name in files:
        p = PurePosixPath(name)
        if p.is_absolute() or ".." in p.parts or not p.parts:
            raise UserError(f"refusing to write outside the bundle ({name!r})", "report this as a bug", rule="VI901")


def check_out(out: str | os.PathLike[str]) -> None:
    """Refuse an output folder name with control characters (a trailing newline ...) or undecodable bytes."""
    problem = out_problem(os.fspath(out))
    if problem is not None:
        raise UserError(problem.message, problem.hint, rule="VI902", keys=("--out",))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------------------------------------
# OSError -> one line naming the path and what to do


def os_error(exc: OSError, path: Any, doing: str = "write") -> UserError:
    """A user-caused OSError as a UserError naming `path` (or the path the error names)."""
    where = exc.filename if exc.filename is not None else path
    where_s = shown(os.fsdecode(where) if isinstance(where, bytes) else str(where))
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM):
        what, hint = f"permission denied: cannot {doing} {where_s}", "choose a folder you can write to, or fix its permissions"
    elif code in (errno.ENOSPC, errno.EDQUOT):
        what, hint = f"no space left on the device (or quota exceeded) writing {where_s}", "free some space, or choose --out on another disk"
    elif code == errno.ENAMETOOLONG:
        what, hint = f"a file or folder name is too long: {where_s}", "choose a shorter --out (at most 255 bytes per folder name)"
    elif code in (errno.ENOTDIR, errno.EEXIST):
        what, hint = f"a part of the path is a file, not a folder: {where_s}", "choose another --out"
    elif code == errno.EROFS:
        what, hint = f"read-only file system: cannot {doing} {where_s}", "choose --out on a writable disk"
    elif code == errno.ELOOP:
        what, hint = f"too many levels of symbolic links: {where_s}", "fix the links, or choose another --out"
    elif code == errno.ENOENT:
        what, hint = f"no such file or folder: {where_s}", "check the path (a dangling symbolic link?)"
    else:
        what, hint = f"cannot {doing} {where_s}: {exc.strerror or exc}", "check the path and the disk, or choose another --out"
    return UserError(what, hint, rule="VI000", keys=("--out",))


# ---------------------------------------------------------------------------------------------
# signals and the test hook


@contextmanager
def _held_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM are recorded instead of acting, until the block ends; previous handlers restored."""
    pending: list[int] = []
    previous: dict[int, Any] = {}

    def hold(signum: int, frame: Any) -> None:
        pending.append(signum)

    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, hold)
            except ValueError:  # not the main thread: signals reach the main thread anyway
                pass
        yield pending
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _pause(step: str, pending: list[int]) -> None:
    """The test hook (see the module doc): wait at `step` until a signal arrives or 30 s pass."""
    if os.environ.get(PAUSE_ENV) != step:
        return
    print(f"verl-init: test pause at {step}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 30
    while not pending and time.monotonic() < deadline:
        time.sleep(0.02)


# ---------------------------------------------------------------------------------------------
# swapping two folders


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):  # filesystem or kernel without RENAME_EXCHANGE
        return False
    raise OSError(code, os.strerror(code), str(b))


# ---------------------------------------------------------------------------------------------
# carrying the old bundle's own files over


MANIFEST = ".verl-init-files.json"  # {"files": {relative path: sha256 of the rendered text}}


def manifest_text(files: Mapping[str, str]) -> str:
    import hashlib
    import json

    digests = {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in sorted(files.items())}
    return json.dumps({"files": digests}, indent=1) + "\n"


def _stale(old: Path, rendered: set[str]) -> set[str]:
    """Files the old bundle rendered (its manifest), unchanged since, that the new render does not produce."""
    import hashlib
    import json

    try:
        with open(old / MANIFEST, "rb") as fh:
            recorded = json.loads(fh.read(4 << 20)).get("files", {})
    except (OSError, ValueError, AttributeError):
        return set()
    out = set()
    for name, digest in recorded.items() if isinstance(recorded, dict) else ():
        if not isinstance(name, str) or name in rendered or name == MANIFEST or os.path.isabs(name) \
                or ".." in PurePosixPath(name).parts:
            continue
        path = old / name
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > 64 << 20:
                continue
            if hashlib.sha256(path.read_bytes()).hexdigest() == digest:
                out.add(os.path.normpath(name))
        except OSError:
            continue
    return out


def _carry_over(old: Path, new: Path, rendered: set[str]) -> list[str]:
    """Hard-link every file of `old` that the render does not produce into `new` (same relative path), except the
    old bundle's own rendered files the new one no longer renders (_stale).

    Returns the relative paths carried. Raises UserError (nothing moved yet) for a file in the way of a
    rendered one or a file that cannot be linked."""
    rendered_dirs = {str(p) for name in rendered for p in PurePosixPath(name).parents if str(p) != "."}
    stale = _stale(old, rendered)
    carried: list[str] = []
    blocked: list[str] = []
    for root, dirs, names in os.walk(old):
        rel_root = os.path.relpath(root, old)
        for d in list(dirs):
            rel = os.path.normpath(os.path.join(rel_root, d))
            src = os.path.join(root, d)
            if os.path.islink(src):  # a link to a folder is carried as a link, never followed
                dirs.remove(d)
                names.append(d)
                continue
            if rel in rendered:
                blocked.append(rel + "/")
                dirs.remove(d)
                continue
            dest = new / rel
            if not dest.is_dir():
                dest.mkdir()
            os.chmod(dest, stat.S_IMODE(os.lstat(src).st_mode))
        for n in names:
            rel = os.path.normpath(os.path.join(rel_root, n))
            if rel in rendered or rel in stale:
                continue  # replaced by the new render, or a file of the old render the new one does not make
            if rel in rendered_dirs:
                blocked.append(rel)
                continue
            src = os.path.join(root, n)
            try:
                if os.path.islink(src):
                    os.symlink(os.readlink(src), new / rel)
                else:
                    os.link(src, new / rel, follow_symlinks=False)
            except OSError as exc:
                if exc.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
                    blocked.append(f"{rel} ({exc.strerror})")
                    continue
                raise
            carried.append(rel)
    stale_dirs = {str(p) for name in stale for p in PurePosixPath(name).parents if str(p) != "."}
    for d in sorted(stale_dirs, key=lambda x: -x.count("/")):  # folders only stale files filled (e.g. k8s/)
        if d not in rendered_dirs and (new / d).is_dir() and not any((new / d).iterdir()):
            (new / d).rmdir()
    if blocked:
        listed = ", ".join(shown(b) for b in blocked[:8]) + (f" and {len(blocked) - 8} more" if len(blocked) > 8 else "")
        raise UserError(f"--force cannot carry these files of the old bundle into the new one: {listed}",
                        "move them out of the bundle folder first (they are your data), or choose another --out",
                        rule="VI903", keys=("--out",))
    return carried


# ---------------------------------------------------------------------------------------------


def _target_of(out: str | os.PathLike[str]) -> Path:
    """`out` as the folder to write: a link to a folder is followed; a dangling link is refused."""
    target = Path(out)
    if target.is_symlink():
        if not target.exists():
            raise UserError(f"is a symbolic link to nothing ({shown(str(target))} -> {shown(os.readlink(target))})",
                            "create the folder it points to, remove the link, or choose another --out",
                            rule="VI902", keys=("--out",))
        target = Path(os.path.realpath(target))
    return target


def _pinned(path: Path) -> bool:
    """A regular file marked immutable or append-only (chattr +i / +a): it can be neither replaced nor removed,
    so a re-render would leave the old bundle behind. Linux only (FS_IOC_GETFLAGS); False where unknown."""
    if not sys.platform.startswith("linux") or path.is_symlink() or not path.is_file():
        return False
    import array
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, 0x80086601, flags, True)  # FS_IOC_GETFLAGS
        return bool(flags[0] & 0x30)  # FS_IMMUTABLE_FL | FS_APPEND_FL
    except OSError:
        return False
    finally:
        os.close(fd)


def _make_parent(parent: Path) -> None:
    for p in [*reversed(parent.parents), parent]:
        if p.exists() and not p.is_dir():
            raise UserError(f"a part of the path is a file, not a folder ({shown(str(p))})", "choose another --out",
                            rule="VI902", keys=("--out",))
    parent.mkdir(parents=True, exist_ok=True)


def _temp_prefix(name: str, kind: str) -> str:
    """`.<name>.<kind>-`: the name cut to 64 bytes, so a 255-byte folder name still gets a temporary sibling."""
    raw = os.fsencode(name)
    return f".{os.fsdecode(raw[:64]) if len(raw) > 64 else name}.{kind}-"


def write_bundle(files: Mapping[str, str], out: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write `files` into folder `out` (see the module doc for what is on disk at every instant).

    An existing non-empty folder is refused unless `force`; with `force` the rendered files are replaced
    and every other file of the old bundle (data, checkpoints, outputs, logs) is kept."""
    _check_names(files)
    check_out(out)
    files = {**files, MANIFEST: manifest_text(files)}
    try:
        return _write(files, out, force)
    except OSError as exc:
        raise os_error(exc, out) from None


def _write(files: Mapping[str, str], out: str | os.PathLike[str], force: bool) -> Path:
    shown_out = os.fspath(out)
    target = _target_of(out)
    if target.exists() and not target.is_dir():
        raise UserError(f"output path exists and is not a folder ({shown(str(target))})", "choose another --out",
                        rule="VI902", keys=("--out",))
    existing = target.is_dir()
    if existing and any(target.iterdir()) and not force:
        raise UserError(
            f"output folder is not empty ({shown(str(target))})",
            "choose another --out, or pass --force to re-render into it (your other files there are kept)",
            rule="VI903", keys=("--out",),
        )
    resolved = target.resolve()
    cwd = Path.cwd().resolve()
    if existing and force and (resolved == cwd or resolved in cwd.parents):
        raise UserError(f"--force would replace the folder this command runs in ({shown(str(target))})",
                        "run verl-init from outside it, or choose another --out", rule="VI903", keys=("--out",))
    parent = resolved.parent
    _make_parent(parent)
    pinned = [name for name in files if existing and _pinned(resolved / name)]
    if pinned:
        raise UserError(f"--force cannot replace {', '.join(shown(n) for n in pinned[:8])} in {shown(str(target))}: "
                        "immutable or append-only (chattr +i / +a)",
                        "remove the attribute (chattr -i FILE, as root), or choose another --out", rule="VI903",
                        keys=("--out",))

    with _held_signals() as pending:
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(target.name, "tmp"), dir=parent))
        backup: Optional[Path] = None  # fallback only: where the old bundle waits
        swapped = False
        try:
            _pause("tmp", pending)
            _stop_if(pending, tmp, shown_out, existing)
            tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; the bundle gets the mode any new folder would
            for name, text in files.items():
                dest = tmp / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text, encoding="utf-8")
                if name in EXECUTABLE or name.endswith(".sh") or name.endswith(".sbatch"):
                    dest.chmod(0o755)
                _stop_if(pending, tmp, shown_out, existing)
            if existing:
                _carry_over(resolved, tmp, set(files))
                os.chmod(tmp, stat.S_IMODE(os.stat(resolved).st_mode))
            _pause("written", pending)
            _stop_if(pending, tmp, shown_out, existing)
            if existing and _exchange(tmp, resolved):
                swapped = True  # `out` is the new bundle; tmp holds the old one
            else:
                if existing:
                    backup = Path(tempfile.mkdtemp(prefix=_temp_prefix(target.name, "old"), dir=parent))
                    print(f"verl-init: replacing {shown_out}; until the new bundle is in place the old one is at "
                          f"{one_line(str(backup))}", file=sys.stderr, flush=True)
                    os.rename(resolved, backup)
                    _pause("backup", pending)
                os.rename(tmp, resolved)
                swapped = True
        except BaseException:
            if not swapped:
                if backup is not None and not resolved.exists() and backup.exists():
                    os.rename(backup, resolved)
                shutil.rmtree(tmp, ignore_errors=True)
                if backup is not None and backup.is_dir() and not any(backup.iterdir()):
                    backup.rmdir()  # made, but the old bundle never moved into it
            raise
        _pause("swapped", pending)
        old = backup if backup is not None else (tmp if existing else None)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        if pending:
            raise Interrupted(f"interrupted after the new bundle was in place: {shown_out} is complete",
                              pending[0])
    return target


def _stop_if(pending: list[int], tmp: Path, out: str, existing: bool) -> None:
    """A held signal before the swap: remove the temporary folder and say that `out` is unchanged."""
    if not pending:
        return
    shutil.rmtree(tmp, ignore_errors=True)
    if existing:
        raise Interrupted(f"interrupted; nothing was written: the old bundle at {out} is unchanged", pending[0])
    raise Interrupted(f"interrupted; nothing was written ({out} was not created)", pending[0])
