"""A Hydra override the shell rewrites before verl reads it (VI939): unquoted list brackets and dict braces.

verl's entry points take their overrides from sys.argv through Hydra (trainer/main_ppo.py:166,
trainer/sft_trainer.py:461: `@hydra.main(config_path="config", ...)`), so what counts is the word the shell passes,
not the one the script shows. Two shell expansions change an unquoted override word:

- pathname expansion of `[...]`, `*`, `?`: zsh stops the command with "no matches found: trainer.logger=[console]"
  when nothing matches (its NOMATCH option, on by default), so the launch never runs (real case verl PR#2509: the
  quickstart's `trainer.logger=['console']` in zsh; verl's docs switched to `trainer.logger=console`, which verl
  0.9.1 accepts: utils/tracking.py:62-64 wraps a string backend in a list). bash does the same with
  `shopt -s failglob`, and with `shopt -s nullglob` drops the word: the override silently vanishes and verl keeps its
  default (trainer.logger: ["console", "wandb"]). Plain bash and sh pass an unmatched pattern on unchanged, so they
  draw nothing (a `set -f` / `setopt noglob` / `unsetopt nomatch` script neither).
- brace expansion of `{a,b}` (bash and zsh, always): `trainer.logger={console,wandb}` becomes the two words
  `trainer.logger=console trainer.logger=wandb`, and a Hydra dict `+...engine_kwargs.vllm={a:1,b:2}` becomes
  `...vllm=a:1 ...vllm=b:2`; Hydra applies both and the last wins (the test composes verl's own ppo_trainer config
  with bash's words and gets trainer.logger == "wandb").

Only words shaped like an override (`[+~]key.path=value`) are read, from the script as written (wizard.check.shell.lex:
quotes kept), array elements included; a quoted value (`trainer.logger='[console]'`, `'key={a:1,b:2}'`) or one
that comes from a variable is not expanded that way and draws nothing. The oracle in the test is the shell itself
(bash with failglob / nullglob, and zsh where installed) and verl's Hydra config for the brace case.
"""

from __future__ import annotations

import re

from wizard.check.rules.context import Ctx, Facts, script_text

OVERRIDE = re.compile(r"(?:\+\+|\+|~)?[A-Za-z_][\w.@/-]*=")
GLOB = re.compile(r"[*?]|\[[^\]]*\]")
BRACE = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
ZSH = re.compile(r"\A#![^\n]*\bzsh\b")
NOGLOB = re.compile(r"^\s*(?:set\s+(?:-\w*f\w*|-o\s+noglob)|setopt\s+(?:no_?glob|no_?nomatch)|unsetopt\s+nomatch)\b",
                    re.M)
FAILGLOB = re.compile(r"^\s*shopt\s+-s\s+(?:\w+\s+)*failglob\b", re.M)
NULLGLOB = re.compile(r"^\s*shopt\s+-s\s+(?:\w+\s+)*nullglob\b", re.M)


def unquoted(word: str) -> str:
    """`word` with every quoted or expanded character replaced by `_`: what remains is what the shell expands."""
    out: list[str] = []
    i, n = 0, len(word)
    while i < n:
        c = word[i]
        if c == "\\":
            out.append("__"[: n - i])
            i += 2
        elif c == "'":
            end = word.find("'", i + 1)
            end = n - 1 if end < 0 else end
            out.append("_" * (end - i + 1))
            i = end + 1
        elif c == '"' or c == "`":
            j = i + 1
            while j < n and word[j] != c:
                j += 2 if word[j] == "\\" else 1
            out.append("_" * (min(j, n - 1) - i + 1))
            i = j + 1
        elif c == "$" and i + 1 < n and word[i + 1] in "({":
            open_, close = word[i + 1], ")" if word[i + 1] == "(" else "}"
            depth, j = 0, i + 1
            while j < n:
                depth += (word[j] == open_) - (word[j] == close)
                if depth == 0:
                    break
                j += 1
            out.append("_" * (min(j, n - 1) - i + 1))
            i = j + 1
        elif c == "$":
            m = re.match(r"\$(?:[A-Za-z_]\w*|.)?", word[i:])
            size = len(m.group(0)) if m else 1
            out.append("_" * size)
            i += size
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _shell(text: str) -> tuple[str, str]:
    """(what an unmatched glob does here: "stop" / "drop" / "", the shell's name)."""
    if NOGLOB.search(text):
        return "", ""
    if ZSH.match(text):
        return "stop", "zsh (NOMATCH)"
    if FAILGLOB.search(text):
        return "stop", "bash with failglob"
    if NULLGLOB.search(text):
        return "drop", "bash with nullglob"
    return "", ""


def rule_shell_rewritten_overrides(c: Ctx, f: Facts) -> None:
    text = script_text(c)
    if not text:
        return
    from wizard.check.shell.lex import raw_words
    from wizard.check.shell.model import ShellLimitError, ShellSyntaxError

    try:
        words = raw_words(text)
    except (ShellSyntaxError, ShellLimitError):
        return
    glob, shell = _shell(text)
    seen: set[str] = set()
    for word, line in words:
        m = OVERRIDE.match(word)
        # NAME=value without a dot is a shell assignment where it leads a command (no brace or glob expansion there)
        if m is None or word in seen or ("." not in m.group(0) and not word.startswith(("+", "~"))):
            continue
        seen.add(word)
        key = m.group(0).rstrip("=").lstrip("+~")
        value = unquoted(word[m.end():])
        fix = (f"quote the whole word: '{word}'" if "'" not in word else f'quote the whole word: "{word}"'
               if '"' not in word else "quote the value so the shell passes it unchanged")
        if BRACE.search(value):
            c.add("VI939", "error", ("target", key),
                  f"{key}: the unquoted braces in `{word}` (line {line}) are brace expansion: the shell passes "
                  "one override per comma-separated part and Hydra keeps the last, so verl never sees the value "
                  "written", fix)
        elif glob and GLOB.search(value):
            what = ("stops the script with 'no matches found' (no file matches the pattern), so verl never starts"
                    if glob == "stop" else "drops the word when no file matches it, so verl keeps its default "
                    f"for {key}")
            c.add("VI939", "error" if glob == "stop" else "warning", ("target", key),
                  f"{key}: `{word}` (line {line}) holds an unquoted glob pattern and the script runs under {shell}, "
                  f"which {what}", fix + (" (or trainer.logger=console: verl takes a single backend as a string)"
                                          if key == "trainer.logger" else ""))
