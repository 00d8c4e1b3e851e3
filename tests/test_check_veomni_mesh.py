"""VI646 / VI654: the VeOmni engine's mesh and its Ulysses sequence parallel (wizard/check/rules/veomni_mesh.py),
each fault planted in a tiny launch beside a valid control, and held to verl's own code.

verl's VeOmniEngine imports the veomni package at module level, which this machine lacks, so the mesh lines of its
__init__ (workers/engine/veomni/transformer_impl.py:151-165) are taken from verl's installed source with ast and run as
they are with a stand-in world size (VI646). verl's actor config classes import cleanly: FSDPActorConfig.validate
refuses Ulysses without remove-padding and VeOmniActorConfig accepts it (VI654).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from wizard.check.lint import check
from wizard.check.rules.veomni_mesh import veomni_mesh

M, A = "actor_rollout_ref.model", "actor_rollout_ref.actor"


def _verl(rel: str) -> Path:
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0]) / rel


def _verl_mesh():
    """verl's VeOmniEngine.__init__ mesh lines (fsdp_size .. the if/else that picks replicate × shard), run alone."""
    tree = ast.parse(_verl("workers/engine/veomni/transformer_impl.py").read_text(encoding="utf-8"))
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "VeOmniEngine")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    start = next(i for i, s in enumerate(init.body) if "fsdp_size = self.engine_config.fsdp_size" in ast.unparse(s))
    end = next(i for i, s in enumerate(init.body) if isinstance(s, ast.If) and "fsdp_size < 0" in ast.unparse(s.test))
    body = init.body[start:end + 1]
    fn = ast.parse("def mesh(self, dist):\n    pass").body[0]
    fn.body = body + [ast.parse("return data_parallel_replicate_size, data_parallel_shard_size, dp_size").body[0]]
    ns: dict = {}
    exec(compile(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])), "veomni_mesh", "exec"), ns)  # noqa: S102

    def run(world: int, ulysses: int, fsdp_size: int):
        self = SimpleNamespace(engine_config=SimpleNamespace(fsdp_size=fsdp_size, ulysses_parallel_size=ulysses))
        return ns["mesh"](self, SimpleNamespace(get_world_size=lambda: world))

    return run


@pytest.mark.parametrize("world", [4, 8, 16, 24, 32])
@pytest.mark.parametrize("ulysses", [1, 2, 4])
@pytest.mark.parametrize("fsdp_size", [-1, 1, 2, 3, 4, 6, 8, 16, 64])
def test_vi646_matches_verls_mesh(world, ulysses, fsdp_size):
    if world % ulysses:
        return
    verl = _verl_mesh()
    ours = veomni_mesh(world, ulysses, fsdp_size, 1)
    try:
        replicate, shard, dp = verl(world, ulysses, fsdp_size)
    except ValueError as e:
        assert "divisible by fsdp_size" in str(e)
        assert ours is not None and ours[0] == "fsdp"
        return
    assert ours is None and replicate * shard == dp
    # VeOmni puts the expert mesh inside the shard group: an EP the shard size does not divide is flagged
    assert veomni_mesh(world, ulysses, fsdp_size, shard * 2) == ("ep", shard)
    assert veomni_mesh(world, ulysses, fsdp_size, shard) is None


def _script(tmp_path: Path, extra: str) -> Path:
    data = tmp_path / "train.parquet"
    data.write_bytes(b"PAR1")
    text = ("#!/usr/bin/env bash\npython3 -m verl.trainer.main_ppo model_engine=veomni \\\n"
            f"    algorithm.adv_estimator=grpo data.train_files={data} data.val_files={data} \\\n"
            f"    data.train_batch_size=64 {M}.path=Qwen/Qwen2.5-1.5B-Instruct actor_rollout_ref.rollout.name=vllm \\\n"
            f"    {A}.ppo_mini_batch_size=32 {A}.ppo_micro_batch_size_per_gpu=2 \\\n"
            "    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 actor_rollout_ref.rollout.n=2 \\\n"
            f"    {extra} trainer.n_gpus_per_node=8 trainer.nnodes=2 trainer.logger=console\n")
    path = tmp_path / "run.sh"
    path.write_text(text, encoding="utf-8")
    return path


