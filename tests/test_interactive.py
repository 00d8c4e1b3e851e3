"""The questionnaire in-process: real questionary prompts fed through prompt_toolkit's pipe input.

`Scripted` sends each question's keystrokes into the pipe just before that question is asked (Enter when
the script has none), and records which fields were asked, so a test reads as "for this field, type
this". The real terminal is exercised by tests/test_interactive_pty.py (pexpect).
"""

from __future__ import annotations

import io
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import HAS_VERL, run_cli
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console
from test_probe import h100_nvswitch, install, mig_a100, pcie_two_numa

from wizard.cli.interactive.walk import Prompter, run_wizard
from wizard.env.probe import GpuReport, HostReport, Probes, RayReport, probe_gpus

ENTER = "\r"
CLEAR = "\x15"  # Ctrl-U: clear the prefilled default
DOWN = "\x1b[B"
SPACE = " "
CTRL_C = "\x03"
WATCHDOG_S = 60


def typed(text: str) -> str:
    return CLEAR + text + ENTER


class Scripted(Prompter):
    """Types the script's keys for each prompt (by field name, or by prompt message) just before it shows.

    A field's list of keys answers its prompts in turn (a refused answer is asked again); `"<field>/typed"` holds the
    keys for the text prompt that follows choosing "another value" in a select."""

    def __init__(self, console: Console, inp: Any, script: dict[str, Any]):
        super().__init__(console)
        self.inp = inp
        self.script = {k: list(v) if isinstance(v, list) else [v] for k, v in script.items()}
        self.asked: list[str] = []
        self._inside: str | None = None
        self._selected = False

    def _send(self, key: str) -> None:
        if len(self.asked) > 200:
            raise AssertionError(f"the questionnaire does not end: {self.asked[-20:]}")
        queue = self.script.get(key)
        self.inp.send_text(queue.pop(0) if queue else ENTER)

    def prompt(self, q: Any, ctx: Any, default: Any) -> Any:
        self.asked.append(q.field)
        self._send(q.field)
        self._inside, self._selected = q.field, False
        try:
            return super().prompt(q, ctx, default)
        finally:
            self._inside = None

    def select(self, message: str, choices: Any, default: Any = None) -> Any:
        if self._inside is None:
            self.asked.append(message)
            self._send(message)
        self._selected = True
        return super().select(message, choices, default)

    def text(self, message: str, default: str, validate: Any, instruction: str | None = None) -> str:
        if self._inside is None:
            self.asked.append(message)
            self._send(message)
        elif self._selected:
            self._send(f"{self._inside}/typed")  # the text prompt after "another value" in a select
        return super().text(message, default, validate, instruction)


def other_gpus(n: int, memory: float) -> dict[str, Any]:
    """Script keys that pick "other" GPUs and type their count and memory."""
    return {"gpus": "other" + ENTER, "gpus_per_node": typed(str(n)), "gpu_memory_gb": typed(f"{memory:g}")}


def spy_offered(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[list[Any]]]:
    """The choices each select showed, per field, in the order asked."""
    from wizard.cli.interactive import walk

    shown: dict[str, list[list[Any]]] = {}
    real = walk.offered

    def spy(q: Any, ctx: Any) -> Any:
        out = real(q, ctx)
        shown.setdefault(q.field, []).append([v for v, _ in out])
        return out

    monkeypatch.setattr(walk, "offered", spy)
    return shown


def no_gpu_probes() -> Probes:
    return Probes(GpuReport(False, "no NVIDIA GPU found (test: no driver)"),
                  RayReport("http://127.0.0.1:9", "RAY_API_SERVER_ADDRESS", explicit=False),
                  HostReport(memory_gb=512.0, cpus=64, shm_gb=256.0, shm_free_gb=256.0))


def gpu_probes(monkeypatch: pytest.MonkeyPatch, machine: Any = h100_nvswitch) -> Probes:
    install(monkeypatch, machine())
    p = no_gpu_probes()
    p.gpus = probe_gpus()
    return p


