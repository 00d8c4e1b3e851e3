"""Where the shipped templates and profiles live: inside the wheel, or in the checkout."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """`templates` or `profiles`: wizard/_data/<name> in a wheel, <checkout>/<name> in editable mode."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"verl-init is installed without its {name}/ folder (looked in {_PKG / '_data'})")


def offline_data() -> Path:
    """The built-in offline dataset (GSM8K-style train.jsonl / test.jsonl; scripts/make_offline_dataset.py)."""
    return _PKG / "offline_data"
