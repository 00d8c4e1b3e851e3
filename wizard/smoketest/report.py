"""The smoke report: phases, measured checks, the failure, and how it is printed.

Only the standard library is imported at module level (rich inside print_rich).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

PHASES = ("probe", "data", "rollout", "reward", "advantage", "update")
PITFALLS = {
    1: "roles that share one model",
    2: "rollout and update batches out of step",
    3: "device mapping and parallel groups",
    4: "data that does not match what verl reads",
    5: "local versus cluster environment",
}



@dataclass
class PhaseResult:
    name: str
    status: str = "pending"  # pending | running | ok | failed | skipped
    seconds: float = 0.0
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "seconds": round(self.seconds, 2), "detail": self.detail}


@dataclass
class Check:
    pitfall: Optional[int]  # 1-5 (the five classic pitfalls, docs/guide/pitfalls.md) or None for properties of the run itself
    name: str
    ok: Optional[bool]  # None: not measurable with this engine (does not fail the run)
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)
    phase: Optional[str] = None  # the phase that measured it (a failed check fails its phase)
    hint: str = ""
    # "measured": computed from what this run did (tests/test_smoke_faults.py plants a fault that makes each one
    # fail); "static": read from the composed config or the environment, the same with or without the run
    kind: str = "measured"

    def as_dict(self) -> dict[str, Any]:
        return {"pitfall": self.pitfall, "name": self.name, "kind": self.kind, "ok": self.ok, "phase": self.phase,
                "detail": self.detail, "hint": self.hint, "evidence": jsonable(self.evidence)}


@dataclass
class Failure:
    phase: str
    message: str
    hint: str = ""
    error: str = ""  # exception type, when the failure is an exception

    def line(self) -> str:
        return f"{self.phase}: {self.message}" + (f" — {self.hint}" if self.hint else "")


@dataclass
class SmokeReport:
    bundle: str
    engine: str
    algorithm: str = ""
    adv_estimator: str = ""
    prompts: int = 0
    samples: int = 0  # prompts × samples per prompt: what one step trains on
    samples_generated: int = 0
    samples_used: Optional[int] = 0  # cpu engine: distinct samples whose gradient reached the actor (measured per micro-batch)
    reward_mean: Optional[float] = None
    reward_std: Optional[float] = None
    kl: Optional[float] = None
    policy_loss: Optional[float] = None
    entropy: Optional[float] = None
    actor_updated: Optional[bool] = None
    reference_unchanged: Optional[bool] = None
    critic_used: Optional[bool] = None
    critic_updated: Optional[bool] = None
    phases: list[PhaseResult] = field(default_factory=lambda: [PhaseResult(p) for p in PHASES])
    checks: list[Check] = field(default_factory=list)
    failure: Optional[Failure] = None
    geometry: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    placement: dict[str, Any] = field(default_factory=dict)
    placement_note: str = ""
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    reward: dict[str, Any] = field(default_factory=dict)
    update: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)  # verl engine: step-1 metrics as verl printed them
    command: list[str] = field(default_factory=list)  # verl engine: the command line that ran
    total_seconds: float = 0.0
    log_tail: str = ""

    @property
    def seconds(self) -> dict[str, float]:
        out = {p.name: round(p.seconds, 2) for p in self.phases}
        out["total"] = round(self.total_seconds, 2)
        return out

    @property
    def ok(self) -> bool:
        return (self.failure is None and all(p.status == "ok" for p in self.phases)
                and all(c.ok is not False for c in self.checks))

    def phase(self, name: str) -> PhaseResult:
        return next(p for p in self.phases if p.name == name)

    def pitfalls(self) -> dict[str, Optional[bool]]:
        """Per pitfall: True if every check of it (measured or static) held, False if one failed, None if none
        applied."""
        out: dict[str, Optional[bool]] = {}
        for number in PITFALLS:
            measured = [c.ok for c in self.checks if c.pitfall == number and c.ok is not None]
            out[str(number)] = None if not measured else all(measured)
        return out

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ok": self.ok, "engine": self.engine, "bundle": self.bundle, "algorithm": self.algorithm,
            "adv_estimator": self.adv_estimator, "prompts": self.prompts, "samples": self.samples,
            "samples_generated": self.samples_generated, "samples_used": self.samples_used,
            "reward_mean": self.reward_mean, "reward_std": self.reward_std, "kl": self.kl,
            "policy_loss": self.policy_loss, "entropy": self.entropy, "actor_updated": self.actor_updated,
            "reference_unchanged": self.reference_unchanged, "critic_used": self.critic_used,
            "critic_updated": self.critic_updated, "seconds": self.seconds,
            "phases": [p.as_dict() for p in self.phases], "pitfalls": self.pitfalls(),
            "checks": [c.as_dict() for c in self.checks],
            "failure": None if self.failure is None else dict(self.failure.__dict__),
            "geometry": self.geometry, "resources": self.resources, "placement": self.placement,
            "placement_note": self.placement_note, "model": self.model, "data": self.data, "reward": self.reward,
            "update": self.update, "metrics": self.metrics, "command": self.command,
        }
        if not self.ok and self.log_tail:
            doc["log_tail"] = self.log_tail
        return jsonable(doc)

    def summary(self) -> str:
        verdict = "PASSED" if self.ok else "FAILED"
        head = f"smoke {verdict}: {self.engine} engine, {self.algorithm or self.adv_estimator}"
        if self.prompts:
            head += f", {self.prompts} prompts × {self.samples // max(1, self.prompts)} = {self.samples} samples"
        parts = [head]
        if self.reward_mean is not None:
            parts.append(f"reward {self.reward_mean:.3f}" + (f" ± {self.reward_std:.3f}" if self.reward_std is not None else ""))
        if self.kl is not None:
            parts.append(f"kl {self.kl:.3g}")
        if self.policy_loss is not None:
            parts.append(f"policy loss {self.policy_loss:.3g}")
        parts.append(f"{self.total_seconds:.1f} s")
        text = ", ".join(parts)
        if self.failure is not None:
            text += f"\n  failed in {self.failure.line()}"
        for c in self.checks:
            if c.ok is False:
                text += f"\n  pitfall {c.pitfall or '-'} {c.name} ({c.kind}): {c.detail}"
        return text


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if hasattr(value, "item"):
        try:
            return jsonable(value.item())
        except (ValueError, TypeError):
            pass
    return str(value)




SECTIONS = (("measured", "measured in this run"), ("static", "static: read from the config and the environment"))


def _sorted(report: SmokeReport, kind: str) -> list[Check]:
    return sorted((c for c in report.checks if c.kind == kind), key=lambda c: (c.pitfall or 0, c.name))


def format_report(report: SmokeReport) -> str:
    """The final table as plain text."""
    lines = [f"verl-init smoke · {report.engine} engine · {report.bundle}"]
    width = max(len(p.name) for p in report.phases)
    for p in report.phases:
        mark = {"ok": "ok  ", "failed": "FAIL", "skipped": "skip", "pending": "    ", "running": "... "}[p.status]
        lines.append(f"  [{mark}] {p.name.ljust(width)} {p.seconds:6.1f} s  {p.detail}")
    for kind, title in SECTIONS:
        checks = _sorted(report, kind)
        if not checks:
            continue
        lines.append("")
        lines.append(f"  pitfall checks (the five classic pitfalls, docs/guide/pitfalls.md), {title}:")
        for c in checks:
            mark = "ok  " if c.ok else ("n/a " if c.ok is None else "FAIL")
            lines.append(f"  [{mark}] {c.pitfall or '-'} {c.name}: {c.detail}")
    lines.append("")
    lines.append(report.summary())
    return "\n".join(lines)


def print_rich(report: SmokeReport, stream: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream)
    for kind, title in SECTIONS:
        checks = _sorted(report, kind)
        if not checks:
            continue
        t = Table(title=f"pitfall checks (the five classic pitfalls, docs/guide/pitfalls.md), {title}", title_justify="left",
                  show_edge=False)
        t.add_column("#")
        t.add_column("check")
        t.add_column("", width=2)
        t.add_column("evidence", overflow="fold")
        for c in checks:
            mark = "[green]✓[/]" if c.ok else ("[dim]n/a[/]" if c.ok is None else "[red]✗[/]")
            t.add_row(str(c.pitfall or "-"), c.name, mark, c.detail.replace("[", "\\["))
        console.print(t)
    console.print(("[green]" if report.ok else "[red]") + report.summary().replace("[", "\\[") + "[/]")

