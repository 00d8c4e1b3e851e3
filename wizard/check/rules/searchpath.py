"""VI919: a Hydra search path that does not resolve from the folder the launch runs in (real case verl#2735).

Hydra takes `hydra.searchpath` from the primary config (or a `hydra.searchpath=[...]` override, which replaces it)
and reads a `file://` entry, or one without a scheme, as a path: a relative one from the process's working folder
(hydra/_internal/config_loader_impl.py:152-222: the override wins at :183-188; a folder that is not there only
warns "is not available", :214-222). When
the config the `defaults:` list needs is then in no folder searched, composition stops before anything runs:
"In 'one_step_off_ppo_trainer': Could not load 'ppo_trainer'". verl 0.9.1's one-step-off configs name their base
that way (experimental/one_step_off_policy/config/one_step_off_ppo_trainer.yaml:1-6 `file://verl/trainer/config`,
then `- ppo_trainer`; the megatron twin, and fully_async_ppo_megatron_trainer.yaml:1-6 too): found only when the run
starts in a verl source checkout's root. A `pkg://` entry (fully_async_ppo_trainer.yaml:1-3, verl PR#4393) is
found wherever the package is installed.

check itself composes against the installed verl's tree (wizard.check.verltree._searchpath, _verl_relative), so
this rule is what says where the run itself would stop. It reads the launch's working folder from the script's
`cd` or --workdir (an error) and otherwise from check's own guess (an info: where the launch starts is not known).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wizard.check.entrypoints import CONFIGS
from wizard.check.rules.context import Ctx, Facts
from wizard.check.shellargs import PLACEHOLDER
from wizard.check.source import Source

# verl 0.9.1's own configs outside trainer/config: (search path, defaults, where); read from the installed verl
# where it is here, this table where it is not (tests/test_searchpath.py holds it to the installed YAMLs)
OWN: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "fully_async_ppo_trainer": (("pkg://verl.trainer.config",), ("ppo_trainer",),
                                "experimental/fully_async_policy/config/fully_async_ppo_trainer.yaml:1-7"),
    "fully_async_ppo_megatron_trainer": (("file://verl/trainer/config",), ("ppo_megatron_trainer",),
                                         "experimental/fully_async_policy/config/fully_async_ppo_megatron_trainer.yaml:1-7"),
    "one_step_off_ppo_trainer": (("file://verl/trainer/config",), ("ppo_trainer",),
                                 "experimental/one_step_off_policy/config/one_step_off_ppo_trainer.yaml:1-7"),
    "one_step_off_ppo_megatron_trainer": (("file://verl/trainer/config",), ("ppo_megatron_trainer",),
                                          "experimental/one_step_off_policy/config/one_step_off_ppo_megatron_trainer.yaml:1-7"),
}
VERL_PKG = ("pkg://verl.trainer.config", "pkg://verl/trainer/config")
FIX_ENTRY = "pkg://verl.trainer.config"


@dataclass
class Primary:
    """The config Hydra loads first: its file (as named in the finding), folder, search path and needs."""

    label: str
    name: str  # the config's name, as Hydra's error names it
    folder: Path | None  # None: verl's own folder, not installed here (the table above)
    searchpath: list[str]
    needs: list[str] = field(default_factory=list)  # config files the defaults list loads, relative to a search folder
    own: bool = False  # verl's own YAML (the user cannot edit it)


def needed(defaults: Any) -> list[str]:
    """The config files a `defaults:` list loads (`ppo_trainer` -> ppo_trainer.yaml, `{group: option}` ->
    group/option.yaml); optional entries, `_self_`, overrides and interpolations are left out."""
    out: list[str] = []
    for d in defaults if isinstance(defaults, list) else []:
        if isinstance(d, str) and d != "_self_" and " " not in d and "${" not in d:
            out.append(d.split("@", 1)[0].lstrip("/") + ".yaml")
        elif isinstance(d, dict) and len(d) == 1:
            (group, option), = d.items()
            group = str(group)
            if isinstance(option, str) and " " not in group and "${" not in option + group and option != "null":
                out.append(f"{group.split('@', 1)[0].lstrip('/')}/{option}.yaml")
    return out


def primary_config(src: Source) -> Primary | None:
    """The primary config of the launch and what it names, or None where it names no search path to follow."""
    from wizard.check.source import read_yaml

    if src.yaml_path is not None:
        doc = read_yaml(src.yaml_path)
        if not isinstance(doc, dict):
            return None
        hydra = doc.get("hydra") if isinstance(doc.get("hydra"), dict) else {}
        entries = hydra.get("searchpath") if isinstance(hydra.get("searchpath"), list) else []
        return Primary(str(src.yaml_path), src.yaml_path.stem, src.yaml_path.parent, [str(e) for e in entries],
                       needed(doc.get("defaults")))
    name = src.config_name
    if name not in OWN:
        return None
    from wizard.check.entrypoints import verl_config_dir

    try:
        folder = verl_config_dir().parent.parent / CONFIGS[name][1]
    except (ImportError, ValueError):
        folder = None
    if folder is not None and (folder / f"{name}.yaml").is_file():
        doc = read_yaml(folder / f"{name}.yaml") or {}
        hydra = doc.get("hydra") if isinstance(doc, dict) and isinstance(doc.get("hydra"), dict) else {}
        return Primary(f"verl's {OWN[name][2]}", name, folder, [str(e) for e in hydra.get("searchpath") or []],
                       needed(doc.get("defaults") if isinstance(doc, dict) else None), own=True)
    entries, defaults, cite = OWN[name]
    return Primary(f"verl's {cite}", name, None, list(entries), needed(list(defaults)), own=True)


def override_searchpath(overrides: list[str]) -> list[str] | None:
    """A `hydra.searchpath=[...]` override of the launch (it replaces the config's), parsed by Hydra's own parser."""
    found = None
    for text in overrides:
        if text.lstrip("+").split("=", 1)[0] != "hydra.searchpath":
            continue
        from hydra.core.override_parser.overrides_parser import OverridesParser

        try:
            value = OverridesParser.create().parse_override(text).value()
        except Exception:  # noqa: BLE001  (Hydra refuses it itself: another rule's)
            return None
        found = [str(v) for v in value] if isinstance(value, list) else None
    return found


def _verl_has(name: str) -> bool:
    """Whether `pkg://verl.trainer.config` holds `name` (True where verl is not here: it cannot be told)."""
    from wizard.check.entrypoints import verl_config_dir

    try:
        return (verl_config_dir() / name).is_file()
    except (ImportError, ValueError):
        return True


def unresolved(primary: Primary, entries: list[str], workdir: Path) -> tuple[list[str], list[tuple[str, Path, bool]]]:
    """(the needed configs no searched folder holds, the file entries: each with the folder it resolves to and
    whether it is relative)."""
    files: list[tuple[str, Path, bool]] = []
    packages: list[str] = []
    for e in entries:
        if PLACEHOLDER in e or "${" in e:
            return [], []
        if e.startswith("pkg://"):
            packages.append(e.rstrip("/"))
            continue
        body = e[len("file://"):] if e.startswith("file://") else e if "://" not in e else ""
        if body:
            relative = not Path(body).is_absolute()
            files.append((e, workdir / body if relative else Path(body), relative))
    missing = []
    for need in primary.needs:
        if primary.folder is not None and (primary.folder / need).is_file():
            continue
        if any((folder / need).is_file() for _, folder, _ in files):
            continue
        if any(p not in VERL_PKG or _verl_has(need) for p in packages):
            continue  # another package's folder: only an import could tell
        missing.append(need)
    return missing, files


def rule_searchpath(c: Ctx, f: Facts) -> None:
    src = c.src
    if src.config_missing is not None:
        return  # VI891 already says the config is not here
    primary = primary_config(src)
    if primary is None:
        return
    given = override_searchpath(src.overrides)
    entries = given if given is not None else primary.searchpath
    workdir = Path(src.workdir)
    if not workdir.is_dir():
        return  # a folder of another machine: where the entry resolves there cannot be told here
    missing, files = unresolved(primary, entries, workdir)
    if not missing or not files:
        return
    known = src.workdir_known
    where = (f"{workdir}, the script's `cd` / --workdir" if known else
             f"{workdir}, check's guess: the script has no `cd` before the launch and no --workdir was given")
    names = ", ".join(m[:-5] for m in missing)
    error = f"\"In '{primary.name}': Could {'not find' if '/' in missing[0] else 'not load'} '{missing[0][:-5]}'\""
    named = "the launch's hydra.searchpath override" if given is not None else primary.label
    for entry, folder, relative in files:
        state = "does not exist" if not folder.is_dir() else f"holds no {', '.join(missing)}"
        if given is not None or not primary.own:
            fix = (f"write {FIX_ENTRY} for {entry}" if all(_is_verls(m) for m in missing)
                   else f"give {entry} as an absolute path")
        else:
            fix = (f"add 'hydra.searchpath=[{FIX_ENTRY}]' to the launch's overrides (it replaces the YAML's search "
                   "path and is found wherever verl is installed)")
        fix += (", or start the run in the folder the entry is relative to (for file://verl/trainer/config: a verl "
                "source checkout's root)" if relative else "")
        c.add("VI919", "error" if known else "info", ("hydra.searchpath",),
              f"{named} names {entry}, which Hydra reads from the folder the run starts in ({where}) as {folder}: "
              f"that folder {state}, and no other searched folder holds {names}, so Hydra "
              f"{'stops' if known else 'would stop there'} before anything runs: {error}",
              fix + ("" if known else "; pass --workdir to check where the run starts"))


def _is_verls(need: str) -> bool:
    """A config of verl's trainer tree (ppo_trainer.yaml, actor/dp_actor.yaml)."""
    return need[:-5] in CONFIGS and CONFIGS[need[:-5]][1] == "trainer/config" or _verl_has(need)
