"""The generators under scripts/ (they write the tables in wizard/*/data from verl's source), loaded as modules by
the tests that regenerate a table and compare it with the committed one."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py as a module (scripts/ on sys.path: the generators import each other)."""
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


def regenerated(name: str) -> str:
    """The table scripts/<name>.py builds from the installed verl, as it writes it."""
    return json.dumps(load_script(name).build(), indent=1, sort_keys=True) + "\n"