class Result:
    def __init__(self, rc: int | None, out: str, asked: list[str], root: Path, error: BaseException | None):
        self.rc, self.out, self.asked, self.root, self.error = rc, out, asked, root, error

    def bundle(self) -> Path:
        (folder,) = [p.parent for p in self.root.glob("runs/*/verl-init.yaml")]
        return folder

    def answers(self) -> dict[str, Any]:
        return yaml.safe_load((self.bundle() / "verl-init.yaml").read_text())["answers"]

    def files(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*"))


def drive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: dict[str, Any], probes: Probes | None = None,
          **kwargs: Any) -> Result:
    monkeypatch.chdir(tmp_path)
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None, force_terminal=False)
    error: BaseException | None = None
    rc: int | None = None
    with create_pipe_input() as inp:
        prompter = Scripted(console, inp, script)
        # A prompt that keeps rejecting what was typed would wait forever: end the input after a while
        # (EOF → KeyboardInterrupt), so a broken script fails instead of hanging.
        watchdog = threading.Timer(WATCHDOG_S, inp.close)
        watchdog.start()
        with create_app_session(input=inp, output=DummyOutput()):
            try:
                rc = run_wizard(console=console, probes=probes or no_gpu_probes(), prompter=prompter,
                                base_dir=str(tmp_path), **kwargs)
            except KeyboardInterrupt as exc:
                error = exc
            finally:
                watchdog.cancel()
    return Result(rc, buf.getvalue(), prompter.asked, tmp_path, error)


# --- whole paths ------------------------------------------------------------------------------------


def test_grpo_on_one_node_with_probed_defaults(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {}, gpu_probes(monkeypatch))
    assert r.rc == 0, r.out
    a = r.answers()
    assert a["cluster"] == "local" and a["algorithm"] == "grpo"
    assert (a["gpus_per_node"], a["gpu_memory_gb"], a["gpu_type"]) == (8, 85.5, "H100 80GB HBM3")
    assert a["host_memory_gb"] == 512.0  # "this machine": probe-filled, not asked
    assert not {"gpus_per_node", "gpu_memory_gb", "gpu_type", "host_memory_gb"} & set(r.asked)
    for never in ("nnodes", "critic_model", "reward_model", "reward_function", "model_params_b", "k8s_namespace",
                  "slurm_partition", "image", "question_field"):
        assert never not in r.asked
    assert r.asked[:2] == ["cluster", "gpus"]
    assert len(r.asked) <= 12, r.asked  # every default accepted, "Write this bundle?" and "Bundle folder" included
    for unset in ("samples_per_prompt", "total_steps", "experiment_name", "critic_model"):
        assert unset not in a  # empty answers leave the choice to verl-init
    assert "8× NVIDIA H100 80GB HBM3 (85.5 GB)" in r.out and "NVLink between all GPUs" in r.out
    assert "placed with this machine's GPU topology" in r.out
    assert "Memory per GPU (GiB)" in r.out and "Batch arithmetic" in r.out and "256 prompts per step × 5" in r.out
    bundle = r.bundle()
    assert bundle == tmp_path / "runs" / "grpo-qwen2.5-0.5b-instruct"
    assert {"verl_config.yaml", "run.sh", "PLAN.md", "verl-init.yaml"} <= {p.name for p in bundle.iterdir()}
    assert "cd runs/grpo-qwen2.5-0.5b-instruct && python3 data/prepare_data.py && ./run.sh" in r.out
    assert not list(tmp_path.glob("runs/.*"))  # no temporary folders left


