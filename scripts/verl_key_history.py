#!/usr/bin/env python3
"""Regenerate wizard/verlspec/key_history.json: in which verl releases each PPO-trainer config key existed.

    python scripts/verl_key_history.py GIT_DIR                 # a clone or bare mirror of verl
    python scripts/verl_key_history.py GIT_DIR --no-installed  # tags only
    python scripts/verl_key_history.py GIT_DIR --out -         # print instead of writing

For every release tag v0.3.0 and later (release candidates skipped) it builds the flat set of dotted keys
of the trainer config as verl composes it:

* tags that ship `verl/trainer/config/_generated_ppo_*trainer.yaml` (verl >= 0.5): the union of those
  files (dp and megatron; veomni and torchtitan where present) -- verl generates them by composing
  `ppo_trainer` with Hydra, so they are the composed trees;
* older tags: `ppo_trainer.yaml` and `ppo_megatron_trainer.yaml`, with any Hydra `defaults:` list
  resolved from the same tag (`group@pkg: name` puts `group/name.yaml` under `pkg`; `_self_` order
  does not matter for key sets). The tags before 0.5 (0.3.0.post*, 0.4.*) have no defaults lists at all;
  the resolver reproduces the generated files' key sets exactly for v0.5.0 and v0.6.x ppo_trainer, but
  not later configs (a parent overriding an included config's defaults, a mapping replaced by a scalar),
  which is why generated files are preferred where they exist.

A mapping contributes its own key and its children's; `hydra.*` and `defaults` are skipped. The newest
version (the reference, normally the installed verl 0.9.1, read from its files -- verl is never imported)
is added from a config directory when no tag of that version exists. Only keys absent from the reference
are written, with [first, last] indices into "versions" (the last contiguous range), plus "renamed"
(old key -> reference key; rules in `renames`) and "moved_sections" (the section moves renames used).

Reads git with `git --git-dir=GIT_DIR show/ls-tree`; needs PyYAML.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import posixpath
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "verlspec" / "key_history.json"
CONFIG_DIR = "verl/trainer/config"
MAIN_FILES = ("ppo_trainer.yaml", "ppo_megatron_trainer.yaml")
GENERATED = re.compile(r"^_generated_ppo_(?:\w+_)?trainer\.yaml$")
TAG = re.compile(r"^v(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?$")  # rcN tags do not match
SIZE_CAP = 300_000
NOISE = (".profiler.", ".global_tool_config.")  # dropped first when the file would pass SIZE_CAP


# --- reading a tree ---------------------------------------------------------------------------------------
def flatten(node: Any, prefix: str = "", out: set[str] | None = None) -> set[str]:
    """Dotted keys of a YAML mapping: every mapping key, and its children's keys below it."""
    out = set() if out is None else out
    if not isinstance(node, dict):
        return out
    for key, value in node.items():
        key = str(key)
        if not prefix and key in ("hydra", "defaults"):
            continue
        dotted = f"{prefix}.{key}" if prefix else key
        out.add(dotted)
        if isinstance(value, dict):
            flatten(value, dotted, out)
    return out


def _place(prefix: str, keys: Iterable[str]) -> set[str]:
    if not prefix:
        return set(keys)
    parts = prefix.split(".")
    placed = {".".join(parts[: i + 1]) for i in range(len(parts))}
    return placed | {f"{prefix}.{k}" for k in keys}


