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

from wizard._version import VERL_TARGET, __version__
from wizard.intent.errors import Problem, UserError, WizardError

_LAZY = {
    "Answers": ("intent.answers", "Answers"),
    "make_answers": ("intent.answers", "make_answers"),
    "load_profile": ("intent.profiles", "load_profile"),
    "load_answers": ("intent.profiles", "load_answers"),
    "list_profiles": ("intent.profiles", "list_profiles"),
    "merge_answers": ("intent.profiles", "merge_answers"),
    "Plan": ("planner.state", "Plan"),
    "plan": ("planner.pipeline", "plan"),
    "render": ("renderer.render", "render"),
    "lint_overrides": ("check.planned", "lint_overrides"),
    "write_bundle": ("renderer.writer", "write_bundle"),
    "verify_with_verl": ("verify.harness", "verify_with_verl"),
    "VerifyReport": ("verify.harness", "VerifyReport"),
    "smoke": ("smoketest.run", "smoke"),
    "SmokeReport": ("smoketest.report", "SmokeReport"),
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
