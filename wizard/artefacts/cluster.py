"""Bundle files for the cluster capability (see renderer.ARTEFACT_PROVIDERS)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..planner import Plan
    from ..renderer import Artefact


def artefacts(plan: "Plan") -> "list[Artefact]":
    return []