def test_a_machine_without_gpus_does_not_lend_its_host_memory_to_the_gpu_nodes(tmp_path, monkeypatch):
    """Issue 14: this laptop's 25.3 GB of host memory used to be recorded as the 8×H100 node's, and 7B GRPO was then
    refused with VI605 ("137 GB of host memory per node")."""
    small = no_gpu_probes()
    small.host = HostReport(memory_gb=25.3, cpus=4, shm_gb=2.0, shm_free_gb=2.0)
    r = drive(tmp_path, monkeypatch, {"gpus": "8x H100" + ENTER, "model": typed("Qwen/Qwen2.5-7B-Instruct")}, small)
    assert r.rc == 0, r.out
    assert "VI605" not in r.out and "verl-init cannot plan these answers" not in r.out
    a = r.answers()
    assert "host_memory_gb" not in a and (a["gpus_per_node"], a["gpu_memory_gb"], a["gpu_type"]) == (8, 80, "H100")
    assert r.asked.count("model") == 1


@pytest.mark.slow
def test_ppo_asks_for_the_critic_and_keeps_it_separate(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {"algorithm": "ppo" + ENTER, **other_gpus(4, 80), "advanced": "y"})
    assert r.rc == 0, r.out
    assert "critic_model" in r.asked and "reward_model" not in r.asked
    a = r.answers()
    assert a["algorithm"] == "ppo" and "critic_model" not in a and "samples_per_prompt" not in a
    cfg = yaml.safe_load((r.bundle() / "verl_config.yaml").read_text())
    assert cfg["algorithm"]["adv_estimator"] == "gae" and cfg["actor_rollout_ref"]["rollout"]["n"] == 1
    assert "critic" in r.out


@pytest.mark.slow
def test_kuberay_questions_only_for_kuberay(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {
        "cluster": "kuberay" + ENTER, "nnodes": typed("2"), "gpus": "A100 80" + ENTER, "advanced": "y",
        "host_memory_gb": typed("1000"), "k8s_namespace": typed("rl-team"), "shared_pvc": typed("verl-data"),
        "shm_size_gb": typed("64"),
    })
    assert r.rc == 0, r.out
    for q in ("nnodes", "gpus", "host_memory_gb", "image", "k8s_namespace", "k8s_secret", "shared_pvc",
              "shm_size_gb"):
        assert q in r.asked
    assert not [q for q in r.asked if q.startswith("slurm_")]
    a = r.answers()
    assert (a["cluster"], a["nnodes"], a["k8s_namespace"], a["shared_pvc"], a["shm_size_gb"]) == (
        "kuberay", 2, "rl-team", "verl-data", 64)
    assert "k8s_secret" in a and "image" not in a
    assert (r.bundle() / "k8s" / "rayjob.yaml").is_file()
    assert "kubectl -n rl-team apply -f k8s/configmap.yaml -f k8s/rayjob.yaml" in r.out


def test_slurm_questions_only_for_slurm(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {"cluster": "slurm" + ENTER, "advanced": "y", "slurm_partition": typed("gpu"),
                                      "slurm_time": typed("04:00:00")})
    assert r.rc == 0, r.out
    assert {"slurm_partition", "slurm_account", "slurm_time", "image"} <= set(r.asked)
    assert not [q for q in r.asked if q.startswith("k8s_") or q in ("shared_pvc", "shm_size_gb")]
    a = r.answers()
    assert a["slurm_partition"] == "gpu" and a["slurm_time"] == "04:00:00" and "slurm_account" not in a
    assert "#SBATCH --partition=gpu" in (r.bundle() / "slurm" / "job.sbatch").read_text()
    assert "sbatch slurm/job.sbatch" in r.out


# --- rejected answers are explained and asked again ----------------------------------------------------------


def test_a_batch_answer_is_refused_the_moment_it_is_given(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {"advanced": "y", "updates_per_step": [typed("3"), typed("4")]})
    assert r.rc == 0, r.out
    assert "verl-init cannot plan these answers" not in r.out  # nothing fails late
    assert "✗ refused updates_per_step = 3: updates_per_step=3 does not divide prompts_per_step=256" in r.out
    flat = " ".join(r.out.split())  # the console wraps long lines
    assert "nearest valid: updates_per_step=2 or 4" in flat and "[VI201]" in flat
    assert r.asked.count("updates_per_step") == 2 and r.asked.count("prompts_per_step") == 1
    assert r.answers()["updates_per_step"] == 4


