"""verl 0.9.1's offline entry points and trained-checkpoint model paths: VI699 and VI738 (main_generation_server),
VI708 (main_eval), VI737 (a verl checkpoint folder as the model path), VI852 under main_generation_server. Each
fault is planted and found, a valid control stays clean, and verl's own code is the oracle where it runs on CPU."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from wizard.check.lint import check

GEN = "python3 -m verl.trainer.main_generation_server"
GEN_ARGS = ["trainer.nnodes=1", "trainer.n_gpus_per_node=2", "data.prompt_key=prompt",
            "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "actor_rollout_ref.rollout.prompt_length=512", "actor_rollout_ref.rollout.response_length=512"]
R = "actor_rollout_ref.rollout"


def _run(tmp_path: Path, launch: str, args: list[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    target = tmp_path / "run.sh"
    target.write_text("#!/bin/bash\n" + launch + " " + " ".join(f"'{a}'" for a in args) + "\n", encoding="utf-8")
    report = check(str(target), defaults="verl", workdir=str(tmp_path))
    return [(f.problem.rule, f.problem.severity, f.problem.keys) for f in report.findings]


def _rules(found) -> set[str]:
    return {r for r, _, _ in found}


def _text_data(tmp_path: Path, images: bool = False) -> Path:
    import pandas as pd

    row = {"prompt": [[{"role": "user", "content": ("<image>" if images else "") + "What is 1+1?"}]],
           "data_source": ["openai/gsm8k"], "reward_model": [{"ground_truth": "2", "style": "rule"}]}
    if images:
        row["images"] = [[{"bytes": b"\x89PNG fake"}]]
    path = tmp_path / ("mm.parquet" if images else "text.parquet")
    pd.DataFrame(row).to_parquet(path)
    return path


def _generation_module(monkeypatch):
    """verl's main_generation_server, imported on CPU; its ChatCompletion import is the only optional dependency,
    stood in for (only where openai is missing) for this test alone."""
    if importlib.util.find_spec("openai") is None:
        chat = types.ModuleType("openai.types.chat")
        chat.ChatCompletion = object  # type: ignore[attr-defined]
        for name, mod in (("openai", types.ModuleType("openai")), ("openai.types", types.ModuleType("openai.types")),
                          ("openai.types.chat", chat)):
            monkeypatch.setitem(sys.modules, name, mod)
        monkeypatch.delitem(sys.modules, "verl.trainer.main_generation_server", raising=False)
    return importlib.import_module("verl.trainer.main_generation_server")


# ---- VI699: dummy weights in a generation-only run -------------------------------------------------------------
def test_vi699_default_dummy_weights_found_and_auto_clean(tmp_path):
    from verl.workers.config.rollout import RolloutConfig

    # the oracle: verl's own default is a dummy format, and the standalone server passes it to the engine as is
    assert "dummy" in RolloutConfig.__dataclass_fields__["load_format"].default
    import verl

    server = (Path(verl.__file__).parent / "workers/rollout/vllm_rollout/vllm_async_server.py").read_text()
    assert '"load_format": self.config.load_format' in server
    data = _text_data(tmp_path)
    args = [*GEN_ARGS, f"data.train_files={data}", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
            f"+data.output_path={tmp_path}/out.parquet"]
    assert ("VI699", "error", (f"{R}.load_format",)) in _run(tmp_path, GEN, args)
    assert "VI699" in _rules(_run(tmp_path, GEN, [*args, f"{R}.load_format=dummy_dtensor"]))
    assert "VI699" not in _rules(_run(tmp_path, GEN, [*args, f"{R}.load_format=auto"]))


def test_vi699_not_for_training(tmp_path):
    data = _text_data(tmp_path)
    found = _run(tmp_path, "python3 -m verl.trainer.main_ppo",
                 [f"data.train_files={data}", f"data.val_files={data}",
                  "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct"])
    assert "VI699" not in _rules(found)


# ---- VI738: images a generation-only run never sends ------------------------------------------------------------
def test_vi738_verls_requests_carry_no_images(monkeypatch):
    g = _generation_module(monkeypatch)
    seen: list[dict] = []

    async def capture(address, **request):
        seen.append(request)

    monkeypatch.setattr(g, "submit_request", capture)
    chat = np.array([[{"role": "user", "content": "<image>What is shown?"}]], dtype=object)
    asyncio.run(g.generate(["host:1"], "model", 1, {"temperature": 1.0}, chat))
    assert seen and set(seen[0]) == {"model", "messages", "temperature"}  # no image anywhere in the request


def test_vi738_image_rows_found_text_rows_clean(tmp_path):
    base = [*GEN_ARGS, f"{R}.load_format=auto", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
            f"+data.output_path={tmp_path}/out.parquet"]
    found = _run(tmp_path, GEN, [*base, f"data.train_files={_text_data(tmp_path, images=True)}"])
    assert ("VI738", "error", ("data.image_key", "data.prompt_key")) in found
    clean = _run(tmp_path, GEN, [*base, f"data.train_files={_text_data(tmp_path)}"])
    assert not [f for f in clean if f[1] in ("error", "warning")], clean


def test_vi738_vision_model_warned(tmp_path):
    found = _run(tmp_path, GEN, [*GEN_ARGS, f"{R}.load_format=auto", f"data.train_files={_text_data(tmp_path)}",
                                 "actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-3B-Instruct",
                                 f"+data.output_path={tmp_path}/out.parquet"])
    assert ("VI738", "warning", ("actor_rollout_ref.model.path",)) in found


# ---- VI852 under main_generation_server: greedy is fine with n=1 ------------------------------------------------
def test_vi852_generation_greedy(tmp_path):
    base = [*GEN_ARGS, f"{R}.load_format=auto", f"data.train_files={_text_data(tmp_path)}",
            "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", f"+data.output_path={tmp_path}/out.parquet",
            f"{R}.temperature=0"]
    assert "VI852" not in _rules(_run(tmp_path, GEN, [*base, f"{R}.n=1"]))
    assert ("VI852", "error", (f"{R}.temperature", f"{R}.n")) in _run(tmp_path, GEN, [*base, f"{R}.n=4"])
    import verl

    src = (Path(verl.__file__).parent / "trainer/main_generation_server.py").read_text()
    assert 'assert n_samples == 1, "When temperature=0, n_samples must be 1."' in src


# ---- VI708: main_eval's reward function ------------------------------------------------------------------------
EVAL = "python3 -m verl.trainer.main_eval"


def _eval_tree(overrides: list[str]):
    import verl
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer/config"), version_base=None):
        return compose("evaluation", overrides=overrides)


def test_vi708_verls_own_keys_fail_in_verl(tmp_path):
    from omegaconf.errors import ConfigAttributeError
    from verl.trainer.ppo.reward import get_custom_reward_fn

    fn = tmp_path / "score.py"
    fn.write_text("def reward_func(data_source, solution_str, ground_truth):\n    return 1.0\n")
    # the oracle: the keys evaluation.yaml holds make verl's own loader fail ...
    with pytest.raises(ConfigAttributeError):
        get_custom_reward_fn(_eval_tree([f"custom_reward_function.path={fn}", "custom_reward_function.name=reward_func"]))
    # ... with a reward node but no path, main_eval would call None ...
    assert get_custom_reward_fn(_eval_tree(["+reward.custom_reward_function.name=reward_func"])) is None
    # ... and the + keys give a function
    good = get_custom_reward_fn(_eval_tree([f"+reward.custom_reward_function.path={fn}",
                                            "+reward.custom_reward_function.name=reward_func"]))
    assert good("d", "s", "g") == 1.0
    bad = _run(tmp_path, EVAL, [f"data.path={tmp_path}/gen.parquet", f"custom_reward_function.path={fn}",
                                "custom_reward_function.name=reward_func"])
    assert ("VI708", "error", ("custom_reward_function.path", "reward.custom_reward_function.path")) in bad
    assert "VI708" in _rules(_run(tmp_path, EVAL, [f"data.path={tmp_path}/gen.parquet"]))
    ok = _run(tmp_path, EVAL, [f"data.path={tmp_path}/gen.parquet", f"+reward.custom_reward_function.path={fn}",
                               "+reward.custom_reward_function.name=reward_func"])
    assert not [f for f in ok if f[1] in ("error", "warning")], ok  # and no VI802 on the + keys main_eval reads


def test_vi708_fix_moves_the_keys(tmp_path):
    from wizard.check.report import fixed_overrides

    fn = tmp_path / "score.py"
    fn.write_text("def reward_func(data_source, solution_str, ground_truth):\n    return 1.0\n")
    target = tmp_path / "run.sh"
    args = [f"data.path={tmp_path}/gen.parquet", f"custom_reward_function.path={fn}",
            "custom_reward_function.name=reward_func"]
    target.write_text(f"#!/bin/bash\n{EVAL} " + " ".join(args) + "\n")
    before = check(str(target), defaults="verl", workdir=str(tmp_path))
    fixed, _ = fixed_overrides(before)
    assert f"+reward.custom_reward_function.path={fn}" in fixed
    target.write_text(f"#!/bin/bash\n{EVAL} " + " ".join(f"'{o}'" for o in fixed) + "\n")
    after = check(str(target), defaults="verl", workdir=str(tmp_path))
    assert not [f.problem.line() for f in after.findings if f.problem.severity in ("error", "warning")]


# ---- VI737: a verl checkpoint folder as the model path ----------------------------------------------------------
def _fsdp_checkpoint(root: Path, hf_weights: bool = False) -> Path:
    """The layout verl's FSDPCheckpointManager writes (utils/checkpoint/fsdp_checkpoint_manager.py)."""
    actor = root / "global_step_400" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for r in range(2):
        (actor / f"model_world_size_2_rank_{r}.pt").write_bytes(b"")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 2}))
    (actor / "huggingface" / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    if hf_weights:
        (actor / "huggingface" / "model.safetensors").write_bytes(b"")
    return actor


def test_vi737_table_is_verls():
    spec = importlib.util.spec_from_file_location("verl_ckpt_layout", ROOT / "scripts" / "verl_ckpt_layout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    assert mod.main(["--check"]) == 0


def test_vi737_checkpoint_folder_found_model_clean(tmp_path):
    from verl.workers.config import HFModelConfig

    actor = _fsdp_checkpoint(tmp_path / "ckpt")
    with pytest.raises((OSError, ValueError)):  # the oracle: verl's own model config cannot load it
        HFModelConfig(path=str(actor), load_tokenizer=False)
    data = _text_data(tmp_path)
    base = [*GEN_ARGS, f"{R}.load_format=auto", f"data.train_files={data}", f"+data.output_path={tmp_path}/o.parquet"]
    for path in (actor, actor.parent):  # the actor folder, and the global_step folder above it
        found = _run(tmp_path, GEN, [*base, f"actor_rollout_ref.model.path={path}"])
        assert ("VI737", "error", ("actor_rollout_ref.model.path",)) in found, found
    ppo = _run(tmp_path, "python3 -m verl.trainer.main_ppo",
               [f"data.train_files={data}", f"data.val_files={data}", f"actor_rollout_ref.model.path={actor}"])
    assert "VI737" in _rules(ppo)
    model = tmp_path / "merged"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    assert "VI737" not in _rules(_run(tmp_path, GEN, [*base, f"actor_rollout_ref.model.path={model}"]))


def test_vi737_fix_points_at_saved_hf_weights(tmp_path):
    from wizard.check.report import fixed_overrides

    actor = _fsdp_checkpoint(tmp_path / "ckpt", hf_weights=True)
    target = tmp_path / "run.sh"
    args = [*GEN_ARGS, f"{R}.load_format=auto", f"data.train_files={_text_data(tmp_path)}",
            f"+data.output_path={tmp_path}/o.parquet", f"actor_rollout_ref.model.path={actor}"]
    target.write_text(f"#!/bin/bash\n{GEN} " + " ".join(f"'{a}'" for a in args) + "\n")
    before = check(str(target), defaults="verl", workdir=str(tmp_path))
    fixed, _ = fixed_overrides(before)
    assert f"actor_rollout_ref.model.path={actor / 'huggingface'}" in fixed
    target.write_text(f"#!/bin/bash\n{GEN} " + " ".join(f"'{o}'" for o in fixed) + "\n")
    after = check(str(target), defaults="verl", workdir=str(tmp_path))
    assert "VI737" not in {f.problem.rule for f in after.findings}
