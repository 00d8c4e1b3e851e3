"""The answers' `overrides` (verl keys the answers do not model), linted as `verl-init check` lints a config.

The planner applies each override after the plan (wizard.planner.stages.overrides, wizard.planner.verl_keys.override_keys) and
refuses what it can tell alone: a malformed override (VI550), a key an answer sets (VI551), a key that would split
a planned mapping (VI552); it names a planned value an override replaces (VI553). What only verl's key tree and
the rules know is asked here: the planned config (before the overrides) is written to a temporary folder and
`check()` runs on it with the overrides as Hydra command-line overrides, so

- a key verl does not have is refused with the nearest known key (and the verl release that had it), a new key
  without `+` or an existing one with `+` as Hydra refuses them, a value of the wrong type (VI801-VI808);
- every rule then runs on the final config (batches, tokens, layout, roles, memory): any error refuses the
  render, named after the override(s) it involves (the rule's own ID, so `verl-init rules VIxxx` explains it);
- an override that adds a key verl never reads (check's VI802 warning) is refused too (VI554): the bundle's
  `verl-init verify` would reject it.

Nothing is written until this passes (wizard/cli/render.py calls it before the writer).
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from wizard.intent.errors import Problem
from wizard.verlspec.hydra_overrides import parse_override

if TYPE_CHECKING:
    from wizard.planner.state import Plan


@dataclass
class OverrideLint:
    """Errors refuse the render; warnings are shown beside the plan's own findings."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def _related(finding_keys: tuple[str, ...], keys: dict[str, str]) -> list[str]:
    """The overrides (text) whose key is one the finding read, or lies above or below one of them."""
    out = []
    for key, text in keys.items():
        if any(k == key or k.startswith(key + ".") or key.startswith(k + ".") for k in finding_keys):
            out.append(text)
    return out


def config_doc_text(plan: Plan) -> str:
    """verl_config.yaml's YAML as planned, before the answers' overrides."""
    from wizard.renderer.render import config_doc, dump_yaml

    return dump_yaml(config_doc(plan, planned=True))


def lint_overrides(plan: Plan, *, defaults: str = "auto") -> OverrideLint:
    """Check the plan's overrides against the planned config with `verl-init check`'s machinery (module doc).
    `defaults`: auto (verl's own Hydra tree when verl is installed, else the shipped snapshot), verl or snapshot."""
    from wizard.check.lint import check

    a = plan.answers
    result = OverrideLint()
    if not a.overrides:
        return result
    keys: dict[str, str] = {}
    for text in a.overrides:
        ov = parse_override(text, "overrides")
        if ov is not None:
            keys[ov.key] = text
    with tempfile.TemporaryDirectory(prefix="verl-init-overrides-") as tmp:
        config = Path(tmp) / "verl_config.yaml"
        config.write_text(config_doc_text(plan), encoding="utf-8")
        report = check(str(config), list(a.overrides), nnodes=a.nnodes, gpus_per_node=a.gpus_per_node,
                       gpu_memory_gb=a.gpu_memory_gb, gpu_type=a.gpu_type, defaults=defaults, workdir=tmp)
    for finding in report.findings:
        p = finding.problem
        named = _related(p.keys, keys)
        if p.rule == "VI802" and named:
            result.errors.append(dataclasses.replace(
                p, rule="VI554", severity="error", keys=("overrides",),
                message=f"override {named[0]!r}: {p.message}; `verl-init verify` refuses such a bundle",
                hint=p.hint if p.hint.startswith("did you mean") else "remove it, or name a key verl reads"))
            continue
        if p.severity == "info" or (p.severity == "warning" and not named):
            continue
        where = f"override {named[0]!r}" if len(named) == 1 else \
            f"overrides {', '.join(repr(t) for t in named)}" if named else \
            f"with the overrides {', '.join(repr(t) for t in a.overrides)}"
        problem = dataclasses.replace(p, keys=("overrides",), message=f"{where}: {p.message}")
        (result.errors if p.severity == "error" else result.warnings).append(problem)
    return result