def test_a_model_that_fits_with_no_lora_rank_is_refused_at_once(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {
        **other_gpus(1, 24), "algorithm": "ppo" + ENTER,
        "model": [typed("Qwen/Qwen2.5-7B-Instruct"), typed("Qwen/Qwen2.5-0.5B-Instruct")],
    })
    assert r.rc == 0, r.out
    assert "✗ refused model = Qwen/Qwen2.5-7B-Instruct: Qwen/Qwen2.5-7B-Instruct (7.6B, ppo) does not fit 1×1 × 24 GB" in r.out
    assert re.search(r"or a model of ≤ \d+(\.\d)?B parameters on these GPUs \[VI602\]", r.out), r.out
    assert r.asked.count("model") == 2 and "lora_rank" not in r.asked
    assert "verl-init cannot plan these answers" not in r.out
    assert r.answers()["model"] == "Qwen/Qwen2.5-0.5B-Instruct"


@pytest.mark.slow
def test_when_only_lora_fits_the_rank_question_offers_the_ranks_that_fit(tmp_path, monkeypatch):
    from wizard.cli.interactive import questions as qs

    shown = spy_offered(monkeypatch)
    r = drive(tmp_path, monkeypatch, {**other_gpus(4, 24), "model": typed("Qwen/Qwen2.5-7B-Instruct"),
                                      "lora_rank": "0" + ENTER})
    assert r.rc == 0, r.out
    assert "training all weights does not fit these GPUs; LoRA ranks that fit: " in r.out
    (offered,) = shown["lora_rank"]
    assert 32 in offered and 0 not in offered and set(offered) <= set(qs.LORA_RANKS)
    rank = r.answers()["lora_rank"]
    assert rank in offered and rank != 0  # typing 0 matches no offered rank: Enter takes one that fits


@pytest.mark.slow
def test_changing_the_algorithm_drops_answers_that_no_longer_apply(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {
        "advanced": "y", "algorithm": ["ppo" + ENTER, "grpo" + ENTER], "critic_model": typed("Qwen/Qwen2.5-0.5B"),
        "Write this bundle?": ["change" + ENTER, ENTER],
        "Which answer do you want to change?": "algorithm" + ENTER,
    })
    assert r.rc == 0, r.out
    a = r.answers()
    assert a["algorithm"] == "grpo" and "critic_model" not in a
    assert r.asked.count("critic_model") == 1
    assert "critic" not in yaml.safe_load((r.bundle() / "verl_config.yaml").read_text()) or \
        yaml.safe_load((r.bundle() / "verl_config.yaml").read_text())["critic"].get("enable") in (False, None)