def _hits(path: Path, rule: str):
    return [f.problem for f in check(str(path)).findings if f.problem.rule == rule]


@pytest.mark.parametrize("extra, word", [
    (f"{A}.veomni.fsdp_size=3", "ValueError"),                                     # 16 GPUs: dp 16, 3 does not divide
    (f"{A}.veomni.ulysses_parallel_size=2 {A}.veomni.fsdp_size=3", "ValueError"),  # dp 8
    (f"{A}.veomni.ulysses_parallel_size=3", "does not divide the 16 GPUs"),
    (f"{A}.veomni.fsdp_size=8 {A}.veomni.expert_parallel_size=16", "expert mesh"),  # the VeOmni PR#867 shape
])
def test_vi646_fault(tmp_path, extra, word):
    (hit,) = _hits(_script(tmp_path, extra), "VI646")
    assert hit.severity == "error" and word in hit.message


@pytest.mark.parametrize("extra", [
    "", f"{A}.veomni.fsdp_size=-1 {A}.veomni.expert_parallel_size=8",  # verl's examples: all GPUs shard, EP 8
    f"{A}.veomni.ulysses_parallel_size=2 {A}.veomni.fsdp_size=4 {A}.veomni.expert_parallel_size=4",
])
def test_vi646_controls(tmp_path, extra):
    assert not _hits(_script(tmp_path, extra), "VI646")


def test_vi646_critic_when_verl_builds_one(tmp_path):
    bad = "critic.veomni.fsdp_size=3"
    (hit,) = _hits(_script(tmp_path, f"algorithm.adv_estimator=gae critic.model.path=Qwen/Qwen2.5-1.5B-Instruct "
                                     f"critic.ppo_micro_batch_size_per_gpu=2 {bad}"), "VI646")
    assert "critic.veomni.fsdp_size" in hit.keys
    assert not _hits(_script(tmp_path, bad), "VI646")  # GRPO builds no critic


def test_vi654_verl_refuses_it_for_fsdp_and_takes_it_for_veomni():
    from verl.workers.config.actor import FSDPActorConfig, VeOmniActorConfig
    from verl.workers.config.engine import FSDPEngineConfig, VeOmniEngineConfig

    fsdp = FSDPActorConfig(strategy="fsdp", rollout_n=2, ppo_mini_batch_size=8, ppo_micro_batch_size_per_gpu=1,
                           ulysses_sequence_parallel_size=4, fsdp_config=FSDPEngineConfig(strategy="fsdp"))
    with pytest.raises(ValueError, match="use_remove_padding"):
        fsdp.validate(n_gpus=8, train_batch_size=64, model_config={"use_remove_padding": False})
    veomni = VeOmniActorConfig(rollout_n=2, ppo_mini_batch_size=8, ppo_micro_batch_size_per_gpu=1, use_remove_padding=False,
                               veomni=VeOmniEngineConfig(ulysses_parallel_size=4))
    veomni.validate(n_gpus=8, train_batch_size=64, model_config={"use_remove_padding": False})  # no error
    # the engine slices position_ids for SP only under use_remove_padding
    src = _verl("workers/engine/veomni/transformer_impl.py").read_text(encoding="utf-8")
    assert "if use_remove_padding and model_inputs.get(\"position_ids\", None) is not None:" in src


def test_vi654_fault_and_controls(tmp_path):
    sp = f"{A}.veomni.ulysses_parallel_size=4"
    (hit,) = _hits(_script(tmp_path, f"{sp} {M}.use_remove_padding=False"), "VI654")
    assert hit.severity == "warning" and f"{M}.use_remove_padding=True" in hit.hint
    assert not _hits(_script(tmp_path, sp), "VI654")  # hf_model.yaml's default: remove-padding on
    assert not _hits(_script(tmp_path, f"{M}.use_remove_padding=False"), "VI654")  # no SP