def compose_keys(read: Callable[[str], str | None], name: str, package: str = "", depth: int = 0) -> set[str]:
    """Keys of config `name` (a path under verl/trainer/config without .yaml) with its defaults resolved.

    Covers what verl's trainer configs use: `group@pkg: option`, `group: option`, `/group@pkg: option`,
    `override group: option`, plain `other_config` and `_self_`; `${...}` options (model_engine) are
    resolved from the group's own default choice when it is in the same list.
    """
    if depth > 12:
        raise RecursionError(f"defaults too deep at {name}")
    text = read(f"{name}.yaml")
    if text is None:
        raise FileNotFoundError(f"{CONFIG_DIR}/{name}.yaml")
    doc = yaml.safe_load(text) or {}
    keys = _place(package, flatten(doc))
    base = name.rsplit("/", 1)[0] if "/" in name else ""
    choices: dict[str, str] = {}
    entries: list[tuple[str, str, str | None]] = []  # (group, package, option)
    for item in doc.get("defaults", []) or []:
        if isinstance(item, str):
            if item == "_self_":
                continue
            entries.append(("", "", item))
            continue
        if not isinstance(item, dict):
            continue
        for spec, option in item.items():
            spec = str(spec)
            if spec.startswith("override "):
                spec = spec[len("override "):].strip()
                group = spec.split("@", 1)[0].lstrip("/")
                choices[group] = str(option)
                continue
            group, _, pkg = spec.partition("@")
            choices.setdefault(group.lstrip("/"), str(option))
            entries.append((group, pkg, None if option is None else str(option)))
    for group, pkg, option in entries:
        if group == "":  # a plain config of the same folder, merged at this level
            keys |= compose_keys(read, f"{base}/{option}" if base else option, package, depth + 1)
            continue
        option = choices.get(group.lstrip("/"), option)
        if option is None:
            continue
        option = re.sub(r"\$\{(\w+)\}", lambda m: choices.get(m.group(1), m.group(0)), option)
        absolute = group.startswith("/")
        folder = posixpath.normpath(group.lstrip("/") if absolute or not base else f"{base}/{group}")
        if pkg in ("", "_group_"):
            target = group.lstrip("/").replace("/", ".")
        elif pkg == "_global_":
            target = ""
        else:
            target = pkg.replace("_group_", group.lstrip("/").replace("/", "."))
        full = f"{package}.{target}" if package and target else (package or target)
        if read(f"{folder}/{option}.yaml") is None:
            if group.lstrip("/") == "model_engine":  # a bare selector group: not a subtree
                continue
            raise FileNotFoundError(f"{CONFIG_DIR}/{folder}/{option}.yaml")
        keys |= compose_keys(read, f"{folder}/{option}", full, depth + 1)
    return keys


def tree_keys(list_dir: Callable[[], list[str]], read: Callable[[str], str | None]) -> tuple[set[str], str]:
    """The union of the PPO trainer trees of one verl version, and how it was read."""
    names = list_dir()
    generated = sorted(n for n in names if GENERATED.match(n))
    keys: set[str] = set()
    if generated:
        for name in generated:
            keys |= flatten(yaml.safe_load(read(name) or "") or {})
        how = "generated:" + ",".join(generated)
    else:
        present = [n for n in MAIN_FILES if n in names]
        for name in present:
            keys |= compose_keys(read, name[: -len(".yaml")])
        how = "composed:" + ",".join(present)
    main = read("ppo_trainer.yaml") or ""
    if re.search(r"^\s*-\s*model_engine\s*:", main, re.M):  # a config group verl selects with model_engine=...
        keys.add("model_engine")
    return keys, how


# --- sources -----------------------------------------------------------------------------------------------
def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True,
                          text=True).stdout


def release_tags(git_dir: str) -> list[tuple[str, str]]:
    """(tag, version) for v0.3.0 and later releases, oldest first."""
    found = []
    for tag in git(git_dir, "tag").split():
        m = TAG.match(tag)
        if not m:
            continue
        major, minor, patch, post = (int(x) if x else 0 for x in m.groups())
        if (major, minor) < (0, 3):
            continue
        version = f"{major}.{minor}.{patch}" + (f".post{post}" if m.group(4) else "")
        found.append(((major, minor, patch, post), tag, version))
    return [(tag, version) for _, tag, version in sorted(found)]


def tag_reader(git_dir: str, tag: str):
    def list_dir() -> list[str]:
        out = git(git_dir, "ls-tree", "--name-only", f"{tag}:{CONFIG_DIR}")
        return out.split()

    def read(rel: str) -> str | None:
        try:
            return git(git_dir, "show", f"{tag}:{CONFIG_DIR}/{rel}")
        except subprocess.CalledProcessError:
            return None

    return list_dir, read


def dir_reader(config_dir: Path):
    def list_dir() -> list[str]:
        return sorted(p.name for p in config_dir.iterdir())

    def read(rel: str) -> str | None:
        path = config_dir / rel
        return path.read_text() if path.is_file() else None

    return list_dir, read