def test_dapo_is_not_offered_a_reward_model(tmp_path, monkeypatch):
    from wizard.cli.interactive.questions import BY_FIELD, Context, refusal

    shown = spy_offered(monkeypatch)
    r = drive(tmp_path, monkeypatch, {"algorithm": "dapo" + ENTER, "reward": "model" + ENTER})
    assert r.rc == 0, r.out
    assert shown["reward"] == [["rule", "function"]]  # model would be refused (VI505): not offered
    assert r.asked.count("reward") == 1 and "reward_model" not in r.asked
    a = r.answers()
    assert a["reward"] == "rule" and a["algorithm"] == "dapo" and "reward_model" not in a
    ctx = Context(answers={"algorithm": "dapo"}, asked={"algorithm"}, base_dir=str(tmp_path))
    why = refusal(BY_FIELD["reward"], "model", ctx)
    assert why is not None and why.startswith("algorithm=dapo filters groups by reward at sampling time") and "[VI505]" in why


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_a_rule_that_names_no_asked_question_offers_a_choice(tmp_path, monkeypatch):
    """A rejection whose keys are all unasked (here kl_coef) falls back to "which answer do you want to change?"."""
    from wizard.planner import pipeline as planner
    from wizard.intent.errors import Problem, WizardError

    real = planner.plan
    calls = {"n": 0}

    def once(answers, **kw):
        if "topology" in kw:  # the flow's own plan (question defaults plan without it)
            calls["n"] += 1
        if calls["n"] == 1 and "topology" in kw:
            raise WizardError([Problem("VI402", "error", ("kl_coef",), "made-up rejection", "change something")])
        return real(answers, **kw)

    monkeypatch.setattr(planner, "plan", once)
    r = drive(tmp_path, monkeypatch, {**other_gpus(8, 80), "gpu_memory_gb": [typed("80"), typed("40")],
                                      "Which answer do you want to change?": "gpu_memory_gb" + ENTER})
    assert r.rc == 0, r.out
    assert "✗ VI402 kl_coef: made-up rejection" in r.out and "Which answer do you want to change?" in r.asked
    assert r.answers()["gpu_memory_gb"] == 40


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_when_no_value_fits_an_earlier_answer_can_be_changed(tmp_path, monkeypatch):
    """A file of 3 rows holds no batch for 8 GPUs: prompts_per_step cannot be answered, so after the refusal the
    wizard offers to change the answer the error names (dataset) instead of asking the same question forever."""
    (tmp_path / "tiny.jsonl").write_text("".join(f'{{"q": "{i}+1?", "a": "{i + 1}"}}\n' for i in range(3)))
    r = drive(tmp_path, monkeypatch, {
        "dataset": [typed("tiny.jsonl"), typed("gsm8k")], "question_field": typed("q"), "answer_field": typed("a"),
        "Which answer do you want to change?": "change dataset" + ENTER})
    assert r.rc == 0, r.out
    assert "✗ refused prompts_per_step = " in r.out and "[VI519]" in r.out
    i = r.asked.index("Which answer do you want to change?")
    assert r.asked[i - 1] == "prompts_per_step" and r.asked[i + 1] == "dataset"
    a = r.answers()
    assert a["dataset"] == "gsm8k" and "question_field" not in a and a["prompts_per_step"] == 256


@pytest.mark.slow
def test_a_question_refused_twice_offers_to_change_the_answer_the_error_names(tmp_path, monkeypatch):
    """No model fits 2 GB GPUs: after two refusals the wizard offers to go back to the GPU memory."""
    r = drive(tmp_path, monkeypatch, {
        **other_gpus(1, 2), "gpu_memory_gb": [typed("2"), typed("80")],
        "model": [ENTER, typed("Qwen/Qwen2.5-1.5B-Instruct"), ENTER],
        "Which answer do you want to change?": "change gpu_memory_gb" + ENTER})
    assert r.rc == 0, r.out
    assert r.out.count("✗ refused model = ") == 2 and "[VI602]" in r.out
    i = r.asked.index("Which answer do you want to change?")
    assert r.asked[i - 2:i] == ["model", "model"] and r.asked[i + 1] == "gpu_memory_gb"
    a = r.answers()
    assert a["gpu_memory_gb"] == 80 and a["model"] == "Qwen/Qwen2.5-0.5B-Instruct"


def test_a_late_rejection_asks_again_without_the_refused_value(tmp_path, monkeypatch):
    """When the final plan still refuses (here a made-up rule on prompts_per_step), the question comes back with a
    default that passes, not the refused answer."""
    from wizard.planner import pipeline as planner
    from wizard.intent.errors import Problem, WizardError

    real = planner.plan
    calls = {"n": 0}

    def once(answers, **kw):
        if "topology" in kw:  # the flow's own plan (the questions' checks plan without it)
            calls["n"] += 1
            if calls["n"] == 1:
                raise WizardError([Problem("VI203", "error", ("prompts_per_step",), "made-up rejection", "fix")])
        return real(answers, **kw)

    defaults: list[Any] = []
    real_select = Prompter.select

    def spy(self, message, choices, default=None):
        if message.startswith("prompts_per_step"):
            defaults.append(default)
        return real_select(self, message, choices, default)

    monkeypatch.setattr(planner, "plan", once)
    monkeypatch.setattr(Prompter, "select", spy)
    r = drive(tmp_path, monkeypatch, {"prompts_per_step": ["64" + ENTER, ENTER]})
    assert r.rc == 0, r.out
    assert "✗ VI203 prompts_per_step: made-up rejection" in r.out and "Asking again: prompts_per_step" in r.out
    assert defaults == [256, 256]  # not 64, the refused answer
    assert r.answers()["prompts_per_step"] == 256


