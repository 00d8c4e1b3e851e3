"""Answers → Plan: every number verl needs, each with the reason it was chosen.

The planner never rewrites what the user chose: an explicit answer is used as given or the plan is
rejected with a rule ID, the keys involved and the nearest valid values. Derived values are
chosen so that every divisibility verl checks (on the driver, in the TaskRunner and inside the Ray
workers; see docs/verl-facts.md §1) holds by construction.

The rooms, bottom up (imports point down only):
- wizard.planner.state: the build state (`Build`), the `Plan`, and the refusals that suggest values (`settle`);
- wizard.planner.stages.*: the rule stages, one concern a module (hardware, algorithm, layout, fit, batches, data,
  vision, checkpoints, overrides; genrm, agent and sandbox have their own modules);
- wizard.planner.verl_keys: the key stages, writing verl's keys in the order verl_config.yaml shows them;
- this module: `plan()`, the table of contents.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

from wizard.intent.answers import Answers
from wizard.planner import agent, genrm, precision, verl_keys
from wizard.planner.stages import algorithm, batches, checkpoints, data, fit, hardware, layout, overrides, vision
from wizard.planner.state import Build, Plan, Stages, settle, with_absolute_paths

# Names other modules import from here (the planner's public face).
from wizard.planner.state import experiment_name  # noqa: F401  (wizard.cli.interactive.questions)
from wizard.planner.stages.vision import TEXT_DATASETS  # noqa: F401  (wizard.cli.interactive.questions)

# The rule stages, in order: each resolves numbers on the build state and records findings.
RULE_STAGES: Stages = (
    hardware.cluster, algorithm.samples_and_kl, algorithm.reward, genrm.rules, layout.parallelism, fit.memory_fit,
    batches.step_batches, batches.micro_batches, fit.memory_verdict, algorithm.lora, data.data, vision.vision,
    checkpoints.checkpoints, agent.rules, overrides.overrides,
)

# The key stages: verl's keys, in the order they appear in verl_config.yaml.
KEY_STAGES: Stages = (
    verl_keys.algorithm_keys, verl_keys.data_keys, verl_keys.model_keys, verl_keys.actor_keys, verl_keys.rollout_keys,
    agent.keys, verl_keys.ref_keys, verl_keys.critic_keys, precision.keys, verl_keys.reward_keys, verl_keys.genrm_keys,
    verl_keys.trainer_keys, verl_keys.vision_keys, verl_keys.override_keys, verl_keys.describe_roles,
)


def plan(answers: Answers, *, base_dir: Optional[str] = None,
         topology: Optional[Sequence[Sequence[int]]] = None, bundle_dir: Optional[str] = None,
         hints: bool = True) -> Plan:
    """Resolve answers into a Plan; raise WizardError listing every rule the answers break.

    `topology`: for a probed node, the link level between each pair of its GPUs (see LINK_LEVELS:
    1 NVLink/NVSwitch, 2 same PCIe switch, 3 across a PCIe host bridge, 4 across NUMA nodes).
    Tensor-parallel groups (consecutive GPUs) then avoid host-bridge and NUMA crossings whenever a
    layout without them fits, even at the cost of offloading.

    `hints=False`: refusals carry no suggested values (a caller that needs only the rule IDs skips the re-plans
    that confirm each suggestion).

    A pipeline: the rule stages resolve numbers and record findings; if none is an error, the key
    stages write verl's keys in the order verl_config.yaml shows them.

    `bundle_dir`: the folder the bundle will be written to. Data paths written relative (to `base_dir`, the
    current folder by default) are then stored relative to the bundle, in the plan's answers (verl-init.yaml)
    and in every file that names them, so the bundle works wherever it is copied with its data beside it."""
    base = base_dir if base_dir is not None else os.getcwd()
    a = with_absolute_paths(answers, base)
    # hints=False: a caller that only needs the rule IDs skips re-planning each suggested value (state.settle)
    b = Build(a=a, base=base, topology=topology, given=set(a.model_fields_set), written=answers,
              bundle=os.path.abspath(os.path.join(base, bundle_dir)) if bundle_dir is not None else None,
              trial=not hints)
    for stage in RULE_STAGES:
        stage(b)
    layout.suggestions(b)  # the layout refusals raised inside the memory-fit stage get confirmed values too
    settle(b, RULE_STAGES)
    b.f.raise_if_errors()
    for stage in KEY_STAGES:
        stage(b)
    b.f.raise_if_errors()  # the overrides stage refuses an override that would split a planned mapping
    return Plan(answers=a.model_copy(update=b.stored) if b.stored else a, base_dir=base, settings=b.s.items,
                facts=b.facts, roles=b.roles, findings=b.f.others,
                memory=b.decision.estimate if b.decision else None, bundle_dir=b.bundle, replaced=b.replaced)
