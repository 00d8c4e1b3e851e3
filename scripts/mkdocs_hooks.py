"""mkdocs hooks (mkdocs.yml `hooks:`) for the manual.

- on_config: every page under docs/ that mkdocs.yml's nav does not list is appended under "More topics", so a new
  page docs/<topic>.md shows up in the navigation without editing mkdocs.yml.
- on_pre_build: a stale generated page (docs/reference/answers.md, rules.md) fails the build (an error, so
  `mkdocs build` stops with the fix; scripts/gen_docs.py rewrites them).
- on_page_markdown: `<!-- verl-init-help: COMMAND -->` in a page becomes the command's `--help`, taken from the
  code's own argparse parsers at build time (argparse's layout differs between Python versions), and
  `<!-- verl-init-output: ARGS -->` what `verl-init ARGS` prints (light commands only: `profiles`).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

_GEN_PATH = Path(__file__).resolve().parent / "gen_docs.py"
_spec = importlib.util.spec_from_file_location("verl_init_gen_docs", _GEN_PATH)
assert _spec is not None and _spec.loader is not None
gen_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_docs)

HELP = re.compile(r"<!-- verl-init-help: ([a-z-]+) -->")
OUTPUT = re.compile(r"<!-- verl-init-output: ([a-z -]+) -->")
MORE = "More topics"


def _listed(nav: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(nav, str):
        found.add(nav)
    elif isinstance(nav, list):
        for item in nav:
            found |= _listed(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            found |= _listed(value)
    return found


def on_config(config: Any) -> Any:
    nav = config.get("nav")
    if not nav:
        return config
    docs = Path(config["docs_dir"])
    listed = _listed(nav)
    extra = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md")
                   if p.relative_to(docs).as_posix() not in listed)
    if extra:
        nav.append({MORE: extra})
    return config


def on_pre_build(config: Any) -> None:
    stale = gen_docs.stale_pages()
    if stale:
        raise PluginError("stale generated pages: " + ", ".join(stale) + " — run `python scripts/gen_docs.py`")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def help_block(match: re.Match[str]) -> str:
        command = match.group(1)
        text = gen_docs.help_text(command)
        if not text.startswith("usage:"):
            raise PluginError(f"{page.file.src_path}: `verl-init {command} --help` printed no usage: {text[:200]!r}")
        shown = "verl-init --help" if command == "render" else f"verl-init {command} --help"
        return f"```text\n$ {shown}\n{text}\n```"

    def output_block(match: re.Match[str]) -> str:
        args = match.group(1).split()
        text = gen_docs.command_output(args)
        if not text:
            raise PluginError(f"{page.file.src_path}: `verl-init {' '.join(args)}` printed nothing")
        return f"```text\n$ verl-init {' '.join(args)}\n{text}\n```"

    return OUTPUT.sub(output_block, HELP.sub(help_block, markdown))
