"""What `verl-init check` reads: a verl YAML, a bundle folder, a launch script (read by
wizard.check.shellargs, never run) and/or overrides given after `--`, gathered into one `Source`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wizard.check.shellargs import (MAX_SCRIPT_CHARS, PLACEHOLDER, Extraction, ShellLimitError, ShellSyntaxError,
                                    adopt_traced, extract_file, looks_like_script)
from wizard.check.entrypoints import CONFIGS, ENTRIES, Entry, entry_of_module, guess_tree, own_configs
from wizard.check.recipes import RecipeMain, hydra_main, imported_at_launch, module_file, module_of, package_dir
from wizard.intent.errors import Problem, UserError


@dataclass
class Source:
    kind: str  # yaml | script | overrides
    label: str
    overrides: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    yaml_path: Path | None = None  # the YAML verl composes from (--config-path/--config-name)
    yaml_body: dict[str, Any] = field(default_factory=dict)
    yaml_defaults: list[Any] = field(default_factory=list)
    config_name: str = "ppo_trainer"  # verl's own config when there is no yaml_path
    entry: str = "ppo"  # the entry point (wizard.check.entrypoints): ppo, sft, fully_async, one_step_off, generation
    config_missing: str | None = None  # a --config-name that cannot be found here (checked against config_name)
    recipe: str | None = None  # a recipe's own entry point (recipe.dapo.main_dapo): its code may read any key
    recipe_dir: Path | None = None  # its package (…/recipe/dapo), whose code check reads for the keys it reads
    recipe_code: Any = None  # what that code reads, compares and registers (wizard.check.recipes.RecipeReads)
    recipe_loads: set[str] = field(default_factory=set)  # modules its launch imports (recipes.imported_at_launch)
    # where the entry point maps the legacy reward keys onto reward.* (a recipe's main that calls
    # migrate_legacy_reward_impl; fully_async_main is known by its entry); "" where it does not, or is not known
    migrates_legacy_reward: str = ""
    workdir: Path = field(default_factory=Path.cwd)
    workdir_known: bool = False  # workdir is the launch's own: a script's `cd` or --workdir (else a guess)
    extraction: Extraction | None = None
    bundle_dir: Path | None = None
    placeholders: dict[str, str] = field(default_factory=dict)  # UNSET_X -> reason
    problems: list[Problem] = field(default_factory=list)
    # variables bash stopped on as unbound (`set -u`, never set, not given with --env), with the line: VI938
    unbound: list[tuple[str, int]] = field(default_factory=list)


MAX_YAML_BYTES = 16 << 20
MAX_YAML_NODES = 1_000_000  # values the document holds once its aliases are expanded
MAX_OVERRIDES = 20_000


def _missing_module(p: Path, text: str) -> None:
    """A script that launches a verl module the installed verl does not have (a removed entry point): say which."""
    from importlib.metadata import version

    from wizard.check.entrypoints import missing_verl_module

    found = missing_verl_module(text)
    if found is not None:
        module, close = found
        raise UserError(f"{p} launches `python -m {module}`, which verl {version('verl')} does not have",
                        f"launch {close}, verl's entry point closest by name" if close
                        else "launch one of verl's entry points (verl-init check --help lists them)",
                        rule="VI800", keys=("target",))


def _limit(what: str, path: Path | str, hint: str = "check the file") -> UserError:
    return UserError(f"{path}: {what}", hint, rule="VI800", keys=("target",))


def _expanded_nodes(doc: Any) -> int:
    """How many values the document holds with every alias expanded (a billion-laughs YAML shares a few
    nodes many times over); counted without expanding, memoised per shared node."""
    sizes: dict[int, int] = {}

    def size(node: Any, depth: int) -> int:
        if depth > 200:
            raise _limit("nested deeper than 200 levels", "document")
        if not isinstance(node, (dict, list)):
            return 1
        if id(node) in sizes:
            return sizes[id(node)]
        sizes[id(node)] = 0  # a cycle counts once
        children = node.values() if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_YAML_NODES:
                break
        sizes[id(node)] = total
        return total

    return size(doc, 0)


def read_yaml(path: Path) -> Any:
    import yaml

    from wizard._io import UnsafeInput, read_user_file, safe_yaml

    try:
        data = read_user_file(str(path), MAX_YAML_BYTES)
    except FileNotFoundError:
        raise UserError(f"file not found ({path})", "check the path", rule="VI870", keys=("target",)) from None
    except UnsafeInput as exc:
        raise _limit(str(exc).replace(f"{path} ", "", 1), path) from None
    try:
        # verl reads it with OmegaConf, which refuses a key given twice (omegaconf/_utils.py get_yaml_loader): so does check
        doc = safe_yaml(data.decode("utf-8", errors="replace"), max_nodes=MAX_YAML_NODES)
    except UnsafeInput as exc:
        raise _limit(str(exc), path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"not valid YAML{where} ({path})", "fix the YAML syntax", rule="VI808", keys=("target",)) from None
    if _expanded_nodes(doc) > MAX_YAML_NODES:
        raise _limit(f"its aliases expand to more than {MAX_YAML_NODES} values (a YAML bomb, not a verl config)", path)
    return doc


def _use_yaml(src: Source, path: Path) -> None:
    doc = read_yaml(path)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise UserError(f"{path} is not a YAML mapping of verl config keys", "give a verl config YAML", rule="VI808",
                        keys=("target",))
    src.yaml_path = path
    src.yaml_defaults = list(doc.pop("defaults", None) or [])
    hydra = doc.pop("hydra", None)
    src.yaml_body = doc
    _missing_defaults(src, path, (hydra or {}).get("searchpath") if isinstance(hydra, dict) else None)
    if (path.parent / "verl-init.yaml").is_file():
        src.bundle_dir = path.parent


def _missing_defaults(src: Source, path: Path, searchpath: Any) -> None:
    """A `defaults:` entry of the user's YAML (a recipe's dapo_trainer) that is in none of the folders Hydra would
    search (the YAML's own, its `file://` search paths; verl's own configs count as found, and so does any other
    `pkg://` path, which only an import could settle) is missing: checked against the tree guessed from its name, one
    VI891 finding, the keys it would add left unchecked (issue 26 item 4). Only the first missing entry is named."""
    entries = [str(e) for e in searchpath] if isinstance(searchpath, list) else []
    if any(e.startswith("pkg://") and e.rstrip("/") not in _VERL_PKG_PATHS for e in entries):
        return
    folders = [path.parent]
    for e in entries:
        if e.startswith("file://"):
            d = Path(e[len("file://"):])
            folders += [d] if d.is_absolute() else [Path.cwd() / d, path.parent / d]
    for k, d in enumerate(src.yaml_defaults):
        if not isinstance(d, str) or d == "_self_" or d in CONFIGS or " " in d:
            continue
        if any((f / f"{d}.yaml").is_file() for f in folders):
            continue
        guessed = guess_tree(d if "megatron" in d.lower() else path.stem)
        src.config_missing = str((folders[-1] if len(folders) > 1 else folders[0]) / f"{d}.yaml")
        src.config_name = guessed
        src.yaml_defaults[k] = guessed  # composed against the guessed tree (verl's folder joins the search path)
        return


def _config_stem(name: str) -> str:
    """--config-name as Hydra reads it: with or without `.yaml`."""
    return name[:-5] if name.endswith(".yaml") else name[:-4] if name.endswith(".yml") else name


def _is_verls_own(config_path: str | None, config_dir: str | None, name: str, entry: Entry = ENTRIES[0]) -> bool:
    """`-m verl.trainer.main_ppo --config-path=config`: Hydra resolves a relative --config-path against the
    launched module's folder (verl/trainer/), so `config` is verl's own tree, where ppo_trainer and
    ppo_megatron_trainer live; `pkg://verl.trainer.config` names it too. The same for the other entry points, each
    with its own folder (verl/experimental/fully_async_policy/config, ...)."""
    if config_dir or name not in own_configs(entry):
        return False
    if config_path is None:
        return True
    path = config_path.rstrip("/")
    dotted = "verl." + entry.config_dir.replace("/", ".")
    return path in ("config", "./config", f"pkg://{dotted}", f"pkg://verl/{entry.config_dir}")


_VERL_PKG_PATHS = ("pkg://verl.trainer.config", "pkg://verl/trainer/config")


def _traced(path: Path, env: Mapping[str, str], workdir: str | None) -> Any:
    """bash's own run of the script (wizard.check.bashtrace), or None where no sandbox can run it; its `ok` is false
    when bash reached no launch (then the static reader's result stands). VERL_INIT_NO_SANDBOX=1 turns it off."""
    if os.environ.get("VERL_INIT_NO_SANDBOX"):
        return None
    from wizard.check import bashtrace

    if not bashtrace.available():
        return None
    try:
        traced = bashtrace.trace(path, env, workdir=workdir)
    except (ValueError, OSError, MemoryError, RecursionError, UnicodeError) as exc:
        # what the script left in the sandbox's output is not what the stubs write (a file named `evil`, a link,
        # a FIFO, gigabytes): refuse the script, in one line, rather than read on
        from wizard.intent.text import one_line

        raise _limit(f"the sandboxed run of the script left output check does not read ({type(exc).__name__}: "
                     f"{one_line(str(exc))[:200]})", path, "check the script: it tampers with the sandbox's "
                     "output folder") from None
    return traced


def _recipe_config(src: Source, ex: Extraction, p: Path, entry: Entry, workdir: str | None = None) -> None:
    """The tree a recipe's own entry point composes (wizard.check.recipes): the YAML its @hydra.main names, with the
    script's --config-path/--config-name over it, both relative to the recipe's file; where the file or the YAML is
    not here (a script checked away from its verl checkout), verl's tree guessed from the config's name, with the
    VI891 finding that says so (src.config_missing)."""
    la = ex.launch
    src.recipe = entry.module
    base = Path(ex.workdir) if ex.workdir else p.parent
    bases = [Path(workdir)] if workdir else []
    found = module_file(entry.module, [*bases, base, p.parent, *list(p.parent.resolve().parents)[:3], Path.cwd()])
    main = hydra_main(found) if found is not None else None
    if main is not None:
        _adopt_recipe(src, entry.module, main)
    name = _config_stem(la.config_name) if la.config_name else (main.config_name if main else None)
    folder = la.config_path or la.config_dir or (main.config_path if main else None)
    rel = entry.module.replace(".", "/")
    if found is None or name is None or folder is None or PLACEHOLDER in folder + name:
        src.config_name = guess_tree(name or rel, ENTRIES[0])
        src.config_missing = (f"{rel}.py (the recipe's source, whose @hydra.main names its config)" if found is None
                              else f"the config of {rel}.py (its @hydra.main names none this reader can follow)")
        return
    yaml_path = Path(folder) / f"{name}.yaml" if os.path.isabs(folder) else found.parent / folder / f"{name}.yaml"
    if yaml_path.is_file() and name in CONFIGS and CONFIGS[name][0] in ("eval", "sft") and _standalone(yaml_path):
        # a recipe that runs verl's evaluation or SFT with its own copy of that tree (recipe/r1/config/evaluation.yaml,
        # no `defaults:`, is verl's trainer/config/evaluation.yaml): checked as that entry point, against verl's tree
        src.entry, src.config_name = CONFIGS[name][0], name
    elif yaml_path.is_file():
        _use_yaml(src, yaml_path)
    elif name in own_configs(ENTRIES[0]):  # a recipe that runs one of verl's own trees as it is
        src.config_name = name
    else:
        src.config_name = guess_tree(name, ENTRIES[0])
        src.config_missing = str(yaml_path)


def _standalone(path: Path) -> bool:
    """A YAML with no `defaults:` list: Hydra composes it alone, verl's trees are no part of it."""
    doc = read_yaml(path)
    return isinstance(doc, dict) and not doc.get("defaults")


def _recipe_of_yaml(src: Source, path: Path) -> None:
    """A YAML given as the target that is a recipe's own config (recipe/<name>/config/<it>.yaml, named by the
    @hydra.main of a main beside the config folder) is read as under that recipe's launch: its code says which
    keys it reads, and whether it migrates the legacy reward keys."""
    folder = path.resolve().parent.parent
    for main_file in sorted(folder.glob("*.py"))[:50]:
        module = module_of(main_file.parts)
        if module is None:
            return  # not under a recipe/ folder
        main = hydra_main(main_file)
        if main.config_name and _config_stem(main.config_name) == path.stem and main.config_path and \
                (main_file.parent / main.config_path).resolve() == path.resolve().parent:
            _adopt_recipe(src, module, main)
            return


def _adopt_recipe(src: Source, module: str, main: RecipeMain) -> None:
    """The recipe `module` (its source read into `main`) is what runs: its package's code says which keys it reads,
    and its main may migrate the legacy reward keys (the call's line cited)."""
    src.recipe, src.recipe_dir = module, package_dir(main, module)
    src.recipe_loads = imported_at_launch(module, main.imports)
    if main.migrates_legacy_reward:
        src.migrates_legacy_reward = f"{module.replace('.', '/')}.py:{main.migrates_legacy_reward}"


def _script_config(src: Source, ex: Extraction, p: Path, workdir: str | None = None) -> None:
    """The config tree a launch script's entry point composes: its own default (the launched module's @hydra.main),
    one of verl's own configs it names, the user's YAML at --config-path, or, when that is not here, the tree guessed
    from its name (src.config_missing)."""
    la = ex.launch
    entry = entry_of_module(la.module) or ENTRIES[0]  # the launched entry point reads its own tree
    src.entry, src.config_name = entry.name, entry.config_name
    if entry.recipe:
        _recipe_config(src, ex, p, entry, workdir)
        return
    name = _config_stem(la.config_name) if la.config_name else None
    folder = la.config_path or la.config_dir or ""
    if name and _is_verls_own(la.config_path, la.config_dir, name, entry):
        la.config_path = la.config_dir = None  # Hydra resolves it to verl's own tree
        folder = ""
    if folder or (name and name not in own_configs(entry)):
        name = name or entry.config_name
        if PLACEHOLDER in folder or PLACEHOLDER in name:
            src.problems.append(Problem("VI800", "info", ("--config-path", "--config-name"),
                                        f"the config file {folder}/{name}.yaml depends on unresolved values",
                                        f"checked against verl's {entry.config_name} defaults instead"))
        else:
            base = Path(ex.workdir) if ex.workdir else p.parent
            candidates = [Path(folder) / f"{name}.yaml"] if os.path.isabs(folder) else \
                [base / folder / f"{name}.yaml", Path.cwd() / folder / f"{name}.yaml"]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                src.config_name = guess_tree(name, entry)
                src.config_missing = str(candidates[0])
            else:
                _use_yaml(src, found)
    elif name:
        src.config_name = name


def load_source(target: str | None, extra: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                workdir: str | None = None, config_name: str | None = None) -> Source:
    """What to check: a YAML, a bundle folder, a launch script and/or overrides (after `--`)."""
    env = dict(env or {})
    if target is None:
        src = Source("overrides", "overrides")
    else:
        p = Path(target)
        if p.is_dir():
            if (p / "verl_config.yaml").is_file():
                p = p / "verl_config.yaml"
            elif (p / "run.sh").is_file():
                p = p / "run.sh"
            else:
                raise UserError(f"{target} holds no verl_config.yaml or run.sh", "give a verl YAML or a launch script",
                                rule="VI870", keys=("target",))
        if not p.is_file():
            raise UserError(f"file not found ({target})", "check the path", rule="VI870", keys=("target",))
        from wizard._io import UnsafeInput, read_user_file

        try:
            text = read_user_file(str(p), MAX_SCRIPT_CHARS << 2)[:MAX_SCRIPT_CHARS + 1].decode("utf-8", errors="replace")
        except UnsafeInput as exc:
            raise _limit(str(exc), p) from None
        if p.suffix in (".sh", ".bash") or (p.suffix not in (".yaml", ".yml") and looks_like_script(text)):
            src = Source("script", str(p))
            limit: ShellLimitError | None = None
            # bash in the sandbox first; the static reader then only adds line numbers and `cd` (its limits do not
            # matter when bash answered), and reads alone where no sandbox can run
            ran = _traced(p, env, workdir)
            traced = ran if ran is not None and ran.ok else None
            src.unbound = list(ran.unbound) if ran is not None else []
            try:
                ex = extract_file(p, env=env)
            except ShellSyntaxError as exc:
                ex = None
                syntax = exc
            except ShellLimitError as exc:
                ex, limit = None, exc
            if limit is not None and traced is None:  # not a launch script anyone writes: stop here
                raise _limit(f"{limit}: past the bounds of the script reader", p,
                             "check the script; a launch script needs nothing near these sizes") from None
            if ex is None and traced is None:
                raise UserError(f"cannot read {p} as a shell script: {syntax}", "check the quoting", rule="VI800",
                                keys=("target",)) from None
            if ex is None:
                ex = Extraction(launch=None, script=str(p))
            if traced is not None:
                adopt_traced(ex, traced.module or "", traced.args, traced.needed)
                ex.via, ex.env_names = list(traced.via), list(traced.env_names)
                ex.temp_env = dict(traced.temp_env)
            if ex.launch is None:
                _missing_module(p, text)
                others = ", ".join(dict.fromkeys(".".join(e.module.split(".")[-2:]) if e.module.endswith(".main_ppo")
                                                 else e.module.rsplit(".", 1)[-1] for e in ENTRIES[1:]))
                raise UserError(f"{p} does not launch `python -m verl.trainer.main_ppo` (nor another of verl's entry "
                                f"points: {others}, a recipe's `recipe.*` main)",
                                "give the script that starts training, a verl YAML, or overrides after --",
                                rule="VI800", keys=("target",))
            src.extraction = ex
            if len(ex.overrides) > MAX_OVERRIDES:
                raise _limit(f"the launch passes {len(ex.overrides)} overrides, more than {MAX_OVERRIDES}", p,
                             "check the script")
            src.overrides = list(ex.overrides)
            src.origins = [f"{p.name}:{ex.launch.line}"] * len(ex.overrides)
            src.workdir = Path(ex.workdir) if ex.workdir else Path.cwd()
            src.workdir_known = bool(ex.workdir)
            for u in ex.unresolved:
                src.placeholders.setdefault(u.placeholder, u.reason)
            _script_config(src, ex, p, workdir)
            if src.bundle_dir is None and (p.parent / "verl-init.yaml").is_file():
                src.bundle_dir = p.parent
        else:
            src = Source("yaml", str(p))
            _use_yaml(src, p)
            src.workdir = p.parent.resolve()
            _recipe_of_yaml(src, p)
    extra = list(extra)
    if len(extra) > MAX_OVERRIDES:
        raise _limit(f"{len(extra)} overrides, more than {MAX_OVERRIDES}", "the command line", "pass fewer overrides")
    if config_name is not None:
        extra.insert(0, f"--config-name={config_name}")
    flags = [e for e in extra if e.split("=", 1)[0] in ("--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd")]
    extra = [e for e in extra if e not in flags]
    for flag in flags:  # Hydra's own flags among the overrides: name verl's config as main_ppo would
        opt, _, value = flag.partition("=")
        if opt in ("--config-name", "-cn"):
            stem = _config_stem(value)
            if stem not in CONFIGS:
                raise UserError(f"--config-name={value!r} is not one of verl's own configs",
                                f"use one of {', '.join(CONFIGS)}, or give your YAML file as the target",
                                rule="VI800", keys=("--config-name",))
            if src.yaml_path is None:
                src.config_name = stem
                src.entry = CONFIGS[stem][0]
        elif value.rstrip("/") not in ("config", "./config", *(_VERL_PKG_PATHS)):
            raise UserError(f"{opt}={value!r}: with overrides alone only verl's own config folder can be named",
                            "give your YAML file as the target instead", rule="VI800", keys=(opt,))
    if extra:
        src.overrides += list(extra)
        src.origins += ["argument"] * len(extra)
    if workdir:
        src.workdir, src.workdir_known = Path(workdir), True
    for text in src.overrides + [json.dumps(src.yaml_body, default=str)]:
        for m in re.finditer(r"UNSET_([A-Za-z0-9_]+)", text):
            src.placeholders.setdefault(m.group(0), "placeholder for a value the launch takes from its environment")
    return src


def write_yaml(path: Path, doc: dict[str, Any]) -> None:
    import yaml

    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