@pytest.mark.slow
def test_a_rule_of_the_cluster_files_is_checked_at_once(tmp_path, monkeypatch):
    """Cluster rules run on the KubeRay files' layout (VI703: /dev/shm must stay below the pod's memory)."""
    r = drive(tmp_path, monkeypatch, {
        "cluster": "kuberay" + ENTER, "nnodes": typed("1"), **other_gpus(2, 80), "advanced": "y",
        "shm_size_gb": [typed("4096"), typed("32")],
    })
    assert r.rc == 0, r.out
    assert "✗ refused shm_size_gb = 4096" in r.out and "[VI703]" in r.out
    assert r.asked.count("shm_size_gb") == 2 and r.answers()["shm_size_gb"] == 32


# --- inline validation ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_typed_values_are_checked_before_they_are_accepted(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {
        **other_gpus(2, 80), "gpus_per_node": [typed("abc"), typed("99"), typed("2")],
        "dataset": [typed("my-data"), typed("gsm8k")], "advanced": "y",
        "max_prompt_length": [typed("8"), typed("256")],
    })
    assert r.rc == 0, r.out
    a = r.answers()
    assert (a["gpus_per_node"], a["dataset"], a["max_prompt_length"]) == (2, "gsm8k", 256)
    assert r.asked.count("gpus_per_node") == 3 and r.asked.count("dataset") == 2
    assert "✗ refused gpus_per_node = abc: a whole number" in r.out and "✗ refused gpus_per_node = 99" in r.out
    assert "✗ refused dataset = my-data" in r.out and "[VI510]" in r.out


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_a_missing_data_file_is_refused_and_asked_again_without_it(tmp_path, monkeypatch):
    seen: list[str] = []
    real = Prompter.text

    def spy(self, message, default, validate, instruction=None):
        if message.startswith("dataset"):
            seen.append(default)
        return real(self, message, default, validate, instruction)

    monkeypatch.setattr(Prompter, "text", spy)
    r = drive(tmp_path, monkeypatch, {"dataset": [typed("mydata/nope.jsonl"), ENTER]})
    assert r.rc == 0, r.out
    assert "✗ refused dataset = mydata/nope.jsonl: no file 'mydata/nope.jsonl' here" in r.out
    assert "give the path of an existing" in r.out
    assert seen == ["gsm8k", "gsm8k"]  # asked again with the default, not the refused path
    assert r.answers()["dataset"] == "gsm8k"


def test_a_local_data_file_asks_for_its_columns(tmp_path, monkeypatch):
    # enough rows for the default 256 prompts per step after the validation hold-out (VI519)
    (tmp_path / "qa.jsonl").write_text("".join(f'{{"q": "{i}+1?", "a": "{i + 1}"}}\n' for i in range(600)))
    r = drive(tmp_path, monkeypatch, {"dataset": typed("qa.jsonl"), "question_field": typed("q"),
                                      "answer_field": typed("a")})
    assert r.rc == 0, r.out
    assert {"question_field", "answer_field", "answer_format"} <= set(r.asked)
    a = r.answers()
    # recorded relative to the bundle (runs/<name>/), so that a replay from another folder reads the same file
    assert a["dataset"] == "../../qa.jsonl"
    assert (a["question_field"], a["answer_field"], a["answer_format"]) == ("q", "a", "number")


@pytest.mark.slow
def test_an_unsized_model_asks_for_its_size(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {"gpus_per_node": typed("8"), "gpu_memory_gb": typed("80"),
                                      "model": typed("my-org/house-policy"), "model_params_b": typed("1.5")})
    assert r.rc == 0, r.out
    assert "model_params_b" in r.asked and r.answers()["model_params_b"] == 1.5
    assert "is not in the catalogue and its name carries no size" in r.out


