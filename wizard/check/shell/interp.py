"""The static reader's interpreter: runs through a script's commands, keeps the variables it assigns at top level,
and takes the first `main_ppo` launch with its arguments expanded."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from wizard.check.entrypoints import entry_words, launch_index
from wizard.check.shell.arith import _eval_int
from wizard.check.shell.expand import _Expander
from wizard.check.shell.lex import (_ASSIGN, _CHAINS, _CLOSE, _DECLARE, _LEADING, _OPEN, _PIPES, _REDIRECTS, _SEPARATORS,
                                    _Lexer, _Tok)
from wizard.check.shell.model import (_HYDRA_FLAGS, Budget, MAX_ARRAY_ITEMS, MAX_VALUE_CHARS, PLACEHOLDER, Extraction,
                                      Launch, ShellLimitError, Unresolved, _State, _Var)


def _launch_index(words: list[str]) -> tuple[int, str] | None:
    """(index of the first argument after a verl entry point's module or file, that module), or None
    (wizard.check.entrypoints: main_ppo, sft_trainer, fully_async_main, the one-step-off main_ppo, ...)."""
    found = launch_index(words)
    return (found[0], found[1].module) if found is not None else None


_ENTRY_WORDS = entry_words()
# a Hydra override as a command's first word (never a shell assignment: a dotted key is no variable name)
_OVERRIDE_WORD = re.compile(r"^(\+\+|\+|~)?[A-Za-z_][\w-]*(\.[\w-]+)+=")
_VALUE_FLAGS = {"--cfg", "-c", "--package", "-p", "--experimental-rerun"}


def _split_launch(launch: Launch) -> None:
    """Hydra's own flags (config path/name/dir, --cfg job, ...) apart from the overrides."""
    args = launch.args
    k = 0
    while k < len(args):
        a = args[k]
        flag, eq, value = a.partition("=")
        if flag in _HYDRA_FLAGS:
            if not eq:
                value = args[k + 1] if k + 1 < len(args) else ""
                k += 1
            setattr(launch, _HYDRA_FLAGS[flag], value)
        elif a.startswith("-"):
            if a in _VALUE_FLAGS:
                k += 1
        else:
            launch.overrides.append(a)
        k += 1


def _extract(text: str, script_path: str | None, env: Mapping[str, str] | None, budget: Budget | None = None) -> Extraction:
    budget = budget if budget is not None else Budget()
    return _Interpreter(script_path, env, budget).run(_Lexer(text, budget).tokens())


class _Interpreter:
    """Runs through the commands in order; top-level assignments update the variables, the first launch is kept."""

    def __init__(self, script_path: str | None, env: Mapping[str, str] | None, budget: Budget) -> None:
        self.script = script_path
        self.state = _State(vars={}, env=dict(env or {}), script=script_path, budget=budget)
        self.result = Extraction(launch=None, script=script_path)
        self.blocks: list[str] = []  # open if/case/loop/{ }/subshell blocks

    def run(self, tokens: list[_Tok]) -> Extraction:
        blocks = self.blocks
        cmd: list[_Tok] = []
        chained = False
        for tok in tokens:
            self.state.line = tok.line
            self.state.charge(1)
            if tok.kind == "op" and tok.text in _CHAINS:
                self.command(cmd, chained)
                cmd, chained = [], True
            elif tok.kind == "op" and tok.text in _PIPES:
                self.command(cmd, chained)
                cmd = []
            elif tok.kind == "op" and tok.text == "(" and cmd and cmd[-1].kind == "word":
                cmd.append(tok)  # name() function definition
            elif tok.kind == "op" and tok.text == ")" and cmd and cmd[-1].kind == "op" and cmd[-1].text == "(":
                cmd.append(tok)
            elif tok.kind == "nl" or (tok.kind == "op" and tok.text in _SEPARATORS):
                self.command(cmd, chained)
                cmd = []
                if tok.text == "(":
                    blocks.append("(")  # a subshell: what it assigns does not reach the script
                elif tok.text == ")" and blocks and blocks[-1] == "(":
                    blocks.pop()  # inside `case`, `)` only ends a pattern
                if tok.kind == "nl" or tok.text in (";", "&", ";;"):
                    chained = False
            else:
                cmd.append(tok)
        self.command(cmd, chained)
        return self.result

    def _words_only(self, cmd: list[_Tok]) -> list[_Tok]:
        """The command without its redirections and their targets, leading keywords and a closing keyword
        (which closes the innermost open block)."""
        clean: list[_Tok] = []
        skip = False
        for t in cmd:
            if skip:
                skip = False
            elif t.kind == "fd":
                pass
            elif t.kind == "op" and t.text in _REDIRECTS or t.kind == "op" and t.text in ("<<", "<<-"):
                skip = True
            else:
                clean.append(t)
        while clean and clean[0].kind == "word" and clean[0].text in _LEADING:
            clean = clean[1:]
        if clean and clean[0].kind == "word" and clean[0].text in _CLOSE:
            if self.blocks:
                self.blocks.pop()
            clean = clean[1:]
        return clean

    def _opens_block(self, clean: list[_Tok]) -> bool:
        first = clean[0]
        if first.kind == "word" and first.text in _OPEN:
            self.blocks.append(first.text)
            return True
        if first.kind == "word" and first.text == "function" or (
                len(clean) >= 3 and clean[1].kind == "op" and clean[1].text == "("):
            if any(t.kind == "word" and t.text == "{" for t in clean):
                self.blocks.append("{")
            return True
        return False

    def command(self, cmd: list[_Tok], chained: bool) -> None:
        clean = self._words_only(cmd)
        if not clean or self._opens_block(clean):
            return
        state = self.state
        conditional = chained or bool(self.blocks)
        state.line = clean[0].line
        k = 0
        while k < len(clean) and (clean[k].kind == "array" or (clean[k].kind == "word" and _ASSIGN.match(clean[k].text))):
            k += 1
        prefix, rest = clean[:k], clean[k:]
        if not rest:  # plain assignments change the script's variables
            for t in prefix:
                if t.kind == "array":
                    _assign_array(state, t, conditional)
                else:
                    _assign(state, t.text, conditional, t.line)
            return
        # VAR=x cmd ...: the assignment is for that one command only
        head = rest[0].text if rest[0].kind == "word" else ""
        if head in _DECLARE:
            for t in rest[1:]:
                if t.kind == "array":
                    _assign_array(state, t, conditional)
                elif t.kind == "word" and _ASSIGN.match(t.text):
                    _assign(state, t.text, conditional, t.line)
            return
        if head == "unset":
            for t in rest[1:]:
                if t.kind == "word" and not t.text.startswith("-"):
                    state.unset(t.text)
            return
        if head in ("source", "."):
            self.result.notes.append(f"line {rest[0].line}: `{head} ...` is not followed; what it sets stays unresolved")
            return
        raw = [t.text for t in rest if t.kind == "word"]
        if self.result.launch is not None and _OVERRIDE_WORD.match(head):
            self.result.stray.append((rest[0].line, head, sum(1 for w in raw if _OVERRIDE_WORD.match(w))))
            return
        if head != "cd" and not any("$" in w or any(e in w for e in _ENTRY_WORDS) for w in raw):
            return
        exp = _Expander(state)
        words: list[str] = []
        for w in raw:
            words.extend(exp.fields(w))
        if head == "cd":
            self._cd(words, conditional)
        else:
            self._launch(words, exp, clean[0].line, conditional)

    def _cd(self, words: list[str], conditional: bool) -> None:
        if conditional:
            return  # a cd inside a subshell, branch or function does not move the launch
        result = self.result
        if len(words) < 2 or PLACEHOLDER in words[1]:
            result.workdir = None
        else:
            script_path = self.script
            base = result.workdir or (os.path.dirname(os.path.abspath(script_path)) if script_path else os.getcwd())
            result.workdir = os.path.normpath(os.path.join(base, os.path.expanduser(words[1])))
        self.state.cwd = result.workdir

    def _launch(self, words: list[str], exp: _Expander, line: int, conditional: bool) -> None:
        result = self.result
        found = _launch_index(words)
        if found is None:
            return
        start, module = found
        if result.launch is not None:
            result.notes.append(f"line {line}: another main_ppo launch; only the first (line "
                                f"{result.launch.line}) is read")
            return
        launch = Launch(line=line, args=words[start:], module=module, passthrough=exp.passthrough,
                        conditional=conditional)
        _split_launch(launch)
        result.launch = launch
        seen: set[tuple[str, str]] = set()
        for ref in exp.refs:
            if (ref.name, ref.reason) not in seen and any(ref.placeholder in a for a in launch.args):
                seen.add((ref.name, ref.reason))
                result.unresolved.append(ref)
        if conditional:
            result.notes.append(f"line {line}: the launch is inside a conditional block or function")
        if launch.passthrough:
            result.notes.append(f"line {line}: the script forwards its own arguments (\"$@\"); "
                                "give them after -- to check them too")


def _refs(*groups: tuple[Unresolved, ...] | list[Unresolved]) -> tuple[Unresolved, ...]:
    """The unresolved values behind a variable, each once (`X="$X$X"` must not double them)."""
    return tuple(dict.fromkeys(r for g in groups for r in g))


def _assign(state: _State, text: str, conditional: bool, line: int) -> None:
    m = _ASSIGN.match(text)
    if not m:
        return
    name, index, append = m.group(1), m.group(2), bool(m.group(3))
    state.line = line
    if conditional:
        state.set(name, _Var(PLACEHOLDER + name, (Unresolved(name, f"assigned inside a conditional at line {line}", line),)))
        return
    exp = _Expander(state)
    value = exp.string(text[m.end():])
    refs = tuple(exp.refs)
    old = state.lookup(name)
    if index:
        _assign_item(state, name, index, value, refs, exp)
    elif append and old is not None:
        if len(value) + len(old.value[0] if isinstance(old.value, list) and old.value else old.value) > MAX_VALUE_CHARS:
            raise ShellLimitError(f"${name} would hold more than {MAX_VALUE_CHARS} characters", line)
        if isinstance(old.value, list):
            first = (old.value[0] if old.value else "") + value
            state.set(name, _Var([first] + old.value[1:], _refs(old.refs, refs)))
        else:
            state.set(name, _Var(old.value + value, _refs(old.refs, refs)))
    else:
        state.set(name, _Var(value, _refs(refs)))


def _assign_item(state: _State, name: str, index: str, value: str, refs: tuple[Unresolved, ...], exp: _Expander) -> None:
    """`NAME[K]=value`: K counts from the end when negative (bash refuses one before the first item)."""
    line = state.line
    old = state.lookup(name)
    items: list[str] = list(old.value) if old and isinstance(old.value, list) else ([str(old.value)] if old else [])
    k_text = exp.string(index[1:-1])
    try:
        k = _eval_int(k_text)
    except (ValueError, SyntaxError, ZeroDivisionError, RecursionError):
        k = None
    if k is not None and k >= MAX_ARRAY_ITEMS:
        raise ShellLimitError(f"array index {name}[{k}] is past the static reader's bound of {MAX_ARRAY_ITEMS} items",
                              line)
    if k is None or k < -len(items):
        why = f"array index {index} at line {line}" + (" is before the first item (bash: bad array subscript)"
                                                       if k is not None else "")
        state.set(name, _Var(PLACEHOLDER + name, (Unresolved(name, why, line),)))
        return
    state.charge(1 + max(len(items), k + 1))  # the items copied
    items.extend([""] * (k + 1 - len(items)))
    items[k] = value
    state.set(name, _Var(items, _refs(old.refs if old else (), refs)))


def _assign_array(state: _State, tok: _Tok, conditional: bool) -> None:
    name = tok.text
    state.line = tok.line
    if conditional:
        state.set(name, _Var([PLACEHOLDER + name],
                             (Unresolved(name, f"array assigned inside a conditional at line {tok.line}", tok.line),)))
        return
    exp = _Expander(state)
    old = state.vars.get(name)
    items: list[str] = list(old.value if isinstance(old.value, list) else [old.value]) if tok.append and old else []
    state.charge(1 + len(items))  # the items copied
    count, chars = len(items), (old.chars if tok.append and old else 0)
    for raw in tok.items:
        new = exp.fields(raw)
        count += len(new)
        chars += sum(map(len, new))
        if count > MAX_ARRAY_ITEMS or chars > MAX_VALUE_CHARS:
            raise ShellLimitError(f"array {name} would hold more than {MAX_ARRAY_ITEMS} items or "
                                  f"{MAX_VALUE_CHARS} characters", tok.line)
        items.extend(new)
    state.set(name, _Var(items, _refs(old.refs if tok.append and old else (), exp.refs)))
