"""README.md is the entrance and docs/ the manual: what they claim about commands, tables and links holds."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

DOCS = ROOT / "docs"
QUICK = '-m "not slow"'


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_docs = _load("verl_init_gen_docs_test", ROOT / "scripts" / "gen_docs.py")


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def _setup_blocks(text: str) -> tuple[str, str]:
    blocks = text.split("```")
    return blocks[1], blocks[3]


def _test_command(block: str) -> str:
    return block.split("&&")[-1].strip()


def test_readme_starts_with_two_setup_commands():
    text = _readme()
    assert text.startswith("# verl-init\n")
    first, second = _setup_blocks(text)
    assert first.strip().startswith("bash") and "verl-init --profile" in first
    assert second.strip().startswith("bash") and "pytest" in second
    # what the tool is, before the commands
    assert "verl" in text.split("```")[0].split("\n", 1)[1]


def test_readme_is_an_entrance_of_at_most_200_lines():
    lines = _readme().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move sections into docs/"


def test_setup_test_command_is_the_quick_loop_and_ci_runs_the_full_suite():
    quick = _test_command(_setup_blocks(_readme())[1])
    assert "python -m pytest" in quick and "-n " in quick and QUICK in quick
    full = quick.replace(f" {QUICK}", "")
    readme = _readme()
    assert f"`{quick}`" in readme and f"`{full}`" in readme, "README's tests table names both commands"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_commands = [line.strip() for line in ci.splitlines() if line.strip().startswith("python -m pytest")]
    assert ci_commands == [full], f"CI runs the full suite exactly as README states it: {ci_commands}"


def test_readme_states_how_long_each_test_command_takes():
    table = _readme().split("## Tests")[1].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `python -m pytest")]
    assert len(rows) == 2 and QUICK in rows[0] and QUICK not in rows[1]
    for row in rows:
        assert re.search(r"\d+ min", row), f"no time in {row!r}"
        assert "MEASURED" not in row, "fill in the measured time"
    assert "≤ 10 min on 2 idle cores" in rows[0], "the quick loop's target"


def test_install_page_repeats_readme_setup_commands():
    assert _setup_blocks((DOCS / "install.md").read_text(encoding="utf-8")) == _setup_blocks(_readme())


def test_readme_and_docs_links_point_at_files():
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://", target):
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to a missing {target}"


def test_generated_reference_pages_are_current():
    assert gen_docs.stale_pages() == [], "run `python scripts/gen_docs.py` and commit docs/reference/"


def test_a_stale_reference_page_is_caught(tmp_path, monkeypatch):
    for rel in gen_docs.GENERATED:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(gen_docs, "ROOT", tmp_path)
    assert gen_docs.stale_pages() == []
    page = tmp_path / "docs" / "reference" / "rules.md"
    page.write_text(page.read_text(encoding="utf-8").replace("| VI201 |", "| VI299 |"), encoding="utf-8")
    assert gen_docs.stale_pages() == ["docs/reference/rules.md"]


def test_reference_pages_cover_every_answer_and_rule():
    from wizard.check.rule_index import all_rules
    from wizard.intent.answers import Answers

    answers = (DOCS / "reference" / "answers.md").read_text(encoding="utf-8")
    assert [n for n in Answers.model_fields if f"| `{n}` |" not in answers] == []
    rules = (DOCS / "reference" / "rules.md").read_text(encoding="utf-8")
    assert [r for r in all_rules() if f"| {r} |" not in rules] == []


def test_every_rule_id_in_the_code_is_documented():
    code = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "wizard").rglob("*.py"))
    ids = set(re.findall(r'"(VI\d{3})"', code))
    rules = (DOCS / "reference" / "rules.md").read_text(encoding="utf-8")
    assert sorted(i for i in ids if f"| {i} |" not in rules) == []


def test_every_command_has_a_page_with_its_generated_options():
    from wizard.cli.app import COMMANDS

    for command in ["render", *COMMANDS]:
        page = DOCS / "commands" / f"{command}.md"
        assert page.is_file(), f"no page for `{command}`: add docs/commands/{command}.md"
        assert f"<!-- verl-init-help: {command} -->" in page.read_text(encoding="utf-8"), page
        assert gen_docs.help_text(command).startswith("usage: verl-init"), command


def test_answer_sections_follow_the_model_source():
    sections = dict(gen_docs.answer_sections())
    assert "nnodes" in sections["hardware"] and "overrides" in sections[next(s for s in sections if "escape" in s)]
    assert "other" not in sections, "every field sits under a `# --- section ---` comment of Answers"


def test_mkdocs_hook_lists_unlisted_pages_and_fails_on_stale_pages(monkeypatch):
    hooks = _load("verl_init_mkdocs_hooks_test", ROOT / "scripts" / "mkdocs_hooks.py")
    config = {"docs_dir": str(DOCS), "nav": [{"Home": "index.md"}]}
    hooks.on_config(config)
    more = config["nav"][-1][hooks.MORE]
    assert "install.md" in more and "commands/plan.md" in more and "index.md" not in more
    monkeypatch.setattr(hooks.gen_docs, "stale_pages", lambda: ["docs/reference/rules.md"])
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="rules.md"):
        hooks.on_pre_build(config)


def test_mkdocs_build_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    plan = (tmp_path / "site" / "commands" / "plan" / "index.html").read_text(encoding="utf-8")
    assert "usage: verl-init plan" in plan, "the command pages carry the generated --help"
    assert "verl-init-help" not in plan
    profiles = (tmp_path / "site" / "commands" / "profiles" / "index.html").read_text(encoding="utf-8")
    assert "single-node-8gpu" in profiles
