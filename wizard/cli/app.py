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
from wizard.intent.errors import WizardError

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
    except KeyboardInterrupt:
        print("verl-init: interrupted; nothing was written", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence; --debug shows the traceback
        if debug:
            raise
        err(f"{type(exc).__name__}: {exc} (run with --debug for the traceback; this is a bug in verl-init)")
        return 1


def _dispatch(args: list[str]) -> int:
    if args and args[0] in COMMANDS:
        module, rest = COMMANDS[args[0]], args[1:]
    else:
        module, rest = DEFAULT, args
    command = importlib.import_module(f"wizard.cli.{module}")
    return command.main(rest)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
