"""`verl-init smoke`: geometry scaling, the tiny model, the report, and the `verl` engine.

The verl engine needs a GPU machine; here its command line is checked by verl's own Hydra tree and
validation code (the real oracle), and its run, output capture, step-1 metric parsing and failure
phase reporting by a stand-in for `python3 -m verl.trainer.main_ppo` that prints what main_ppo prints.
The cpu engine's end-to-end runs (Ray) are in test_smoke_cpu.py.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

import wizard
from conftest import ROOT, run_cli
from wizard.intent.answers import make_answers
from wizard.intent.errors import UserError, WizardError
from wizard.smoketest.geometry import geometry_from_config, scale_geometry
from wizard.smoketest.report import format_report
from wizard.smoketest.run import SmokeOptions
from wizard.smoketest.verl import error_message, failing_phase, parse_metrics, parse_value

DATA = ROOT / "tests" / "data"
SMOKE_BASE = dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=16, gpu_type="cpu", model="./tiny-model", model_params_b=0.001,
                  dataset="gsm8k", max_prompt_length=128, max_response_length=64, prompts_per_step=8,
                  samples_per_prompt=4, updates_per_step=2, total_steps=1, save_freq=-1, test_freq=-1)
PROFILES = ("cpu-smoke", "single-gpu", "single-node-8gpu", "ppo-16gpu", "dapo-32gpu", "cluster-8gpu", "amd-mi300x-kuberay",
            "ascend-910b")


def bundle_of(tmp_path: Path, name: str = "b", profile: str | None = None, **changes) -> Path:
    answers = wizard.load_profile(profile) if profile else make_answers({**SMOKE_BASE, **changes})
    if profile and changes:
        answers = make_answers({**answers.model_dump(exclude_unset=True), **changes})
    plan = wizard.plan(answers, base_dir=str(tmp_path))
    return wizard.write_bundle(wizard.render(plan), tmp_path / name)


def compose(bundle: Path, overrides: list[str] = ()):  # type: ignore[assignment]
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(bundle.resolve()), version_base=None):
        return hydra_compose("verl_config", overrides=list(overrides))


# ---------------------------------------------------------------------------------------------
# geometry


@pytest.mark.verl
def test_cpu_smoke_geometry_is_the_plan_itself(tmp_path):
    b = bundle_of(tmp_path, profile="cpu-smoke")
    g = geometry_from_config(compose(b))
    assert (g.prompts, g.n, g.mini, g.updates, g.dp, g.dynamic) == (8, 4, 4, 2, 1, True)
    assert g.problems() == []
    sg = scale_geometry(g)
    assert (sg.prompts, sg.n, sg.updates, sg.mini, sg.samples, sg.dp) == (8, 4, 2, 4, 32, 1)
    assert sg.seqs_per_budget == 1024 // 192


@pytest.mark.verl
def test_scaled_geometry_keeps_n_updates_and_micro_batches(tmp_path):
    b = bundle_of(tmp_path, gpus_per_node=4, dynamic_batch=False, micro_batch_per_gpu=2, prompts_per_step=32,
                  samples_per_prompt=4, updates_per_step=4)
    g = geometry_from_config(compose(b))
    assert (g.dp, g.per_rank, g.micro, g.micro_batches) == (4, 8, 2, 4)
    sg = scale_geometry(g)
    assert sg.n == g.n and sg.updates == g.updates and sg.micro_batches == g.micro_batches
    assert sg.dp == g.dp == 4 and sg.samples_per_update % sg.dp == 0  # the bundle's own data-parallel size
    assert sg.per_rank == sg.micro * sg.micro_batches
    assert sg.prompts % sg.unit == 0 and sg.prompts < g.prompts
    # verl's full-scale rules on the bundle's own dp
    sv = scale_geometry(g, dp=g.dp, verl_rules=True)
    assert (sv.prompts * sv.n) % g.n_gpus == 0 and sv.per_rank % sv.micro == 0


def test_smoke_dp_and_log_prob_micro_batches_keep_the_bundles_divisibility():
    from wizard.verlspec.arithmetic import scaled_micro, smoke_dp

    assert [smoke_dp(d) for d in (1, 2, 6, 8, 10, 12, 16, 64)] == [1, 2, 6, 8, 5, 6, 8, 8]
    assert scaled_micro(16, 4, 64) == (4, "the bundle's size")
    assert scaled_micro(32, 48, 96) == (16, "the bundle's 2 micro-batch(es) per rank")
    assert scaled_micro(6, 4, 64)[0] == 3  # neither divides: the largest size ≤ 4 that divides 6


@pytest.mark.verl
def test_scaled_geometry_of_a_large_bundle(tmp_path):
    """dp 16 (2 nodes × 8): the smoke emulates 8 ranks; log-prob passes keep the bundle's log-prob micro size."""
    b = bundle_of(tmp_path, nnodes=2, gpus_per_node=8, cluster="ray", dynamic_batch=False, micro_batch_per_gpu=2,
                  prompts_per_step=64, samples_per_prompt=4, updates_per_step=2)
    # the planner ranks log-prob micro-batches by step time (wizard.planner.layouts); pin 4 to test the scaling
    pin = ["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
           "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"]
    g = geometry_from_config(compose(b, pin))
    assert g.dp == 16 and g.logprob_micro and g.lora_rank == 0
    sg = scale_geometry(g)
    assert (sg.dp, sg.bundle_dp) == (8, 16) and sg.micro_batches == g.micro_batches and sg.updates == g.updates
    assert sg.samples_per_update % (sg.dp * sg.micro) == 0
    # bundle: 64 × 4 = 256 samples over 16 ranks = 16 per rank in log-prob micro-batches of 4; smoke: 16 prompts
    # × 4 over 8 ranks = 8 per rank, still in the bundle's micro-batches of 4 (not fixed chunks of 16)
    assert (g.logprob_micro, g.logprob_per_rank, sg.prompts, sg.logprob_per_rank) == (4, 16, 16, 8)
    assert (sg.logprob_micro, sg.logprob_how, sg.ref_logprob_micro) == (4, "the bundle's size", 4)
    lora = geometry_from_config(compose(b, ["actor_rollout_ref.model.lora_rank=8"]))
    assert lora.lora_rank == 8 and scale_geometry(lora).lora
    assert scale_geometry(lora).ref_logprob_how == "the actor's (reference inside the actor)"