# --- probes shape the defaults ----------------------------------------------------------------------------------


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_a_mig_gpu_defaults_to_one_slice_and_warns(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {"Write this bundle?": "quit" + ENTER}, gpu_probes(monkeypatch, mig_a100))
    assert r.rc == 1
    assert "VI741" in r.out and "MIG-partitioned" in r.out
    assert "1 node(s) × 1 GPUs (A100-SXM4-80GB MIG slice, 20.9 GB)" in r.out
    assert "topology" not in r.out.split("Roles")[1]  # no pairs to place


@pytest.mark.slow
def test_pcie_machine_uses_its_topology(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {"model": typed("Qwen/Qwen2.5-7B-Instruct"), "prompts_per_step": "64" + ENTER},
              gpu_probes(monkeypatch, pcie_two_numa))
    assert r.rc == 0, r.out
    assert "PCIe only (worst path: SYS)" in r.out and "VI745" in r.out
    assert "placed with this machine's GPU topology" in r.out
    assert r.answers()["gpus_per_node"] == 4 and r.answers()["gpu_memory_gb"] == 25.7


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_six_gpus_get_a_prompts_per_step_that_divides(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, other_gpus(6, 80))
    assert r.rc == 0, r.out
    assert r.answers()["prompts_per_step"] == 264
    assert "a multiple of 24 divides evenly over 6 GPU(s)" in r.out


def test_a_small_data_file_offers_only_batches_it_holds(tmp_path, monkeypatch):
    """200 rows (190 train after the 5% hold-out): 256 is not offered, and typed it is refused with VI519."""
    (tmp_path / "qa.jsonl").write_text("".join(f'{{"q": "{i}+1?", "a": "{i + 1}"}}\n' for i in range(200)))
    r = drive(tmp_path, monkeypatch, {"dataset": typed("qa.jsonl"), "question_field": typed("q"),
                                      "answer_field": typed("a"),
                                      "prompts_per_step": ["another" + ENTER, ENTER],
                                      "prompts_per_step/typed": typed("256")})
    assert r.rc == 0, r.out
    assert "✗ refused prompts_per_step = 256:" in r.out and "190 training row(s)" in r.out and "[VI519]" in r.out
    assert r.answers()["prompts_per_step"] <= 190


# --- leaving, and the output folder --------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["cluster", "algorithm", "prompts_per_step", "Bundle folder"])
def test_ctrl_c_anywhere_leaves_nothing_on_disk(tmp_path, monkeypatch, where):
    r = drive(tmp_path, monkeypatch, {"gpus_per_node": typed("8"), "gpu_memory_gb": typed("80"), where: CTRL_C})
    assert isinstance(r.error, KeyboardInterrupt) and r.rc is None
    assert r.files() == []


