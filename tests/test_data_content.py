"""Issue 27 item 3: what a prompt says, checked by validate-dataset (VI543-VI545 with VI523/VI526) and by `check`
on the data files it reaches (VI878). Each fault is planted in otherwise verl-format rows; the clean rows pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wizard.env.datasets import Options, validate

CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+3?"}]


def row(i: int = 0, prompt=None, gt="5", ds="openai/gsm8k") -> dict:
    return {"data_source": ds, "prompt": CHAT if prompt is None else prompt, "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": gt}, "extra_info": {"split": "train", "index": i}}


FAULTS = {
    # a chat column read as question text: prepare_data.py's question_field=prompt on main
    "VI543": dict(prompt=[{"role": "user", "content": json.dumps(CHAT)}]),
    "VI544": dict(prompt=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  \n "}]),
    "VI545": dict(prompt=[{"role": "user", "content": "What is 2+3?"}, {"role": "system", "content": "Be brief."}]),
    "VI523": dict(gt=" "),
    "VI526": dict(ds="my_private_data"),
}


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def ids(path: Path) -> set[str]:
    return {f.rule for f in validate([str(path)], Options()).findings if f.severity == "error"}


def test_clean_rows_pass(tmp_path):
    assert not ids(write(tmp_path / "ok.jsonl", [row(i) for i in range(3)]))


@pytest.mark.parametrize("rule", sorted(FAULTS))
def test_validate_dataset_refuses_each_planted_fault(tmp_path, rule):
    path = write(tmp_path / "bad.jsonl", [row(0), row(1, **FAULTS[rule]), row(2)])
    found = validate([str(path)], Options()).findings
    hits = [f for f in found if f.rule == rule and f.severity == "error"]
    assert hits, [(f.rule, f.message) for f in found]
    assert hits[0].examples[0][0] == 1  # the planted row


def test_json_chat_in_content_is_named_with_its_fix(tmp_path):
    path = write(tmp_path / "bad.jsonl", [row(0, prompt=[{"role": "user", "content": json.dumps(CHAT)}])])
    (hit,) = [f for f in validate([str(path)], Options()).findings if f.rule == "VI543"]
    assert "messages_field" in hit.hint and "2-message chat (system, user)" in hit.examples[0][1]


def test_cli_prints_one_error_line_per_fault(tmp_path, capsys):
    from wizard.env.datasets import main

    path = write(tmp_path / "bad.jsonl", [row(0, **FAULTS["VI543"])])
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    assert len([ln for ln in out.splitlines() if ln.startswith("error VI543")]) == 1


# --- check: the data files it can reach ---------------------------------------------------------------

def _check(train: Path, val: Path, *extra: str):
    from wizard.check.lint import check

    overrides = [
        "algorithm.adv_estimator=grpo", f"data.train_files={train}", f"data.val_files={val}",
        "data.train_batch_size=2", "data.max_prompt_length=512", "data.max_response_length=512",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1", "trainer.nnodes=1", "trainer.n_gpus_per_node=1",
        *extra]
    return check(None, overrides, defaults="snapshot", env={"HOME": "/nonexistent-home"}, nnodes=1, gpus_per_node=1,
                 gpu_memory_gb=80)


def _parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("rule", sorted(FAULTS))
def test_check_flags_each_planted_fault_in_a_reachable_file(tmp_path, rule):
    good = _parquet(tmp_path / "val.parquet", [row(i) for i in range(4)])
    bad = _parquet(tmp_path / "train.parquet", [row(0), row(1, **FAULTS[rule]), row(2), row(3)])
    report = _check(bad, good)
    hits = [f.problem for f in report.findings if f.problem.rule == "VI878"]
    assert len(hits) == 1 and "row 1" in hits[0].message and hits[0].severity == "error", hits
    assert f"[{rule}]" in hits[0].hint
    assert "VI878" not in {f.problem.rule for f in _check(good, good).findings}


def test_check_accepts_any_data_source_with_a_custom_reward_function(tmp_path):
    fn = tmp_path / "r.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    rows = [row(i, ds="my_private_data") for i in range(4)]
    train = _parquet(tmp_path / "train.parquet", rows)
    report = _check(train, train, f"reward.custom_reward_function.path={fn}")
    assert "VI878" not in {f.problem.rule for f in report.findings}


def test_show_prints_the_templated_prompt_and_ground_truth(tmp_path, capsys, tiny_model):
    from transformers import AutoTokenizer

    from wizard.env.datasets import main

    path = write(tmp_path / "ok.jsonl", [row(i, gt=str(10 + i)) for i in range(3)])
    assert main([str(path), "--show", "2", "--tokenizer", str(tiny_model)]) == 0
    out = capsys.readouterr().out
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    assert tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False).strip() in out
    assert "ground truth the scorer gets: '10'" in out and "'11'" in out and "'12'" not in out
    assert main([str(path), "--show", "1"]) == 0
    assert "<system> You are terse." in capsys.readouterr().out


@pytest.mark.verl
@pytest.mark.slow
def test_a_garbled_verl_format_file_fails_the_smoke_with_one_line(tmp_path):
    """The issue's case: question_field=prompt on a chat column wrote the JSON of the whole chat into one user
    message. The CPU smoke stops in its data phase naming VI543."""
    import wizard
    from wizard.intent.answers import make_answers
    from wizard.smoketest.run import SmokeOptions

    garbled = [row(i, prompt=[{"role": "user", "content": json.dumps(CHAT)}]) for i in range(16)]
    train = _parquet(tmp_path / "train.parquet", garbled)
    val = _parquet(tmp_path / "val.parquet", garbled[:4])
    answers = make_answers(dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=24, gpu_type="cpu",
                                model="Qwen/Qwen2.5-0.5B-Instruct", prompts_per_step=2, samples_per_prompt=2,
                                updates_per_step=1, train_files=str(train), val_files=str(val)))
    bundle = wizard.write_bundle(wizard.render(wizard.plan(answers, base_dir=str(tmp_path))), tmp_path / "b")
    report = wizard.smoke(bundle, options=SmokeOptions(engine="cpu"))
    assert report.failure is not None and report.failure.phase == "data", report.failure
    assert "[VI543]" in report.failure.message and "\n" not in report.failure.message


def test_check_names_each_kind_of_problem_at_its_first_row(tmp_path):
    """A raw Hugging Face file (real case verl#758: text prompts, no reward_model): both problems, each once, at the
    first row that has it; the same kind again in a later row is not repeated."""
    rows = [row(0), row(1, prompt="What is 2+3?"), row(2, gt=" "), row(3, prompt="What is 4+4?", gt=" ")]
    bad = write(tmp_path / "train.jsonl", rows)  # (a parquet column cannot mix text and chat prompts)
    good = _parquet(tmp_path / "val.parquet", [row(0)])
    hits = [f.problem for f in _check(bad, good).findings if f.problem.rule == "VI878"]
    assert sorted((h.message.split(": ", 1)[0], h.hint.split("[")[1][:5]) for h in hits) == [
        (f"{bad} row 1", "VI522"), (f"{bad} row 2", "VI523")], [h.line() for h in hits]


def _scored_by(enable: bool, custom: bool) -> str:
    """Which path verl 0.9.1's reward loop takes for one sample: its own RewardLoopWorker.compute_score run with a
    stand-in self (the reward manager and the reward model's request recorded, nothing served)."""
    import asyncio
    import types

    from omegaconf import OmegaConf

    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    seen = []

    async def manager(data):
        seen.append("scorer")
        return {}

    async def disrm(data):
        seen.append("reward model")
        return {}

    me = types.SimpleNamespace(
        config=OmegaConf.create({"reward": {"custom_reward_function": {"path": "r.py" if custom else None},
                                            "reward_model": {"enable": enable}}}),
        reward_manager=types.SimpleNamespace(run_single=manager), compute_score_disrm=disrm)
    asyncio.run(RewardLoopWorker.compute_score(me, [None]))
    return seen[0]


@pytest.mark.verl
def test_rows_scored_by_a_reward_model_need_no_scorer_or_ground_truth(tmp_path):
    """A discriminative reward model without a custom function scores every sample (verl never calls the default
    scorer, so a row's data_source and ground truth are not read for the reward): VI878 says nothing about them then
    (real case R30-05: a false VI878 on a reward-model run). The fault planted: the same rows without the reward model,
    and with it beside a custom function, are flagged."""
    assert _scored_by(enable=True, custom=False) == "reward model"
    assert _scored_by(enable=False, custom=False) == "scorer"
    assert _scored_by(enable=True, custom=True) == "scorer"

    rows = [row(i, gt=" ", ds="my_private_data") for i in range(4)]
    data = _parquet(tmp_path / "train.parquet", rows)
    rm = ("reward.reward_model.enable=True", "reward.reward_model.model_path=Skywork/Skywork-Reward-V2-Llama-3.1-8B")

    def vi878(*extra):
        return {f.problem.message.split(": ", 1)[1][:40] for f in _check(data, data, *extra).findings
                if f.problem.rule == "VI878"}

    assert any("data_source" in m for m in vi878()) and any("ground_truth" in m for m in vi878())
    assert not vi878(*rm)
    assert any("ground_truth" in m for m in vi878(*rm, f"reward.custom_reward_function.path={tmp_path / 'r.py'}"))