@pytest.mark.verl
def test_prompts_that_break_the_geometry_name_the_nearest_valid(tmp_path):
    b = bundle_of(tmp_path)
    g = geometry_from_config(compose(b))
    with pytest.raises(UserError, match="VI961") as exc:
        scale_geometry(g, prompts=7)
    assert "nearest valid: 6 or 8" in str(exc.value)
    assert scale_geometry(g, prompts=12).prompts == 12


@pytest.mark.verl
def test_broken_bundle_geometry_is_named(tmp_path):
    b = bundle_of(tmp_path)
    cfg = compose(b, ["actor_rollout_ref.actor.ppo_mini_batch_size=3"])
    g = geometry_from_config(cfg)
    assert any("not a whole number of mini-batches" in p for p in g.problems())
    with pytest.raises(UserError, match="VI963"):
        scale_geometry(g)


# ---------------------------------------------------------------------------------------------
# the tiny model of the bundle's architecture


def test_answer_formats_follow_the_prompt():
    from wizard.smoketest.model import answer_style, response_text, wrong_answer

    assert answer_style('... output the final answer after "####".') == "number"
    assert answer_style("... final answer within \\boxed{}.") == "boxed"
    assert answer_style('Answer on the last line, starting with "Answer:".') == "text"
    assert answer_style("What is 2+2?", "boxed") == "boxed"
    assert response_text("number", "7") == "#### 7" and response_text("boxed", "7") == "\\boxed{7}"
    assert wrong_answer("2,400", "number") == "2401" and wrong_answer("0", "boxed") == "1"
    assert wrong_answer("Paris", "text") == "none"


