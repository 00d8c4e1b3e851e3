"""What `verl-init check` hands back: findings (each with an optional safe `Fix`), the report, its
text form, and the corrected override list of `--fix`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wizard.check.hardware import Hardware
from wizard.check.overrides import format_value, parse_override
from wizard.check.source import Source
from wizard.check.tree import flatten
from wizard.intent.errors import Problem


@dataclass
class Fix:
    """One safe edit: set keys and/or delete keys (a rename is both)."""

    set: dict[str, Any] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    strip_plus: list[str] = field(default_factory=list)
    plus: list[str] = field(default_factory=list)  # keys of `set` not in verl's tree: appended as +key=value

    def describe(self) -> str:
        parts = [f"{'+' if k in self.plus else ''}{k}={format_value(v)}" for k, v in self.set.items()]
        parts += [f"remove {k}" for k in self.delete]
        parts += [f"{k} without +" for k in self.strip_plus]
        return "; ".join(parts)


@dataclass
class Finding:
    problem: Problem
    fix: Fix | None = None

    def as_dict(self) -> dict[str, object]:
        return self.problem.as_dict()


@dataclass
class Report:
    source: Source
    findings: list[Finding]
    config: dict[str, Any]
    defaults: str  # "verl <version> Hydra tree" or "snapshot of verl <version>"
    hardware: Hardware
    verl: Any | None = None  # wizard.verify.harness.VerifyReport with --verl
    memory: Any | None = None  # wizard.planner.memory.Estimate when the memory fit was checked
    time: dict[str, Any] | None = None  # wizard.planner.steptime_plan.as_json when the step time was predicted
    time_not_predicted: str | None = None  # else why not (the model's size, the GPUs, the lengths, the engine)
    deep_notes: list[str] = field(default_factory=list)  # what `--deep` could not try (no tokenizer, no data here)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.problem.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.problem.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors and (self.verl is None or self.verl.ok)

    def ids(self, severity: str | None = None) -> set[str]:
        return {f.problem.rule for f in self.findings if severity is None or f.problem.severity == severity}

    def as_dict(self) -> dict[str, object]:
        doc: dict[str, object] = {"findings": [f.as_dict() for f in self.findings], "config": self.config}
        if self.memory is not None:  # the GPU memory is known and the model could be sized
            doc["memory"] = self.memory.as_dict()
        if self.time is not None:  # the model could be sized: seconds per phase, step, run and GPU-hours
            doc["time"] = self.time
        elif self.time_not_predicted:
            doc["time_not_predicted"] = self.time_not_predicted
        if self.verl is not None:
            doc["verl"] = self.verl.as_dict()
        if self.deep_notes:
            doc["deep_notes"] = list(self.deep_notes)
        return doc


def dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[Any, ...]] = set()
    out = []
    for fd in findings:
        key = (fd.problem.rule, fd.problem.severity, fd.problem.keys, fd.problem.message)
        if key not in seen:
            seen.add(key)
            out.append(fd)
    return out


def fixed_overrides(report: Report) -> tuple[list[str], list[str]]:
    """(corrected override list, lines describing each change). Only findings with a single safe fix are
    applied. For a script or overrides: the whole list, edited in place. For a YAML: the overrides to
    append after `--config-path/--config-name` (`~key` removes a YAML key)."""
    src = report.source
    fixes = [f for f in report.findings if f.fix is not None]
    changes: list[str] = []
    sets: dict[str, Any] = {}
    deletes: set[str] = set()
    strip: set[str] = set()
    plus: set[str] = set()
    renames: dict[str, str] = {}  # old key -> new key: the new override takes the old one's place in the list
    for fd in fixes:
        fx = fd.fix
        assert fx is not None
        if len(fx.set) == 1 and len(fx.delete) == 1:
            renames[fx.delete[0]] = next(iter(fx.set))
        sets.update(fx.set)
        deletes.update(fx.delete)
        strip.update(fx.strip_plus)
        plus.update(fx.plus)
        changes.append(f"{fd.problem.rule} {', '.join(fd.problem.keys)}: {fx.describe()}")
    out: list[str] = []
    done: set[str] = set()
    listed = {ov.key for ov in map(parse_override, src.overrides) if ov is not None}
    for text in src.overrides:
        ov = parse_override(text)
        if ov is None:
            out.append(text)
            continue
        if ov.key in deletes:
            new = renames.get(ov.key)
            if new is not None and new not in done and new not in listed:
                out.append(f"{new}={format_value(sets[new])}")
                done.add(new)
            continue
        if ov.key in sets:
            op = "" if (ov.key in strip or ov.op == "+") else ov.op
            out.append(f"{op}{ov.key}={format_value(sets[ov.key])}")
            done.add(ov.key)
            continue
        if ov.key in strip and ov.op == "+":
            out.append(text[1:])
            continue
        out.append(text)
    yaml_keys = set(flatten(src.yaml_body))
    for key in sorted(deletes):
        if key in yaml_keys:
            out.append(f"~{key}")
    for key, value in sets.items():
        if key not in done:
            out.append(f"{'+' if key in plus else ''}{key}={format_value(value)}")
    return out, changes


def format_report(report: Report) -> str:
    hw = report.hardware
    hw_text = hw.label if hw.nnodes and hw.gpus_per_node else "GPUs unresolved"
    if hw.gpu_memory_gb:
        hw_text += f" × {hw.gpu_memory_gb:g} GB"
    hw_text += {"flags": " (from the flags)", "bundle": " (from the bundle's verl-init.yaml)",
                "config": " (from trainer.*)", "torchrun": " (from torchrun's --nnodes × --nproc-per-node)"}[hw.source]
    lines = [f"verl-init check: {report.source.label}", f"  resolved with the {report.defaults}; {hw_text}"]
    if report.source.extraction is not None and report.source.extraction.launch is not None:
        la = report.source.extraction.launch
        lines.append(f"  launch at line {la.line}: {len(la.overrides)} override(s)"
                     + (f", --config-path {la.config_path} --config-name {la.config_name}" if la.config_path else ""))
        if report.source.recipe:
            lines.append(f"  recipe entry point {report.source.recipe}: "
                         + (f"its config {report.source.yaml_path}" if report.source.yaml_path else
                            f"its config not here, checked against verl's {report.source.config_name}"
                            if report.source.config_missing else f"verl's own {report.source.config_name} tree"))
    width = max((len(f.problem.rule) for f in report.findings), default=5)
    for fd in report.findings:
        p = fd.problem
        keys = ", ".join(p.keys) if p.keys else "config"
        lines.append(f"  {p.severity:<7} {p.rule:<{width}}  {keys}: {p.message}")
        if p.hint:
            lines.append(f"  {'':<7} {'':<{width}}  → {p.hint}" + ("  [--fix]" if fd.fix else ""))
    if report.verl is not None:
        v = report.verl
        verdict_v = f"NOT VERIFIED — {v.blocked}" if getattr(v, "blocked", "") else ("accepted" if v.ok else "REJECTED")
        lines.append(f"  verl {v.verl_version}'s own checks: {verdict_v}")
        for chk in v.checks:
            if not chk.ok and not chk.skipped:
                kind = "" if getattr(chk, "source", "verl") == "verl" else " (verl-init's replica of a worker-time assert)"
                lines.append(f"    FAIL {chk.name}{kind}: {chk.detail}")
    lines += [f"  --deep: {note}" for note in report.deep_notes]
    if report.time is None and report.time_not_predicted:
        lines.append(f"  step time {report.time_not_predicted}")
    counts = {s: sum(1 for f in report.findings if f.problem.severity == s) for s in ("error", "warning", "info")}
    verdict = "errors found" if report.errors else "no errors"
    lines.append(f"{verdict}: {counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info")
    return "\n".join(lines)
