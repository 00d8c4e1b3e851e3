"""verl-init: answers → plan → a verl config that verl itself accepts.

    import wizard
    answers = wizard.load_profile("cluster-8gpu")
    plan = wizard.plan(answers)
    files = wizard.render(plan)
    wizard.write_bundle(files, "runs/qwen7b")

Heavy modules (pydantic, jinja2, verl, ...) load on first use, not on `import wizard`.
"""

from __future__ import annotations

from typing import Any

from ._version import VERL_TARGET, __version__
from .errors import Problem, UserError, WizardError

_LAZY = {
    "Answers": ("answers", "Answers"),
    "make_answers": ("answers", "make_answers"),
    "load_profile": ("profiles", "load_profile"),
    "load_answers": ("profiles", "load_answers"),
    "list_profiles": ("profiles", "list_profiles"),
    "merge_answers": ("profiles", "merge_answers"),
    "Plan": ("planner", "Plan"),
    "plan": ("planner", "plan"),
    "render": ("renderer", "render"),
    "write_bundle": ("bundle", "write_bundle"),
    "verify_with_verl": ("verify", "verify_with_verl"),
    "VerifyReport": ("verify", "VerifyReport"),
    "smoke": ("smoke", "smoke"),
    "SmokeReport": ("smoke", "SmokeReport"),
}

__all__ = ["VERL_TARGET", "Problem", "UserError", "WizardError", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'wizard' has no attribute {name!r}")
