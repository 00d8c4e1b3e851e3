"""Bundle files for checkpoints (see renderer.ARTEFACT_PROVIDERS): `export_hf.sh`, rendered when the plan saves
checkpoints (save_freq > 0), merges a checkpoint's actor into a Hugging Face folder with verl's model merger, and
PLAN.md's "Checkpoints and export" lines (where checkpoints live per cluster type, what they hold, how a run
resumes; wizard.renderer.render.checkpoint_lines). verl 0.9.1 facts, each with its source:

- trainer/ppo/v1/trainer_base.py:481 saves when save_freq > 0, every save_freq steps and at the last step, to
  `default_local_dir/global_step_N/` (actor/, critic/ with a critic, data.pt: the dataloader's position) and
  writes latest_checkpointed_iteration.txt there; `_load_checkpoint` (:850) resumes from it (auto) or from
  resume_from_path, relative paths from the folder verl runs in.
- actor.checkpoint.save_contents defaults to [model, optimizer, extra] (trainer/config/actor/actor.yaml); the
  checkpoint manager also writes huggingface/ (config, tokenizer; model/huggingface/ with Megatron) beside the
  shards, which the merger reads (model_merger/base_model_merger.py:127).
- model_merger/base_model_merger.py:34 (parse_args): `merge --backend fsdp|megatron --local_dir DIR
  --target_dir DIR`, `--tie-word-embedding` for Megatron models whose output layer is the embedding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wizard.renderer.render import hf_subdir, merger_backend, sh_path

if TYPE_CHECKING:
    from wizard.planner.state import Plan
    from wizard.renderer.render import Artefact


def _merger_flags(plan: Plan) -> str:
    if plan.base_config != "megatron":
        return ""
    from wizard.planner.shapes import resolve_shape

    shape = resolve_shape(plan.answers.model, plan.answers.model_params_b)
    return " --tie-word-embedding" if shape is not None and shape.tied else ""


def export_context(plan: Plan) -> dict[str, Any]:
    return {
        "ckpt_dir_sh": sh_path(str(plan.facts["checkpoint_dir"])),
        "backend": merger_backend(plan),
        "merger_flags": _merger_flags(plan),
        "hf_subdir": hf_subdir(plan),
        "save_freq": plan.answers.save_freq,
    }


def artefacts(plan: Plan) -> list[Artefact]:
    from wizard.renderer.render import Artefact

    if plan.answers.save_freq <= 0:
        return []
    return [Artefact("export_hf.sh.j2", export_context(plan))]