def test_end_of_input_is_an_interrupt(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    console = Console(file=io.StringIO())
    with create_pipe_input() as inp:
        inp.send_text(ENTER * 3)
        inp.close()
        with create_app_session(input=inp, output=DummyOutput()), pytest.raises(KeyboardInterrupt):
            run_wizard(console=console, probes=no_gpu_probes(), base_dir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_quit_at_the_summary_writes_nothing(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {"gpus_per_node": typed("8"), "gpu_memory_gb": typed("80"),
                                      "Write this bundle?": "quit" + ENTER})
    assert r.rc == 1 and "Nothing was written." in r.out and r.files() == []


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_an_occupied_folder_is_never_overwritten(tmp_path, monkeypatch):
    taken = tmp_path / "runs" / "grpo-qwen2.5-0.5b-instruct"
    taken.mkdir(parents=True)
    (taken / "keep.txt").write_text("mine")
    r = drive(tmp_path, monkeypatch, {"gpus_per_node": typed("8"), "gpu_memory_gb": typed("80"),
                                      "Bundle folder": CLEAR + "runs/grpo-qwen2.5-0.5b-instruct" + ENTER
                                      + CLEAR + "runs/grpo-qwen2.5-0.5b-instruct-2" + ENTER})
    assert r.rc == 0, r.out
    assert (taken / "keep.txt").read_text() == "mine" and sorted(p.name for p in taken.iterdir()) == ["keep.txt"]
    assert (tmp_path / "runs" / "grpo-qwen2.5-0.5b-instruct-2" / "verl-init.yaml").is_file()


def test_the_suggested_folder_is_a_free_one(tmp_path, monkeypatch):
    taken = tmp_path / "runs" / "grpo-qwen2.5-0.5b-instruct"
    taken.mkdir(parents=True)
    (taken / "keep.txt").write_text("mine")
    r = drive(tmp_path, monkeypatch, {"gpus_per_node": typed("8"), "gpu_memory_gb": typed("80")})
    assert r.rc == 0, r.out
    assert r.bundle() == tmp_path / "runs" / "grpo-qwen2.5-0.5b-instruct-2"
    assert "cd runs/grpo-qwen2.5-0.5b-instruct-2 &&" in r.out


def test_out_flag_on_a_non_empty_folder_is_explained_then_asked(tmp_path, monkeypatch):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("x")
    r = drive(tmp_path, monkeypatch, {"gpus_per_node": typed("8"), "gpu_memory_gb": typed("80"),
                                      "Bundle folder": typed("c")}, out="b")
    assert r.rc == 0, r.out
    assert "VI903" in r.out and (tmp_path / "c" / "verl_config.yaml").is_file()
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["x"]


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_out_and_force_replace_the_folder(tmp_path, monkeypatch):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("x")
    r = drive(tmp_path, monkeypatch, {"gpus_per_node": typed("8"), "gpu_memory_gb": typed("80")}, out="b", force=True)
    assert r.rc == 0 and (tmp_path / "b" / "verl_config.yaml").is_file() and (tmp_path / "b" / "x").read_text() == "x"  # --force keeps user files


def test_dry_run_writes_nothing(tmp_path, monkeypatch):
    r = drive(tmp_path, monkeypatch, {"gpus_per_node": typed("8"), "gpu_memory_gb": typed("80")}, dry_run=True)
    assert r.rc == 0 and "dry run; would write runs/grpo-qwen2.5-0.5b-instruct/" in r.out
    assert "verl_config.yaml (" in r.out and r.files() == []


def test_no_terminal_and_no_profile_prints_one_line_and_fails(tmp_path, cli_env):
    r = run_cli([], cwd=tmp_path, env=cli_env)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--profile" in lines[0] and "--answers" in lines[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.skipif(not HAS_VERL, reason="verl is not installed")
def test_in_process_bundles_pass_verl(tmp_path, monkeypatch, tiny_model):
    from wizard.verify.harness import verify_with_verl

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = drive(tmp_path, monkeypatch, {"algorithm": "ppo" + ENTER, **other_gpus(2, 80), "prompts_per_step": "64" + ENTER})
    assert r.rc == 0, r.out
    report = verify_with_verl(r.bundle(), model_dir=str(tiny_model))
    assert report.ok, report.summary()


def test_module_environment_is_offline():
    assert os.environ.get("HF_HUB_OFFLINE") == "1"


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.skipif(not HAS_VERL, reason="verl is not installed")
def test_verify_flag_runs_verl_on_the_written_bundle(tmp_path, monkeypatch, tiny_model, capsys):
    r = drive(tmp_path, monkeypatch, {**other_gpus(1, 16), "model": typed(str(tiny_model)), "advanced": "y",
                                      "max_prompt_length": typed("128"), "max_response_length": typed("64"),
                                      "prompts_per_step": "another" + ENTER, "prompts_per_step/typed": typed("8")},
              verify=True)
    assert r.rc == 0, r.out + capsys.readouterr().out
    assert "model_params_b" not in r.asked  # sized from the folder's config.json
    assert "accepted" in capsys.readouterr().out
