"""The `verl-init check` rules VI410-VI499: ID -> (title, what it checks / where verl checks it).

Part of wizard.check.catalog.RULES (which merges this table), kept apart only to keep each module short. The
VI6xx and VI9xx ranges of the check's rules are full; VI401-VI409 are the planner's role rules
(wizard/check/rule_index.py), so the check's rules continue at VI410.
"""

from __future__ import annotations

RULES_4XX: dict[str, tuple[str, str]] = {
}
