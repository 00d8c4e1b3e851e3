"""`verl-init` entry point: the first word picks a command, whose module (wizard/cli/<command>.py) is imported only
then; every other argument list renders a bundle (wizard/cli/render.py). Errors end here as one line each.

Imports stay light until a command needs more (see benchmarks/bench_cli.py).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Optional, Sequence

from wizard.cli.common import err
from wizard.intent.errors import Interrupted, WizardError

# command word -> module under wizard.cli holding its `main(args) -> int`
COMMANDS = {"profiles": "profiles", "keys": "keys", "rules": "rules", "verify": "verify",
            "validate-dataset": "validate_dataset", "check": "check", "plan": "plan", "doctor": "doctor",
            "smoke": "smoke"}
DEFAULT = "render"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        return _dispatch(args)
    except WizardError as exc:
        if debug:
            raise
        for problem in exc.problems:
            err(problem.line())
        return 2
    except BrokenPipeError:  # `verl-init keys | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Interrupted as exc:  # a command that knows what it left on disk says it
        from wizard.intent.text import one_line

        print(f"verl-init: {one_line(exc.what)}", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("verl-init: interrupted; nothing was written", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence; --debug shows the traceback
        if debug:
            raise
        user = _user_caused(exc)
        if user is not None:
            err(user)
            return 2
        err(f"{type(exc).__name__}: {exc} (run with --debug for the traceback; this is a bug in verl-init)")
        return 1


# OSErrors that say something about the user's files, disk or permissions, never about verl-init's code.
_USER_ERRNOS = {"EACCES": "permission denied", "EPERM": "operation not permitted", "ENOSPC": "no space left on the device",
                "EDQUOT": "disk quota exceeded", "ENAMETOOLONG": "a file or folder name is too long",
                "ENOTDIR": "a part of the path is a file, not a folder", "EISDIR": "is a folder, not a file",
                "EROFS": "read-only file system", "ELOOP": "too many levels of symbolic links",
                "ENOENT": "no such file or folder", "EEXIST": "already exists", "EXDEV": "crosses filesystems",
                "EMFILE": "too many open files", "EIO": "input/output error"}


def _user_caused(exc: BaseException) -> Optional[str]:
    """The one line for an error the user's files or disk caused (not a bug), or None for a real bug."""
    import errno

    if isinstance(exc, OSError) and errno.errorcode.get(exc.errno or -1) in _USER_ERRNOS:
        what = _USER_ERRNOS[errno.errorcode[exc.errno or -1]]
        where = exc.filename if exc.filename is not None else "?"
        where = os.fsdecode(where) if isinstance(where, bytes) else str(where)
        return (f"{where}: {what} ({exc.strerror or exc}) — check the path and its permissions, free disk space, "
                "or choose another path")
    from wizard._io import UnsafeInput

    if isinstance(exc, UnsafeInput):  # a user file refused by a bounded reader (wizard._io)
        return f"{exc} — check the file"
    if isinstance(exc, RecursionError):
        return ("an input is nested too deeply to read (RecursionError) — check the files given: a config is never "
                "nested that deep")
    if isinstance(exc, MemoryError):
        return "an input needs more memory than there is to read — check the files given: a config is never that large"
    if isinstance(exc, UnicodeDecodeError):
        return (f"a file is not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at offset {exc.start}) "
                "— save it as UTF-8")
    return None


def _dispatch(args: list[str]) -> int:
    if args and args[0] in COMMANDS:
        module, rest = COMMANDS[args[0]], args[1:]
    elif args and not args[0].startswith("-"):  # the render takes no positional argument: a mistyped command
        import difflib

        near = difflib.get_close_matches(args[0], COMMANDS, n=1)
        err(f"unknown command {args[0]!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
            + f" — the commands are: {', '.join(COMMANDS)}; with none, `verl-init [--profile NAME | --answers FILE]` "
            "renders a bundle (verl-init --help)")
        return 2
    else:
        module, rest = DEFAULT, args
    command = importlib.import_module(f"wizard.cli.{module}")
    return command.main(rest)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
