"""The `verl-init check` rules VI410-VI499: ID -> (title, what it checks / where verl checks it).

Part of wizard.check.catalog.RULES (which merges this table), kept apart only to keep each module short. The
VI6xx and VI9xx ranges of the check's rules are full; VI401-VI409 are the planner's role rules
(wizard/check/rule_index.py), so the check's rules continue at VI410.
"""

from __future__ import annotations

RULES_4XX: dict[str, tuple[str, str]] = {
    "VI434": ("Ray CPUs below verl's placement-group reservation", "the launch gives Ray N CPUs (`ray start "
              "--num-cpus N`, or ray_kwargs.ray_init.num_cpus=N when verl starts Ray) but verl holds more in "
              "placement groups before training: 3 CPUs per GPU bundle (single_controller/ray/base.py:146, "
              "max_colocate_count :192) plus, with the V1 trainer, TransferQueue's num_data_storage_units + 1 "
              "controller (main_ppo.py:143); the unplaceable bundle waits forever in ray.get(pg.ready()) "
              "(base.py:160): a silent hang (verl#7656)"),
}
