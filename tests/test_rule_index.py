"""wizard.check.rule_index stays in step with the rule IDs the code emits."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from wizard.check import catalog, rule_index

WIZARD = Path(rule_index.__file__).resolve().parent.parent
INDEX_FILE = Path(rule_index.__file__).resolve()
CATALOG_FILE = Path(catalog.__file__).resolve()
LITERAL = re.compile(r"""["'](VI\d{3})["']""")
ALLOWED_AREAS = {"answers", "batching", "layout", "roles", "reward & data", "memory", "cluster", "probe & doctor",
                 "bundle", "verify", "smoke", "internal"}


def _lint_table_lines() -> range:
    """Lines of the `RULES = {...}` table in wizard/check/catalog.py (descriptions, not uses)."""
    tree = ast.parse(CATALOG_FILE.read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "RULES":
            return range(node.lineno, (node.end_lineno or node.lineno) + 1)
    raise AssertionError("wizard/check/catalog.py has no RULES table")


def _code_ids(*, skip_lint_table: bool = False) -> set[str]:
    """Every "VIddd" string literal in wizard/**/*.py, except in wizard/check/rule_index.py itself."""
    table = _lint_table_lines() if skip_lint_table else range(0)
    found: set[str] = set()
    for path in sorted(WIZARD.rglob("*.py")):
        if path.resolve() == INDEX_FILE:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for no, line in enumerate(lines, start=1):
            if path.resolve() == CATALOG_FILE and no in table:
                continue
            found.update(LITERAL.findall(line))
    return found


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_scanner_sees_the_code():
    ids = _code_ids()
    assert len(ids) > 50
    assert set(catalog.RULES) <= ids  # the lint table itself is code the scanner reads
    assert "VI000" in ids  # errors.py's default rule


def test_every_code_id_is_indexed():
    missing = sorted(_code_ids() - set(rule_index.all_rules()))
    assert not missing, f"rule IDs emitted by wizard/ but absent from wizard/rule_index.RULES: {missing}"


@pytest.mark.slow
def test_no_stale_entries():
    used = _code_ids()
    stale = sorted(set(rule_index.RULES) - used)
    assert not stale, f"wizard/rule_index.RULES lists IDs no code uses: {stale}"
    used_outside_table = _code_ids(skip_lint_table=True)
    unused_lint = sorted(set(catalog.RULES) - used_outside_table)
    assert not unused_lint, f"wizard.check.catalog.RULES lists IDs no code emits: {unused_lint}"


def test_lint_rules_are_not_repeated():
    overlap = sorted(set(rule_index.RULES) & set(catalog.RULES))
    assert not overlap, f"described in wizard.check.catalog.RULES already: {overlap}"


def test_all_rules_merges_and_sorts():
    merged = rule_index.all_rules()
    assert list(merged) == sorted(merged)
    assert set(merged) == set(rule_index.RULES) | set(catalog.RULES)
    for rule, entry in catalog.RULES.items():
        assert merged[rule] == ("check (linter)", entry[0])
    for rule, entry in rule_index.RULES.items():
        assert merged[rule] == entry


@pytest.mark.parametrize("rule", sorted(rule_index.RULES))
def test_entry_shape(rule):
    assert re.fullmatch(r"VI\d{3}", rule)
    entry = rule_index.RULES[rule]
    assert isinstance(entry, tuple) and len(entry) == 2
    area, title = entry
    assert area in ALLOWED_AREAS, f"{rule}: area {area!r}"


@pytest.mark.parametrize("rule", sorted(rule_index.all_rules()))
def test_title_is_one_short_line(rule):
    area, title = rule_index.all_rules()[rule]
    assert area in ALLOWED_AREAS | {"check (linter)"}
    assert isinstance(title, str) and title.strip(), f"{rule}: empty title"
    assert title == title.strip(), f"{rule}: surrounding whitespace"
    assert "\n" not in title and "\r" not in title, f"{rule}: title spans lines"
    assert len(title) <= 100, f"{rule}: title is {len(title)} characters"
    assert not title.endswith("."), f"{rule}: trailing period"


def test_markdown_has_one_row_per_rule():
    text = rule_index.markdown()
    rules = rule_index.all_rules()
    assert not text.endswith("\n")
    lines = text.split("\n")
    assert lines[0] == "| rule | area | what it detects |"
    assert re.fullmatch(r"\|\s*-+\s*\|\s*-+\s*\|\s*-+\s*\|", lines[1])
    rows = lines[2:]
    assert len(rows) == len(rules)
    for row, (rule, (area, title)) in zip(rows, rules.items(), strict=True):
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        assert cells == [rule, area, title], row


def test_markdown_escapes_pipes(monkeypatch):
    monkeypatch.setitem(rule_index.RULES, "VI000", ("internal", "a | b"))
    row = next(line for line in rule_index.markdown().split("\n") if line.startswith("| VI000 "))
    assert row == "| VI000 | internal | a \\| b |"
