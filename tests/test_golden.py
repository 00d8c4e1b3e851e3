"""Each profile's bundle, byte for byte. `pytest tests/test_golden.py --update-golden` rewrites them;
review the diff like code (a change of rendered output is a user-visible change)."""

from __future__ import annotations

from pathlib import Path

import pytest

import wizard

GOLDEN = Path(__file__).parent / "golden"
BASE_DIR = "/work/runs"  # fixed, so relative paths in profiles resolve the same everywhere


def _profiles() -> list[str]:
    from wizard.intent.profiles import profile_names

    return profile_names()


@pytest.mark.parametrize("profile", _profiles())
def test_golden_bundle(profile, request):
    files = wizard.render(wizard.plan(wizard.load_profile(profile), base_dir=BASE_DIR))
    folder = GOLDEN / profile
    if request.config.getoption("--update-golden"):
        if folder.exists():
            for old in sorted(folder.rglob("*"), reverse=True):
                old.unlink() if old.is_file() else old.rmdir()
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text, encoding="utf-8")
    expected = {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in folder.rglob("*") if p.is_file()}
    assert sorted(expected) == sorted(files), "bundle file list changed (run with --update-golden and review)"
    for name, text in files.items():
        assert text == expected[name], f"{profile}/{name} changed (run with --update-golden and review the diff)"
