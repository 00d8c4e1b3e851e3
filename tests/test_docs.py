from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_readme_starts_with_two_setup_commands():
    text = (ROOT / "README.md").read_text()
    blocks = text.split("```")
    assert blocks[1].strip().startswith("bash") and "verl-init --profile" in blocks[1]
    assert blocks[3].strip().startswith("bash") and "pytest" in blocks[3]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text().split("```")[3]
    test_cmd = readme.split("&&")[-1].strip()
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_readme_keys_table_is_current():
    table = subprocess.run([sys.executable, "-m", "wizard.cli.app", "keys", "--markdown"], capture_output=True, text=True,
                           cwd=ROOT, check=True).stdout.strip()
    assert table in (ROOT / "README.md").read_text(), "regenerate the README table with `verl-init keys --markdown`"


def test_readme_rules_table_is_current():
    table = subprocess.run([sys.executable, "-m", "wizard.cli.app", "rules", "--markdown"], capture_output=True, text=True,
                           cwd=ROOT, check=True).stdout.strip()
    assert table in (ROOT / "README.md").read_text(), "regenerate the README table with `verl-init rules --markdown`"


def test_every_rule_id_is_documented():
    import re

    code = "".join(p.read_text() for p in (ROOT / "wizard").rglob("*.py"))
    ids = set(re.findall(r'"(VI\d{3})"', code))
    readme = (ROOT / "README.md").read_text()
    missing = sorted(i for i in ids if i not in readme and not _in_range(i, readme))
    assert not missing, missing


def _in_range(rule: str, readme: str) -> bool:
    import re

    n = int(rule[2:])
    for a, b in re.findall(r"VI(\d{3})[–-]VI(\d{3})", readme):
        if int(a) <= n <= int(b):
            return True
    return False
