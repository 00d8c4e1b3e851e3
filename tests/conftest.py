from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HAS_VERL = importlib.util.find_spec("verl") is not None

# Tests never reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/ from the current renderer")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_VERL:
        return
    skip = pytest.mark.skip(reason="verl is not installed (pip install torch==2.13.0 'verl==0.9.1')")
    for item in items:
        if "verl" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local Qwen2-shaped config + tokenizer: stands in for hub models verl must load."""
    from wizard.smoketest.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture()
def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_cli(args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str | None = None):
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "wizard.cli.app", *args], cwd=cwd, env=env, capture_output=True, text=True,
        input=stdin if stdin is not None else "", timeout=120,
    )