def test_verl_scores_the_tiny_models_answer_formats():
    """The right/wrong responses the policy is fitted on are told apart by verl's own scorers."""
    pytest.importorskip("verl")
    from verl.utils.reward_score import default_compute_score as score

    from wizard.smoketest.model import response_text, wrong_answer

    for ds, style, truth in (("openai/gsm8k", "number", "72"), ("DigitalLearningGmbH/MATH-lighteval", "boxed", "\\frac{1}{2}"),
                             ("math_dapo", "boxed", "7")):
        right = score(ds, response_text(style, truth), truth)
        wrong = score(ds, response_text(style, wrong_answer(truth, style)), truth)
        right = right["score"] if isinstance(right, dict) else right
        wrong = wrong["score"] if isinstance(wrong, dict) else wrong
        assert right > wrong, ds


def test_bpe_tokenizer_round_trips_text(tmp_path):
    from wizard.smoketest.model import build_bpe_tokenizer, prompt_ids

    tok = build_bpe_tokenizer(["Tom has 3 apples.", "\\boxed{\\frac{1}{2}}", "Answer: Paris"], tmp_path)
    text = 'Sara earns $1,200. #### 2400 \\boxed{x^2} Answer: Mars «ü»'
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    ids = prompt_ids(tok, [{"role": "user", "content": "hi"}])
    assert tok.decode(ids).endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("arch", ["qwen2", "qwen3", "llama", "mistral", "gemma2", "qwen3_moe", "mixtral", "nosuch_arch"])
def test_tiny_config_of_each_architecture_builds_and_generates(arch, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

    from wizard.smoketest.model import build_bpe_tokenizer, tiny_config

    tok = build_bpe_tokenizer(["What is 2 plus 2? #### 4"], tmp_path)
    cfg = tiny_config(arch, tok)
    assert cfg.model_type == (arch if arch != "nosuch_arch" else "llama")
    assert cfg.num_hidden_layers == 2 and cfg.hidden_size == 64 and cfg.vocab_size == len(tok)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    x = torch.tensor([tok("What is 2", add_special_tokens=False)["input_ids"]])
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=3, do_sample=True,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    assert out.shape[1] > x.shape[1]
    model.save_pretrained(tmp_path / "m")
    critic = AutoModelForTokenClassification.from_pretrained(tmp_path / "m", num_labels=1)  # the critic's value head
    assert critic(input_ids=x).logits.shape[-1] == 1


def test_model_arch_never_downloads(tmp_path):
    from wizard.smoketest.model import model_arch

    assert model_arch("meta-llama/Llama-3.2-1B")[0] == "llama"
    assert model_arch("google/gemma-2-2b")[0] == "gemma2"
    assert model_arch("./tiny-model", "./tiny-model", 0.001)[0] == "qwen2"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"model_type": "mistral"}))
    assert model_arch(str(tmp_path / "m")) == ("mistral", f"config.json of {tmp_path / 'm'}")
    assert model_arch("someone/unknown-model")[0] == "llama"


# ---------------------------------------------------------------------------------------------
# the report, the API and the CLI


def test_wizard_smoke_is_the_lazily_exported_function(tmp_path):
    import wizard.smoketest.report as report
    import wizard.smoketest.run as run

    assert wizard.smoke is run.smoke and wizard.SmokeReport is report.SmokeReport is run.SmokeReport
    assert not callable(wizard.smoketest)  # the package is a package; `wizard.smoke` is the function
    with pytest.raises(UserError, match="VI960"):
        wizard.smoke(tmp_path)
    assert {"SmokeOptions", "run_and_print", "cli"} <= set(vars(run))  # what the CLI imports


