"""Hydra overrides of a shell script that launches `verl.trainer.main_ppo` (or another of verl's entry points,
wizard.check.entrypoints: sft_trainer, fully_async_main, ...), read without running it.

What is understood (the patterns verl's own example scripts use):

- line continuations (`\\` + newline), comments, single / double / `$'...'` quotes, heredocs (skipped);
- variables with literal values, `export`/`declare`/`local`/`readonly`, `${VAR}`, `${VAR:-default}`,
  `${VAR-default}`, `${VAR:=default}`, `${VAR:+alt}`, `${#VAR}`, `${VAR,,}`/`${VAR^^}`, `${VAR#pat}`/
  `${VAR%pat}` (and `##`/`%%`), `${VAR/pat/rep}`;
- `$((...))` integer arithmetic (C semantics: `/` truncates toward zero);
- bash arrays: `ARR=(a "b c")`, `ARR+=(d)`, `"${ARR[@]}"`, `${ARR[*]}`, `${ARR[N]}`, `${#ARR[@]}`;
- `~` at the start of a word; the launch command anywhere on a pipeline (`... | tee log`), after a
  launcher (`"${LAUNCH[@]}" -m verl.trainer.main_ppo`, `ray job submit -- python3 -m ...`) and with
  Hydra's `--config-path/-cp`, `--config-name/-cn`, `--config-dir/-cd` flags;
- the "folder of this script" idioms (`$(dirname "$0")`, `$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)`,
  `$(realpath "$0")`, ...), which depend only on the script's own path.

Nothing is guessed. A value the script takes from its environment (unless given in `env`), from a
command substitution, from a positional parameter, or assigned inside an `if`/`case`/loop/function or
after `&&`/`||` is *unresolved*: it appears as `UNSET_<NAME>` in the override (the convention of
shared/reference/verl-examples.json) and is listed with its reason in `Extraction.unresolved`.
Only the standard library is used.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from wizard.check.entrypoints import entry_of_word, entry_words
from wizard.check.shell.arith import _eval_int
from wizard.check.shell.interp import _extract, _split_launch
from wizard.check.shell.model import (MAX_ARRAY_ITEMS, MAX_EXPR_CHARS, MAX_SCRIPT_CHARS, MAX_VALUE_CHARS, MODULE, PLACEHOLDER,
                                      Budget, Extraction, Launch, ShellLimitError, ShellSyntaxError, Unresolved)

__all__ = ["Budget", "MAX_ARRAY_ITEMS", "MAX_EXPR_CHARS", "MAX_SCRIPT_CHARS", "MAX_VALUE_CHARS", "MODULE", "PLACEHOLDER", "Extraction",
           "Launch", "ShellLimitError", "ShellSyntaxError", "Unresolved", "_eval_int", "adopt_traced", "extract",
           "extract_file", "looks_like_script"]


def extract(text: str, *, script_path: str | None = None, env: Mapping[str, str] | None = None,
            budget: Budget | None = None) -> Extraction:
    """Read a launch script; return the main_ppo command's Hydra overrides and what stays unresolved.

    `script_path` resolves `$0`/`${BASH_SOURCE[0]}` and the folder idioms; `env` holds the environment
    variables to assume (nothing from the real environment is read unless it is passed here).
    Raises ShellLimitError when the script would pass one of the reader's bounds (counted while it reads:
    wizard.check.shell.model.Budget) and ShellSyntaxError when it cannot be read as shell.
    """
    if len(text) > MAX_SCRIPT_CHARS:
        raise ShellLimitError(f"the script is longer than {MAX_SCRIPT_CHARS} characters", 1)
    budget = budget if budget is not None else Budget()
    try:
        return _extract(text, script_path, env, budget)
    except (ShellLimitError, ShellSyntaxError):
        raise
    except RecursionError:
        raise ShellLimitError("expansions nested too deeply", budget.line) from None
    except MemoryError:
        raise ShellLimitError("reading the script needs more memory than there is", budget.line) from None
    except (IndexError, KeyError, ValueError, TypeError) as exc:  # a construct this reader does not follow
        raise ShellSyntaxError(f"line {budget.line}: cannot read this construct ({type(exc).__name__})") from None


def extract_file(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Extraction:
    from wizard._io import read_user_file

    p = Path(path)
    data = read_user_file(str(p), MAX_SCRIPT_CHARS << 2)[:MAX_SCRIPT_CHARS + 1]
    return extract(data.decode("utf-8", errors="replace"), script_path=str(p), env=env)


def looks_like_script(text: str) -> bool:
    """A shell script rather than YAML: a shebang, or a line launching one of verl's entry points."""
    head = text.lstrip()[:200]
    return head.startswith("#!") or bool(_LAUNCH_LINE.search(text))


_LAUNCH_LINE = re.compile(r"(?m)^[^#\n]*(-m\s*(?:verl\.(?:trainer|experimental)|recipe)\.[\w.]+|(?:"
                          + "|".join(re.escape(w) for w in entry_words()) + r")\.py)")


def adopt_traced(ex: Extraction, module: str, args: list[str], needed: Sequence[str] = ()) -> None:
    """Take the argument vector bash really passed to main_ppo (wizard.check.bashtrace) as the launch.

    Where this reader marked a value as taken from the environment (UNSET_X) and bash, with X unset,
    expanded the same argument to that value with X empty, the marked value is kept: it says where the
    value comes from. Every other argument is bash's (branches, arrays, functions as bash ran them)."""
    static = {a.partition("=")[0]: a for a in (ex.launch.args if ex.launch else []) if PLACEHOLDER in a}
    merged = []
    for arg in args:
        key = arg.partition("=")[0]
        mine = static.get(key)
        if mine is not None and re.sub(PLACEHOLDER + r"[A-Za-z0-9_]*", "", mine) == arg:
            merged.append(mine)
        else:
            merged.append(arg)
    line = ex.launch.line if ex.launch else 0
    entry = entry_of_word(module)
    launch = Launch(line=line, args=merged, module=entry.module if entry is not None else MODULE,
                    passthrough=bool(ex.launch and ex.launch.passthrough),
                    conditional=bool(ex.launch and ex.launch.conditional))
    _split_launch(launch)
    text = " ".join(merged)
    ex.unresolved = [u for u in ex.unresolved if u.placeholder in text]
    known = {u.name for u in ex.unresolved}
    for name in needed:
        if name not in known:
            ex.unresolved.append(Unresolved(name, "the script stops without it (set -u or ${X:?})", line))
    ex.notes = [n for n in ex.notes if "conditional" not in n and "another main_ppo launch" not in n]
    ex.notes.append(f"read as bash runs it (in a sandbox, commands stubbed): {module}"
                    + (f" at line {line}" if line else ""))
    ex.launch = launch
