"""`verl-init smoke BUNDLE --engine verl-workers`: verl 0.9.1's own engine workers, measured per phase.

The command-line contract (one line, non-zero exit, nothing run) and the report's arithmetic (ranks merged, measured
÷ plan) are checked here without a run; the end-to-end runs drive verl's engine workers on the CPU (`--device cpu`,
gloo) through the same child process a GPU machine runs, with a tiny random Qwen2, and assert on what only verl's
code produces (its metrics dicts: perf/cpu_memory_used_gb, grad_norm, critic/vf_loss; its assertion message for a
token budget below one sequence). GPU memory itself cannot be measured on this machine: the CUDA branch of the
merge is checked on rank files written as the child writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import wizard
from wizard.cli.app import main
from wizard.intent.answers import make_answers
from wizard.smoketest import engine_workers
from wizard.smoketest.workers_report import CPU_NOTE, format_text, merge

BASE = dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=16, gpu_type="cpu", model="./tiny-model", model_params_b=0.001,
            dataset="gsm8k", max_prompt_length=128, max_response_length=64, prompts_per_step=8,
            samples_per_prompt=4, updates_per_step=2, total_steps=1, save_freq=-1, test_freq=-1)


def bundle(tmp_path: Path, name: str = "b", **changes) -> Path:
    plan = wizard.plan(make_answers({**BASE, **changes}), base_dir=str(tmp_path))
    return wizard.write_bundle(wizard.render(plan), tmp_path / name)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from wizard.smoketest.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-weights"), weights=True)


def one_line_error(capsys, args: list[str], rule: str) -> str:
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"[{rule}]" in lines[0], err
    return lines[0]


# -- the command line: bad input is one line, nothing runs -------------------------------------------------------------


@pytest.mark.verl
def test_no_gpu_without_device_cpu_is_one_line(tmp_path, capsys, monkeypatch):
    b = bundle(tmp_path)
    monkeypatch.setattr(engine_workers, "_gpus", lambda: [])
    monkeypatch.setattr(engine_workers, "_launch", lambda *a, **k: pytest.fail("nothing may run"))
    line = one_line_error(capsys, ["smoke", str(b), "--engine", "verl-workers"], "VI966")
    assert "--device cpu" in line
    one_line_error(capsys, ["smoke", str(b), "--engine", "verl-workers", "--device", "cuda"], "VI966")


@pytest.mark.verl
def test_megatron_bundle_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    plan = wizard.plan(wizard.load_profile("megatron-64gpu"), base_dir=str(tmp_path))
    b = wizard.write_bundle(wizard.render(plan), tmp_path / "m")
    monkeypatch.setattr(engine_workers, "_launch", lambda *a, **k: pytest.fail("nothing may run"))
    line = one_line_error(capsys, ["smoke", str(b), "--engine", "verl-workers", "--device", "cpu"], "VI967")
    assert "megatron" in line and "Megatron is not supported yet" in line and "--engine verl" in line


@pytest.mark.verl
def test_options_that_do_not_apply_are_one_line(tmp_path, capsys, monkeypatch):
    b = bundle(tmp_path)
    monkeypatch.setattr(engine_workers, "_launch", lambda *a, **k: pytest.fail("nothing may run"))
    base = ["smoke", str(b), "--engine", "verl-workers", "--device", "cpu"]
    assert "--prompts" in one_line_error(capsys, base + ["--prompts", "4"], "VI968")
    assert "--device" in one_line_error(capsys, ["smoke", str(b), "--engine", "verl-workers", "--device", "tpu"], "VI968")
    assert "config.json" in one_line_error(capsys, base + ["--model-dir", str(tmp_path)], "VI968")
    one_line_error(capsys, base + ["--steps", "0"], "VI968")
    one_line_error(capsys, base + ["--nproc", "0"], "VI968")
    monkeypatch.setattr(engine_workers, "_gpus", lambda: ["0", "1"])
    assert "2 GPU(s)" in one_line_error(capsys, ["smoke", str(b), "--engine", "verl-workers", "--nproc", "3"], "VI968")
    one_line_error(capsys, ["smoke", str(tmp_path), "--engine", "verl-workers", "--device", "cpu"], "VI960")


@pytest.mark.verl
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_measured_batch_keeps_the_bundles_micro_batches(tmp_path):
    from wizard.verify.harness import compose_bundle

    cfg = compose_bundle(bundle(tmp_path, "fixed", dynamic_batch=False, micro_batch_per_gpu=4,
                                    samples_per_prompt=3))
    b = engine_workers.measured_batch(cfg, world=2, critic=False)
    micro = b["micro_batch_sequences"]
    assert micro["update_actor"] == 4 == cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu
    k = b["sequences_per_rank"]
    assert k % 4 == 0 and k >= 2 * 4 and k >= micro["old_log_prob"] and (k * 2) % 3 == 0  # n = 3
    assert b["prompts"] * b["n"] == k * 2 and k % micro["old_log_prob"] == 0 and k % micro["ref_log_prob"] == 0
    from wizard.verlspec.arithmetic import workers_smoke_sequences

    # whole micro-batches of every fixed size (verl's engine/utils.py:123), two update micro-batches, whole groups of n
    assert workers_smoke_sequences([4], [10], 1, 1, whole=[4, 10]) == 20
    assert workers_smoke_sequences([5], [10], 1, 4) == 12 and workers_smoke_sequences([2], [1], 3, 4, whole=[2]) == 4
    cfg = compose_bundle(bundle(tmp_path, "dyn"))  # token budgets: ⌊budget / full-length sequence⌋ sequences
    b = engine_workers.measured_batch(cfg, world=1, critic=False)
    assert b["micro_batch_sequences"]["update_actor"] == cfg.actor_rollout_ref.actor.ppo_max_token_len_per_gpu // (128 + 64)


# -- the report's arithmetic (the CUDA branch, on rank files as the child writes them) ---------------------------------


def rank_file(work: Path, rank: int, peaks: dict[str, tuple[float, float]], status: str = "ok", **extra) -> None:
    phases = {p: {"max_memory_allocated_gb": a, "max_memory_reserved_gb": r, "seconds": 1.0, "verl": {"loss": 1.0}}
              for p, (a, r) in peaks.items()}
    rec = {"rank": rank, "status": status, "phase": "done" if status == "ok" else "update_actor", "use_ref": True,
           "use_critic": False, "shims": [], "steps": [{"step": 1, "phases": {}}, {"step": 2, "phases": phases}], **extra}
    (work / f"rank{rank}.json").write_text(json.dumps(rec))


def test_merge_takes_the_largest_rank_and_divides_by_the_plan(tmp_path):
    rank_file(tmp_path, 0, {"old_log_prob": (7.0, 14.0), "ref_log_prob": (3.0, 14.0), "update_actor": (12.0, 15.0)})
    rank_file(tmp_path, 1, {"old_log_prob": (8.0, 13.0), "ref_log_prob": (3.5, 14.5), "update_actor": (11.0, 16.0)})
    predicted = {"old_log_prob": {"max_memory_allocated_gb": 10.0, "max_memory_reserved_gb": 20.0},
                 "update_actor": {"max_memory_allocated_gb": 12.0, "max_memory_reserved_gb": 12.8}}
    rep = engine_workers.WorkersReport(bundle="b", device="cuda", world_size=2, bundle_gpus=2)
    merge(rep, tmp_path, [0, 0], False, predicted, SimpleNamespace(steps=2, timeout=9.0, model_dir=None))
    by = {p["name"]: p for p in rep.phases}
    assert rep.ok and list(by) == ["old_log_prob", "ref_log_prob", "update_actor"]
    assert by["old_log_prob"]["measured"] == {"max_memory_allocated_gb": 8.0, "max_memory_reserved_gb": 14.0}
    assert by["old_log_prob"]["ratio"] == {"allocated": 0.8, "reserved": 0.7}
    assert by["update_actor"]["ratio"] == {"allocated": 1.0, "reserved": 1.25}
    assert by["ref_log_prob"]["predicted"] is None and by["ref_log_prob"]["ratio"] == {"allocated": None, "reserved": None}
    text = format_text(rep)
    assert "8.00 / 14.00" in text and "0.8 / 0.7" in text and CPU_NOTE not in text


def test_merge_reports_the_failing_rank_phase_and_verl_line(tmp_path):
    rank_file(tmp_path, 0, {"old_log_prob": (7.0, 14.0)}, status="oom", error="OutOfMemoryError: CUDA out of memory",
              traceback='File "/x/site-packages/verl/workers/engine/fsdp/transformer_impl.py", line 700, in f\n',
              at_error={"max_memory_allocated_gb": 136.7, "max_memory_reserved_gb": 138.0})
    rep = engine_workers.WorkersReport(bundle="b", device="cuda", world_size=1, bundle_gpus=1)
    merge(rep, tmp_path, [1], False, {}, SimpleNamespace(steps=2, timeout=9.0, model_dir=None))
    assert not rep.ok and rep.failure["phase"] == "update_actor" and rep.failure["rule"] == "VI969"
    assert "verl/workers/engine/fsdp/transformer_impl.py:700" in rep.failure["message"]
    assert "out of memory" in rep.failure["hint"] and "136.70 / 138.00" in rep.failure["message"]
    empty = tmp_path / "empty"
    empty.mkdir()
    rep = engine_workers.WorkersReport(bundle="b", device="cuda", world_size=2, bundle_gpus=2)
    merge(rep, empty, [0, -9], True, {}, SimpleNamespace(steps=2, timeout=9.0, model_dir=None))
    assert rep.status == "timeout" and "--timeout 9" in rep.failure["message"]


# -- end to end on the CPU: verl's engine workers, the same child a GPU machine runs -----------------------------------


@pytest.mark.verl
@pytest.mark.slow
def test_grpo_bundle_runs_verls_workers_end_to_end(tmp_path, model_dir, capsys):
    b = bundle(tmp_path)
    rc = main(["smoke", str(b), "--engine", "verl-workers", "--device", "cpu", "--model-dir", str(model_dir), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["ok"] and out["engine"] == "verl-workers" and out["device"] == "cpu", out.get("failure")
    by = {p["name"]: p for p in out["phases"]}
    assert list(by) == ["old_log_prob", "ref_log_prob", "update_actor"]
    for ph in by.values():  # verl's own metrics dicts, returned by its workers
        assert ph["status"] == "ok" and ph["step"] == 2 and ph["measured_note"] == CPU_NOTE
        assert "perf/cpu_memory_used_gb" in ph["verl"] and "perf/max_memory_allocated_gb" in ph["verl"]
    assert {"grad_norm", "actor/pg_loss", "lr"} <= set(by["update_actor"]["verl"])
    # beside the plan's own verl_metrics for the same pass (plan --json's memory.verl_metrics[phase].passes)
    plan = wizard.plan(make_answers(BASE), base_dir=str(tmp_path))
    passes = {k: v for ph in plan.memory.verl_metrics.values() for k, v in ph["passes"].items()}
    assert by["update_actor"]["predicted"] == passes["update_actor"]
    assert out["batch"]["micro_batch_sequences"]["update_actor"] == 1024 // 192


@pytest.mark.verl
@pytest.mark.slow
def test_gae_bundle_runs_the_critics_phases_on_two_ranks(tmp_path, model_dir, capsys):
    """Two processes (gloo): verl's FSDP shards over them, each rank takes its share of the batch."""
    b = bundle(tmp_path, algorithm="ppo", dynamic_batch=False, micro_batch_per_gpu=2, gpus_per_node=2)
    rc = main(["smoke", str(b), "--engine", "verl-workers", "--device", "cpu", "--model-dir", str(model_dir),
               "--steps", "1", "--nproc", "2"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "on 2 × cpu" in text
    rows = {line.split()[0]: line for line in text.splitlines() if line.split()[:1]}
    for phase in ("old_log_prob", "values", "update_critic", "update_actor"):
        assert CPU_NOTE in rows[phase], text
    assert "grad_norm=" in rows["update_critic"]


@pytest.mark.verl
@pytest.mark.slow
def test_a_token_budget_verl_rejects_fails_that_phase_with_verls_message(tmp_path, model_dir, capsys):
    b = bundle(tmp_path)
    path = b / "verl_config.yaml"
    text = path.read_text()
    rollout = text.index("  rollout:\n")
    at = text.index("log_prob_max_token_len_per_gpu:", rollout)
    end = text.index("\n", at)
    path.write_text(text[:at] + "log_prob_max_token_len_per_gpu: 100" + text[end:])  # < 128 + 64: one sequence
    rc = main(["smoke", str(b), "--engine", "verl-workers", "--device", "cpu", "--model-dir", str(model_dir), "--json",
               "--steps", "1"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and not out["ok"]
    f = out["failure"]
    assert f["phase"] == "old_log_prob" and f["rule"] == "VI969"
    assert "max_token_len must be greater than the sequence length" in f["message"]
    assert "verl/utils/seqlen_balancing.py" in f["message"]
    by = {p["name"]: p["status"] for p in out["phases"]}
    assert by == {"old_log_prob": "failed", "ref_log_prob": "not reached", "update_actor": "not reached"}