def test_report_json_has_the_issue_fields():
    from wizard.smoketest.report import Check, SmokeReport

    r = SmokeReport(bundle="b", engine="cpu", algorithm="grpo", prompts=8, samples=32, samples_used=32)
    r.checks.append(Check(1, "actor_updated", True, "x"))
    doc = r.as_dict()
    for key in ("engine", "algorithm", "prompts", "samples", "reward_mean", "reward_std", "kl", "policy_loss",
                "actor_updated", "reference_unchanged", "critic_used", "samples_used", "seconds"):
        assert key in doc, key
    assert set(doc["seconds"]) == {"probe", "data", "rollout", "reward", "advantage", "update", "total"}
    assert doc["pitfalls"]["1"] is True and doc["pitfalls"]["2"] is None
    assert not r.ok  # phases never ran
    json.dumps(doc)
    r.checks.append(Check(4, "rewards_vary", None, "n/a"))
    assert "n/a" in format_report(r)


def test_cli_lists_smoke_and_rejects_a_non_bundle(tmp_path, cli_env):
    r = run_cli(["--help"], env=cli_env)
    assert "verl-init smoke BUNDLE" in r.stdout
    r = run_cli(["smoke", str(tmp_path)], env=cli_env)
    assert r.returncode == 2 and "VI960" in r.stderr and "Traceback" not in r.stderr
    r = run_cli(["smoke", "--help"], env=cli_env)
    assert r.returncode == 0 and "--engine" in r.stdout and "--prompts" in r.stdout and "--json" in r.stdout


