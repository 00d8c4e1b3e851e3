"""Hydra overrides for `check`: the grammar lives in wizard.verlspec.hydra_overrides (the planner applies the
answers' `overrides` with it too); this module keeps check's own import path."""

from __future__ import annotations

from wizard.verlspec.hydra_overrides import Override, format_value, parse_override, parse_value

__all__ = ["Override", "format_value", "parse_override", "parse_value"]