def installed_verl() -> tuple[str, Path] | None:
    """(version, config dir) of the installed verl, found without importing it."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    pkg = Path(list(spec.submodule_search_locations)[0])
    version_file = pkg / "version" / "version"
    if not version_file.is_file():
        return None
    return version_file.read_text().strip(), pkg / "trainer" / "config"


# --- history -----------------------------------------------------------------------------------------------
def last_range(present: list[bool]) -> tuple[int, int] | None:
    last = max((i for i, p in enumerate(present) if p), default=None)
    if last is None:
        return None
    first = last
    while first > 0 and present[first - 1]:
        first -= 1
    return first, last


def _children(keys: set[str]) -> dict[str, set[str]]:
    """Direct child names of every key that has children (`_target_` left out: every config class has one)."""
    out: dict[str, set[str]] = {}
    for key in keys:
        parent, _, leaf = key.rpartition(".")
        if parent and leaf != "_target_":
            out.setdefault(parent, set()).add(leaf)
    return out


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def moved_sections(missing: dict[str, set[str]], reference: set[str], min_share: float = 0.8) -> dict[str, str]:
    """Sections (mappings) gone from the reference whose children reappear together under one reference mapping.

    `missing` maps a gone section to its child names in the last release that had it. A reference mapping
    qualifies when it holds at least `min_share` of those names and at least three (two when it has the
    section's own name: critic.kl_ctrl -> algorithm.kl_ctrl); among the qualifiers the
    one sharing the longest leading path with the old key wins, then one with the same last name; a tie
    proposes nothing. E.g. critic.model.fsdp_config -> critic.fsdp (not actor_rollout_ref.actor.fsdp_config).
    """
    ref_children = _children(reference)
    moves: dict[str, str] = {}
    for old, names in missing.items():
        if len(names) < 2:
            continue
        old_parts = old.split(".")
        ranked = []
        for new, have in ref_children.items():
            shared = len(names & have)
            new_parts = new.split(".")
            same_name = new_parts[-1] == old_parts[-1]
            if shared < (2 if same_name else 3) or shared / len(names) < min_share:
                continue
            ranked.append(((_common_prefix(old_parts, new_parts), same_name), new))
        ranked.sort(reverse=True)
        if ranked and (len(ranked) == 1 or ranked[0][0] > ranked[1][0]):
            moves[old] = ranked[0][1]
    return moves


def renames(missing: list[str], reference: set[str],
            last_keys: dict[str, set[str]]) -> tuple[dict[str, str], dict[str, str]]:
    """({old key: reference key}, {old section: reference section}) for keys gone from the reference.

    Rules, first that answers wins: (1) the nearest gone ancestor section moved (moved_sections) and the
    reference has the same remaining path under its new place; (2) `_target_`: only with its section;
    (3) exactly one reference key has the same last two path components; (4) exactly one reference key below
    the old key's own section (at least two levels deep) ends with the same leaf.
    """
    by_tail: dict[str, list[str]] = {}
    for key in reference:
        by_tail.setdefault(".".join(key.split(".")[-2:]), []).append(key)
    gone = set(missing)
    sections = {p: last_keys.get(p, set()) for p in gone}
    sections = {p: c for p, c in sections.items() if c}
    moves = moved_sections(sections, reference)
    out: dict[str, str] = {}
    for key in missing:
        parts = key.split(".")
        new = None
        for i in range(len(parts), 0, -1):  # the key itself, then its ancestors
            anc = ".".join(parts[:i])
            if anc in moves:
                cand = ".".join([moves[anc], *parts[i:]])
                new = cand if cand in reference else None
                break
        if new is None and parts[-1] != "_target_":
            candidates = by_tail.get(".".join(parts[-2:]), [])
            if len(candidates) == 1 and candidates[0] != key:
                new = candidates[0]
        if new is None and parts[-1] != "_target_" and len(parts) > 2:
            # (4) the leaf moved down into a new subsection of its own section (rollout.update_weights_bucket_
            # megabytes -> rollout.checkpoint_engine.update_weights_bucket_megabytes): exactly one reference key
            # under the old parent ends with the same leaf
            parent = ".".join(parts[:-1]) + "."
            below = [k for k in reference if k.startswith(parent) and k.endswith("." + parts[-1])]
            if len(below) == 1:
                new = below[0]
        if new:
            out[key] = new
    return out, moves


def build(versions: list[tuple[str, set[str], str]]) -> dict[str, Any]:
    names = [v for v, _, _ in versions]
    reference = versions[-1][1]
    every = set().union(*(keys for _, keys, _ in versions))
    history: dict[str, list[int]] = {}
    for key in sorted(every - reference):
        rng = last_range([key in keys for _, keys, _ in versions])
        if rng is not None:
            history[key] = list(rng)
    # child names of each gone key in the last release that had it
    last_children: dict[str, set[str]] = {}
    for key, (_, last) in history.items():
        last_children[key] = _children({k for k in versions[last][1] if k.startswith(key + ".")}).get(key, set())
    renamed, moves = renames(list(history), reference, last_children)
    return {"versions": names, "keys": history, "renamed": dict(sorted(renamed.items())),
            "moved_sections": dict(sorted(moves.items()))}


def dumps(data: dict[str, Any]) -> str:
    """JSON with one entry per line (diffable), lists inline."""
    lines = ["{"]
    items = list(data.items())
    for i, (name, value) in enumerate(items):
        end = "," if i < len(items) - 1 else ""
        if isinstance(value, dict) and value:
            lines.append(f"{json.dumps(name)}: {{")
            inner = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()]
            lines.append(",\n".join(inner))
            lines.append("}" + end)
        else:
            lines.append(f"{json.dumps(name)}: {json.dumps(value)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("git_dir", help="a verl clone's .git or a bare mirror")
    ap.add_argument("--no-installed", action="store_true",
                    help="do not add the installed verl's config as the newest version")
    ap.add_argument("--config-dir", type=Path, help="a verl/trainer/config folder to use as the newest version")
    ap.add_argument("--config-version", help="the version of --config-dir (default: read beside it)")
    ap.add_argument("--repo-url", default="https://github.com/verl-project/verl")
    ap.add_argument("--out", default=str(OUT), help="output path, or - for stdout")
    args = ap.parse_args(argv)

    versions: list[tuple[str, set[str], str]] = []
    for tag, version in release_tags(args.git_dir):
        list_dir, read = tag_reader(args.git_dir, tag)
        keys, how = tree_keys(list_dir, read)
        versions.append((version, keys, f"{tag} {how}"))
        print(f"{tag:14} {len(keys):5} keys  {how}", file=sys.stderr)

    extra: tuple[str, Path] | None = None
    if args.config_dir:
        ver = args.config_version or (args.config_dir.parent.parent / "version" / "version").read_text().strip()
        extra = (ver, args.config_dir)
    elif not args.no_installed:
        extra = installed_verl()
    extra_note = ""
    if extra and extra[0] not in {v for v, _, _ in versions}:
        list_dir, read = dir_reader(extra[1])
        keys, how = tree_keys(list_dir, read)
        versions.append((extra[0], keys, f"installed {how}"))
        extra_note = f"; {extra[0]} (no tag in the mirror) from the installed package's {CONFIG_DIR}/{how[10:]}"
        print(f"{'installed':14} {len(keys):5} keys  {extra[0]} {how}", file=sys.stderr)

    data = build(versions)
    head = git(args.git_dir, "rev-parse", "HEAD").strip()
    tags = ", ".join(s.split()[0] for _, _, s in versions if not s.startswith("installed"))
    ref = versions[-1][0]
    source = (f"{args.repo_url} (mirror at {head[:12]}), release tags {tags}{extra_note}. Built by "
              f"scripts/verl_key_history.py on {_dt.date.today().isoformat()}: keys of the union of "
              f"_generated_ppo_*trainer.yaml where a tag ships them (verl >= 0.5), else of ppo_trainer.yaml and "
              f"ppo_megatron_trainer.yaml with Hydra defaults resolved; hydra.* and defaults skipped. Listed: "
              f"keys absent from {ref}, as [first, last] indices into versions (last contiguous "
              f"range). renamed: if a gone section's children reappear together under one {ref} mapping (at "
              f"least 80% of them; the one sharing the longest leading path, then the same name; listed in "
              f"moved_sections), the same path under it; else (not for _target_) the one {ref} key with the "
              f"same last two path components; else the one {ref} key below the old key's section (two levels "
              f"deep at least) with the same leaf.")
    out = {"source": source, **data}
    text = dumps(out)
    if len(text.encode()) > SIZE_CAP:
        dropped = [k for k in out["keys"] if any(n in f".{k}." for n in NOISE)]
        for k in dropped:
            out["keys"].pop(k)
            out["renamed"].pop(k, None)
        out["source"] += f" Dropped {len(dropped)} keys under {', '.join(n.strip('.') for n in NOISE)} (size cap)."
        text = dumps(out)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}: {len(out['keys'])} keys, {len(out['renamed'])} renamed, {len(text.encode())} bytes",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