def test_smoke_help_imports_nothing_heavy():
    import subprocess

    out = subprocess.run([sys.executable, "-X", "importtime", "-c",
                          "from wizard.cli.app import main\ntry:\n    main(['smoke', '--help'])\nexcept SystemExit:\n    pass"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    mods = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in out.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}
    heavy = {"ray", "torch", "transformers", "verl", "hydra", "rich", "jinja2", "pydantic"}
    assert not (mods & heavy), sorted(mods & heavy)


@pytest.mark.slow
@pytest.mark.verl
def test_bad_prompts_argument_is_a_user_error(tmp_path, cli_env):
    b = bundle_of(tmp_path)
    r = run_cli(["smoke", str(b), "--engine", "cpu", "--prompts", "7"], env=cli_env)
    assert r.returncode == 2 and "VI961" in r.stderr and "nearest valid: 6 or 8" in r.stderr
    assert "Traceback" not in r.stderr


# ---------------------------------------------------------------------------------------------
# the verl engine: metric parsing and phase detection


STEP_LINE = ("(TaskRunner pid=4242) step:1 - actor/pg_loss:np.float64(-0.0123) - actor/kl_loss:0.00042 - "
             "actor/entropy:1.25 - actor/grad_norm:0.81 - actor/lr:1e-06 - critic/score/mean:0.4375 - "
             "critic/score/max:1.0 - critic/score/min:0.0 - critic/vf_loss:0.3 - critic/grad_norm:2.5 - "
             "timing_s/gen:1.5 - timing_s/reward:0.2 - timing_s/adv:0.01 - timing_s/update_actor:0.9 - "
             "response_length/mean:12.5 - training/global_step:1")


def test_parse_step_metrics():
    m = parse_metrics("noise\nstep:0 - a:1\n" + STEP_LINE + "\nstep:2 - actor/pg_loss:9\n")
    assert m["actor/pg_loss"] == -0.0123 and m["actor/grad_norm"] == 0.81 and m["training/global_step"] == 1
    assert m["critic/score/max"] == 1.0 and len(m) == 16
    assert parse_value("np.float32(nan)") != parse_value("np.float32(nan)")  # nan
    assert parse_value("3") == 3 and parse_value("inf") == float("inf") and parse_value("abc") == "abc"


@pytest.mark.parametrize("text, phase, message", [
    ("Could not override 'actor_rollout_ref.actor.ppo_mini_batchsize'.\nTo append to your config use +...\n"
     "Key 'ppo_mini_batchsize' is not in struct\n    full_key: x\nomegaconf.errors.ConfigAttributeError: Key 'ppo_mini_batchsize' is not in struct",
     "probe", "omegaconf.errors.ConfigAttributeError: Key 'ppo_mini_batchsize' is not in struct"),
    ('Traceback (most recent call last):\n  File "/v/verl/single_controller/ray/base.py", line 230, in _check\n'
     "ValueError: Total available GPUs 0 is less than total desired GPUs 8", "probe",
     "ValueError: Total available GPUs 0 is less than total desired GPUs 8"),
    ('Traceback (most recent call last):\n  File "/v/verl/trainer/main_ppo.py", line 140, in run\n'
     '  File "/v/verl/utils/dataset/rl_dataset.py", line 390, in __getitem__\nKeyError: \'prompt\'', "data", "KeyError: 'prompt'"),
    ("(TaskRunner pid=1) Traceback (most recent call last):\n"
     '(TaskRunner pid=1)   File "/v/verl/trainer/ppo/v1/trainer_base.py", line 900, in fit\n'
     '(TaskRunner pid=1)   File "/v/verl/experimental/reward_loop/reward_loop.py", line 150, in compute_score\n'
     "(TaskRunner pid=1) ray.exceptions.RayTaskError(NotImplementedError): Reward function is not implemented for "
     "data_source='x'", "reward", "NotImplementedError: Reward function is not implemented for data_source='x'"),
    ('Traceback (most recent call last):\n  File "/v/verl/trainer/ppo/v1/trainer_base.py", line 1760, in _compute_advantage\n'
     '  File "/v/verl/trainer/ppo/ray_trainer.py", line 222, in compute_advantage\nKeyError: \'values\'', "advantage",
     "KeyError: 'values'"),
    ('Traceback (most recent call last):\n  File "/v/verl/workers/engine_workers.py", line 264, in train_mini_batch\n'
     "AssertionError: Got mini_batch_size=20 and self.engine.get_data_parallel_size()=8", "update",
     "AssertionError: Got mini_batch_size=20 and self.engine.get_data_parallel_size()=8"),
])
def test_failure_phase_and_verl_message(text, phase, message):
    assert failing_phase(text, "probe") == phase
    assert error_message(text) == message


# ---------------------------------------------------------------------------------------------
# the verl engine: the command line is accepted by verl itself


def verl_overrides(bundle: Path, model_dir: Path) -> tuple[list[str], object]:
    from wizard.smoketest.context import Display, SmokeContext
    from wizard.smoketest.report import SmokeReport
    from wizard.smoketest.verl import build_command, local_geometry
    from wizard.verify.harness import compose_bundle

    ctx = SmokeContext(str(bundle.resolve()), SmokeOptions(engine="verl", model_dir=str(model_dir)),
                       SmokeReport(str(bundle), "verl"), Display())
    ctx.cfg = compose_bundle(bundle)
    ctx.workdir = str(bundle.parent / "work")
    g = local_geometry(geometry_from_config(ctx.cfg))
    sg = scale_geometry(g, None, dp=g.dp, verl_rules=True, response_cap=g.max_response_length)
    cmd = build_command(ctx, g, sg)
    assert cmd[:3] == [sys.executable, "-m", "verl.trainer.main_ppo"]
    assert cmd[3:7] == ["--config-path", str(bundle.resolve()), "--config-name", "verl_config"]
    return cmd[7:], sg


@pytest.mark.verl
@pytest.mark.parametrize("profile", PROFILES)
def test_verl_engine_overrides_pass_verls_own_checks(profile, tmp_path, tiny_model):
    """main_ppo's driver checks (Hydra struct mode, validate_config) and the worker-time arithmetic
    (wizard.verify.harness.worker_time_checks, each reproducing a verl assert) all hold for the smoke step."""
    import warnings

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from wizard.verify.harness import _vllm_lora_fallback, worker_time_checks

    b = bundle_of(tmp_path, profile=profile)
    overrides, sg = verl_overrides(b, tiny_model)
    for needed in ("trainer.total_training_steps=1", "trainer.val_before_train=False", "trainer.test_freq=-1",
                   "trainer.save_freq=-1", "trainer.logger=[console]", f"data.train_batch_size={sg.prompts}",
                   f"actor_rollout_ref.actor.ppo_mini_batch_size={sg.mini}", f"actor_rollout_ref.model.path={tiny_model}"):
        assert needed in overrides, needed
    cfg = compose(b, [o for o in overrides if not o.startswith("hydra.")])
    assert list(cfg.trainer.logger) == ["console"]
    assert cfg.data.train_batch_size == sg.prompts and cfg.actor_rollout_ref.rollout.n == sg.n
    with warnings.catch_warnings(), _vllm_lora_fallback():
        warnings.simplefilter("ignore")
        auto_set_device(cfg)
        validate_config(cfg, need_reference_policy(cfg), need_critic(cfg))
        failed = [(name, detail) for name, ok, detail, _src in worker_time_checks(cfg, need_critic(cfg)) if not ok]
    assert not failed, failed
    g = geometry_from_config(cfg)
    assert g.problems() == [] and g.updates == sg.updates and g.n == sg.n


@pytest.mark.verl
def test_multi_node_model_parallel_group_needs_the_cluster(tmp_path, tiny_model):
    from wizard.smoketest.context import SmokeFailure

    b = bundle_of(tmp_path, profile="megatron-64gpu")
    with pytest.raises(SmokeFailure, match="spans more than one node"):
        verl_overrides(b, tiny_model)


# ---------------------------------------------------------------------------------------------
# the verl engine: a stand-in main_ppo process

FAKE = textwrap.dedent('''
    import json, os, sys, time
    mode = os.environ["FAKE_MODE"]
    json.dump({"argv": sys.argv[1:], "cwd": os.getcwd()}, open(os.environ["FAKE_ARGV"], "w"))
    print("[validate_config] All configuration checks passed successfully!", flush=True)
    if mode == "hydra":
        print("Could not override 'data.train_batch_size'.\\nomegaconf.errors.ConfigAttributeError: Key 'x' is not in struct")
        sys.exit(1)
    print("(TaskRunner pid=11) dataset len: 8", flush=True)
    if mode == "gpus":
        print('Traceback (most recent call last):\\n  File "/v/verl/single_controller/ray/base.py", line 230, in check\\n'
              "ValueError: Total available GPUs 0 is less than total desired GPUs 1")
        sys.exit(1)
    if mode == "data":
        print('Traceback (most recent call last):\\n  File "/v/verl/utils/dataset/rl_dataset.py", line 3, in get\\n'
              "KeyError: 'prompt'")
        sys.exit(1)
    print("(TaskRunner pid=11) (AgentLoopWorker pid=12) vllm server for replica 0 started", flush=True)
    if mode == "hang":
        time.sleep(60)
    if mode == "reward":
        print("(TaskRunner pid=11) Traceback (most recent call last):\\n"
              '(TaskRunner pid=11)   File "/v/verl/experimental/reward_loop/reward_loop.py", line 150, in compute_score\\n'
              "(TaskRunner pid=11) ray.exceptions.RayTaskError(NotImplementedError): Reward function is not "
              "implemented for data_source='my_homework'")
        sys.exit(1)
    if mode == "flat":
        print(os.environ["STEP"].replace("critic/score/max:1.0", "critic/score/max:0.0"), flush=True)
        sys.exit(0)
    if mode == "nograd":
        print(os.environ["STEP"].replace("actor/grad_norm:0.81", "actor/grad_norm:0.0")
              .replace("critic/grad_norm:2.5", "critic/grad_norm:0.0")
              .replace("actor/pg_loss:np.float64(-0.0123)", "actor/pg_loss:np.float64(nan)"), flush=True)
        sys.exit(0)
    if mode == "silent":
        sys.exit(0)
    print(os.environ["STEP"], flush=True)
''')


def verl_run(tmp_path: Path, bundle: Path, model: Path, mode: str, timeout: float = 30.0):
    fake = tmp_path / "fake_main_ppo.py"
    fake.write_text(FAKE)
    argv = tmp_path / f"argv-{mode}.json"
    old = dict(os.environ)
    os.environ.update(FAKE_MODE=mode, FAKE_ARGV=str(argv), STEP=STEP_LINE)
    try:
        report = wizard.smoke(bundle, options=SmokeOptions(engine="verl", model_dir=str(model), timeout=timeout,
                                                           main_command=[sys.executable, str(fake)]))
    finally:
        os.environ.clear()
        os.environ.update(old)
    return report, json.loads(argv.read_text()) if argv.exists() else None


@pytest.mark.verl
def test_verl_engine_reports_step1_metrics(tmp_path, tiny_model):
    b = bundle_of(tmp_path, profile="cpu-smoke")
    report, seen = verl_run(tmp_path, b, tiny_model, "ok")
    assert report.ok, format_report(report)
    assert report.engine == "verl" and [p.status for p in report.phases] == ["ok"] * 6
    assert seen["cwd"] == str(b.resolve())  # launched from the bundle, as run.sh does
    assert seen["argv"][:4] == ["--config-path", str(b.resolve()), "--config-name", "verl_config"]
    assert "trainer.total_training_steps=1" in seen["argv"] and "trainer.logger=[console]" in seen["argv"]
    assert report.command[-len(seen["argv"]):] == seen["argv"]
    assert report.policy_loss == -0.0123 and report.kl == 0.00042 and report.entropy == 1.25
    assert report.reward_mean == 0.4375 and report.actor_updated is True and report.samples_used is None
    assert report.metrics["timing_s/gen"] == 1.5 and "verl timing 1.5 s" in report.phase("rollout").detail
    names = {c.name: c.ok for c in report.checks}
    assert names["rewards_vary"] and names["finite_losses"] and names["actor_updated"]
    assert "reference_unchanged" not in names and "step_completed" not in names  # nothing that cannot fail
    doc = report.as_dict()
    assert doc["ok"] and doc["engine"] == "verl" and doc["prompts"] == 8 and doc["samples"] == 32


@pytest.mark.verl
@pytest.mark.parametrize("mode, phase, message", [
    ("hydra", "probe", "ConfigAttributeError: Key 'x' is not in struct"),
    ("gpus", "probe", "Total available GPUs 0 is less than total desired GPUs 1"),
    ("data", "data", "KeyError: 'prompt'"),
    ("reward", "reward", "NotImplementedError: Reward function is not implemented for data_source='my_homework'"),
    ("flat", "reward", "rewards_vary"),
    ("nograd", "update", "actor_updated"),  # a zero gradient and a NaN loss in verl's own metrics
    ("silent", "rollout", "without printing step-1 metrics"),  # the last phase verl's output reached
])
def test_verl_engine_failure_is_reported_in_its_phase(mode, phase, message, tmp_path, tiny_model):
    b = bundle_of(tmp_path, profile="cpu-smoke")
    report, _ = verl_run(tmp_path, b, tiny_model, mode)
    assert not report.ok
    assert report.failure is not None and report.failure.phase == phase, report.failure
    assert message in report.failure.message
    assert report.phase(phase).status == "failed"
    later = [p.status for p in report.phases[[p.name for p in report.phases].index(phase) + 1:]]
    assert all(s == ("ok" if mode == "flat" else "skipped") for s in later), later  # flat: verl ran every phase
    if mode == "nograd":
        assert {c.name for c in report.checks if c.ok is False} == {"actor_updated", "finite_losses"}
    assert report.as_dict()["log_tail"]


@pytest.mark.verl
def test_verl_engine_critic_without_gradient_fails(tmp_path, tiny_model):
    """Every check the verl engine reports is read from verl's step-1 metrics and fails on a planted value."""
    b = bundle_of(tmp_path, profile="ppo-16gpu")
    report, _ = verl_run(tmp_path, b, tiny_model, "nograd")
    assert {c.name for c in report.checks if c.ok is False} == {"actor_updated", "finite_losses", "critic_updated"}
    assert {c.name for c in report.checks if c.kind == "measured"} == {"actor_updated", "finite_losses",
                                                                       "critic_updated", "rewards_vary"}


@pytest.mark.slow
@pytest.mark.verl
def test_verl_engine_stops_a_hung_main_ppo(tmp_path, tiny_model):
    import time

    b = bundle_of(tmp_path, profile="cpu-smoke")
    started = time.perf_counter()
    report, _ = verl_run(tmp_path, b, tiny_model, "hang", timeout=3)
    assert time.perf_counter() - started < 30
    assert report.failure is not None and "did not finish one step within 3 s" in report.failure.message
    assert report.failure.phase == "rollout" and "Ray" in report.failure.hint


@pytest.mark.verl
def test_verl_engine_needs_the_model_on_this_machine(tmp_path):
    b = bundle_of(tmp_path, profile="cpu-smoke")  # model ./tiny-model does not exist under tmp_path
    report = wizard.smoke(b, options=SmokeOptions(engine="verl", main_command=[sys.executable, "-c", "pass"]))
    assert report.failure is not None and report.failure.phase == "probe"
    assert "does not exist on this machine" in report.failure.message and "--model-dir" in report.failure.hint


@pytest.mark.slow
@pytest.mark.verl
def test_prepared_gpu_smoke_builds_a_tiny_model_offline_and_runs_the_verl_engine(tmp_path, monkeypatch, cli_env):
    """scripts/gpu_smoke.py: a tiny random-initialised model of the bundle's architecture (no hub), the bundle's data
    prepared, then `verl-init smoke --engine verl --model-dir` — run here against the main_ppo stand-in."""
    import subprocess

    from transformers import AutoConfig

    from wizard.smoketest.prepared import prepare_gpu_smoke

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    b = bundle_of(tmp_path, profile="cpu-smoke")  # its model ./tiny-model is not on this machine
    prep = prepare_gpu_smoke(b, tmp_path / "gpu", data_dir=str(DATA / "gsm8k"))
    conf = AutoConfig.from_pretrained(prep.model_dir)
    assert conf.model_type == "qwen2" and conf.hidden_size == 256 and conf.head_dim == 64 and conf.num_hidden_layers == 2
    assert prep.model["warmup"]["steps"] > 0 and "trained on the bundle's rows" in prep.model["tokenizer"]
    assert (Path(prep.model_dir) / "model.safetensors").is_file()
    prepare, smoke_cmd = prep.steps  # data/train.parquet is not written yet: prepare it first
    assert prepare[1:] == ["data/prepare_data.py", "--local-dir", str(DATA / "gsm8k")]
    assert smoke_cmd[2:] == ["wizard.cli.app", "smoke", str(b.resolve()), "--engine", "verl", "--model-dir",
                             prep.model_dir, "--timeout", "900", "--json"]
    script = prep.script()
    assert "export HF_HUB_OFFLINE=1" in script and script.count("\n") == 4 + len(prep.env) + 2
    assert subprocess.run(prepare, cwd=b, env=cli_env, capture_output=True, timeout=300).returncode == 0
    report, seen = verl_run(tmp_path, b, Path(prep.model_dir), "ok")
    assert report.ok, format_report(report)
    assert f"actor_rollout_ref.model.path={prep.model_dir}" in seen["argv"]
    # the script: prints the commands; a second preparation into the same folder is refused
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_smoke.py"), str(b), "--out", str(tmp_path / "gpu")],
                       env=cli_env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "already exists" in r.stderr and "VI965" in r.stderr
    # rows that cannot be read (the hub dataset, offline, no --data-dir): an error, and no half-built model left
    from wizard.smoketest.context import SmokeFailure

    # (math: the built-in offline rows stand in for gsm8k only, so an unreachable hub leaves nothing to read)
    fresh = bundle_of(tmp_path, name="fresh", profile="cpu-smoke", dataset="math")
    with pytest.raises(SmokeFailure, match="prepare_data.py failed"):
        prepare_gpu_smoke(fresh, tmp_path / "gpu2")
    assert not (tmp_path / "gpu2" / "tiny-model").exists()


def test_unknown_engine_is_rejected():
    with pytest.raises(WizardError, match="VI962"):
        from wizard.smoketest.run import choose_engine

        choose_engine("gpu")
