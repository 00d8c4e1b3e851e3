"""`python -m wizard.cli.app` in a real pseudo-terminal (pexpect), typed as a person types.

Paths: every default accepted (≤ 12 prompts), GRPO on one node (a fake 8×H100 NVML on the subprocess's
PYTHONPATH prefills the hardware), 8×H100 nodes picked on a machine without GPUs, PPO with a critic, KubeRay,
70B PPO on KubeRay, answers refused at once (a model that does not fit, a missing data file, a batch a small data
file cannot hold), LoRA when all weights do not fit, multi-turn tool RL, a vision-language model; plus Ctrl-C. The bundles these sessions write go through
verl's own validation (`verify_with_verl`, with a tiny local model standing in for hub models).

Each prompt is recognised by its field name (`? <field> — <description>`); `Tty.run` answers the prompts in
the order they come, with the keys the test gives for a field (Enter otherwise), and records the order. A
refused answer ("✗ refused") means the next prompt for that field is a new one.
The environment points RAY_API_SERVER_ADDRESS at a closed port, so no Ray on this machine changes the flow.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import HAS_VERL, ROOT
from test_probe import write_fake_nvml

pexpect = pytest.importorskip("pexpect")
pytestmark = pytest.mark.slow

ENTER = "\r"
CLEAR = "\x15"  # Ctrl-U
CTRL_C = "\x03"
ESC = r"(?:\x1b\[[0-9;?]*[A-Za-z])*"
PROMPT = re.compile(r"\?" + ESC + r"\s*([a-z][a-z0-9_]*) —")
REFUSED = "✗ refused"
TIMEOUT = 60


def typed(text: str) -> str:
    return CLEAR + text + ENTER


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Tty:
    def __init__(self, cwd: Path, machine: str = "no_driver", args: tuple[str, ...] = ()):
        fake = write_fake_nvml(cwd.parent / f"{cwd.name}-fake-nvml")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("RAY_", "NCCL_")) and k not in ("CUDA_VISIBLE_DEVICES", "COLUMNS", "LINES")}
        env.update(PYTHONPATH=f"{fake}{os.pathsep}{ROOT}", VI_FAKE_NVML=machine, HF_HUB_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1", TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1",
                   RAY_API_SERVER_ADDRESS=f"http://127.0.0.1:{closed_port()}")
        self.log = open(cwd.parent / f"{cwd.name}-tty.log", "w", encoding="utf-8")  # noqa: SIM115
        self.child = pexpect.spawn(sys.executable, ["-m", "wizard.cli.app", *args], cwd=str(cwd), env=env,
                                   dimensions=(50, 220), encoding="utf-8", timeout=TIMEOUT)
        self.child.logfile_read = self.log
        self.asked: list[str] = []
        self.cwd = cwd

    def run(self, script: dict[str, Any], until: str = r"Write this bundle\?", stop_at: str | None = None) -> None:
        """Answer prompts in order (the script's keys for a field, else Enter) until `until` shows, or until
        the prompt for field `stop_at` shows (left unanswered). A tuple of keys is sent piece by piece, waiting
        for the pattern between pieces: (keys, pattern, keys, ...)."""
        queues = {k: list(v) if isinstance(v, list) else [v] for k, v in script.items()}
        last: str | None = None
        while True:
            i = self.child.expect([PROMPT, REFUSED, until, pexpect.EOF])
            if i == 1:
                last = None  # the field is asked again: its next prompt is a new one
                continue
            if i == 2:
                return
            if i == 3:
                raise AssertionError(f"the wizard ended early after {self.asked}:\n{self.transcript()[-3000:]}")
            field = self.child.match.group(1)
            if field == last:  # the same prompt redrawn (or echoed with its answer)
                continue
            if field == stop_at:
                return
            self.asked.append(field)
            last = field
            queue = queues.get(field)
            keys = queue.pop(0) if queue else ENTER
            for k, piece in enumerate(keys if isinstance(keys, tuple) else (keys,)):
                if k % 2:
                    self.child.expect(piece)
                else:
                    self.child.send(piece)
            if len(self.asked) > 120:
                raise AssertionError(f"the questionnaire does not end: {self.asked[-20:]}")

    def write(self, folder_keys: str = ENTER) -> int:
        self.child.send(ENTER)  # "write the bundle" is the default action
        self.child.expect("Bundle folder")
        self.child.send(folder_keys)
        self.child.expect("Wrote ")
        return self.finish()

    def expect(self, pattern: str) -> None:
        self.child.expect(pattern)

    def finish(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        self.log.close()
        return int(self.child.exitstatus if self.child.exitstatus is not None else 128 + (self.child.signalstatus or 0))

    def transcript(self) -> str:
        if not self.log.closed:
            self.log.flush()
        text = Path(self.log.name).read_text(encoding="utf-8")
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)

    def flat(self) -> str:
        """The transcript with every run of white space as one space (long lines wrap in the terminal)."""
        return re.sub(r"\s+", " ", self.transcript())

    def prompts(self) -> int:
        """Prompts answered so far, "Write this bundle?" and "Bundle folder" included once written."""
        return len(self.asked) + 2

    def answers(self) -> dict[str, Any]:
        return yaml.safe_load((self.bundle() / "verl-init.yaml").read_text())["answers"]

    def bundle(self) -> Path:
        (found,) = [p.parent for p in self.cwd.glob("runs/*/verl-init.yaml")]
        return found


def verify(bundle: Path, tiny_model: Path) -> None:
    if not HAS_VERL:
        pytest.skip("verl is not installed")
    from wizard.verify.harness import verify_with_verl

    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()


@pytest.fixture()
def here(tmp_path: Path) -> Path:
    cwd = tmp_path / "work"
    cwd.mkdir()
    return cwd


def test_grpo_on_one_node(here, tiny_model):
    tty = Tty(here, machine="h100_nvswitch")
    tty.expect("8× NVIDIA H100 80GB HBM3")
    tty.run({"prompts_per_step": "128" + ENTER, "advanced": "y", "total_steps": typed("100")})
    assert tty.write() == 0, tty.transcript()[-3000:]
    text = tty.transcript()
    assert tty.asked[:2] == ["cluster", "gpus"]  # "this machine" is the default: its GPUs are read, not asked
    assert not {"gpus_per_node", "gpu_memory_gb", "gpu_type", "nnodes"} & set(tty.asked)
    assert re.search(r"gpus_per_node = 8, gpu_memory_gb = 85.5, gpu_type = H100 80GB HBM3, host_memory_gb = [0-9.]+ "
                     r"\(probed\)", text), text
    assert "placed with this machine's GPU topology" in text
    assert "cd runs/grpo-qwen2.5-0.5b-instruct && python3 data/prepare_data.py && ./run.sh" in text
    a = yaml.safe_load((tty.bundle() / "verl-init.yaml").read_text())["answers"]
    assert (a["gpus_per_node"], a["gpu_memory_gb"], a["prompts_per_step"], a["total_steps"]) == (8, 85.5, 128, 100)
    cfg = yaml.safe_load((tty.bundle() / "verl_config.yaml").read_text())
    assert cfg["trainer"]["n_gpus_per_node"] == 8 and cfg["data"]["train_batch_size"] == 128
    verify(tty.bundle(), tiny_model)


def test_ppo_with_a_critic(here, tiny_model):
    tty = Tty(here)
    tty.expect("no NVIDIA GPU found")
    tty.run({"gpus": "other" + ENTER, "gpus_per_node": typed("4"), "gpu_memory_gb": typed("80"),
             "algorithm": "ppo" + ENTER, "model": typed("Qwen/Qwen2.5-1.5B-Instruct"), "prompts_per_step": "64" + ENTER,
             "advanced": "y", "experiment_name": typed("ppo-critic")})
    assert tty.write() == 0, tty.transcript()[-3000:]
    assert "critic_model" in tty.asked
    text = tty.transcript()
    assert "critic" in text.split("Roles")[1].split("Memory per GPU")[0]
    bundle = tty.bundle()
    assert bundle.name == "ppo-critic"
    cfg = yaml.safe_load((bundle / "verl_config.yaml").read_text())
    assert cfg["algorithm"]["adv_estimator"] == "gae"
    assert cfg["critic"]["model"]["path"] == "Qwen/Qwen2.5-1.5B-Instruct"  # its own entry, from the policy
    verify(bundle, tiny_model)


def test_kuberay(here, tiny_model):
    tty = Tty(here)
    tty.run({"cluster": "kuberay" + ENTER, "nnodes": typed("2"), "gpus": "A100 80" + ENTER, "advanced": "y",
             "host_memory_gb": typed("1000"), "model": typed("Qwen/Qwen2.5-7B-Instruct"),
             "k8s_namespace": typed("rl-team"), "shared_pvc": typed("verl-data"), "shm_size_gb": typed("64"),
             "logger": " " + "\x1b[B" + " " + ENTER})
    assert tty.write() == 0, tty.transcript()[-3000:]
    for q in ("nnodes", "image", "k8s_namespace", "k8s_secret", "shared_pvc", "shm_size_gb"):
        assert q in tty.asked
    assert not [q for q in tty.asked if q.startswith("slurm_")]
    bundle = tty.bundle()
    a = yaml.safe_load((bundle / "verl-init.yaml").read_text())["answers"]
    assert a["logger"] == ["wandb"] and a["cluster"] == "kuberay" and a["k8s_namespace"] == "rl-team"
    job = yaml.safe_load((bundle / "k8s" / "rayjob.yaml").read_text())
    assert job["kind"] == "RayJob" and job["metadata"]["namespace"] == "rl-team"
    assert "kubectl -n rl-team apply -f k8s/configmap.yaml -f k8s/rayjob.yaml" in tty.transcript()
    from wizard.env.cluster import load_expected, manifest_problems

    exp, problems = load_expected(bundle)
    assert not problems and (exp.nnodes, exp.gpus_per_node) == (2, 8)
    assert [p for p in manifest_problems(job, 2, 8) if p.severity == "error"] == []
    verify(bundle, tiny_model)


def test_a_model_that_does_not_fit_is_refused_at_once(here, tiny_model):
    tty = Tty(here)
    tty.run({"gpus": "other" + ENTER, "gpus_per_node": typed("1"), "gpu_memory_gb": typed("24"),
             "algorithm": "ppo" + ENTER,
             "model": [typed("Qwen/Qwen2.5-7B-Instruct"), typed("Qwen/Qwen2.5-0.5B-Instruct")],
             "prompts_per_step": "32" + ENTER})
    assert tty.write() == 0, tty.transcript()[-3000:]
    text = tty.flat()
    assert "verl-init cannot plan these answers" not in text  # nothing fails late
    assert re.search(r"✗ refused model = Qwen/Qwen2.5-7B-Instruct: Qwen/Qwen2.5-7B-Instruct \(7.6B, ppo\) "
                     r"does not fit 1×1 × 24 GB GPUs.*— needs ≥ .*or a model of ≤ [0-9.]+B parameters", text), text
    assert tty.asked.count("model") == 2 and tty.asked.count("algorithm") == 1 and "lora_rank" not in tty.asked
    a = tty.answers()
    assert a["model"] == "Qwen/Qwen2.5-0.5B-Instruct" and a["algorithm"] == "ppo"
    verify(tty.bundle(), tiny_model)


def test_every_default_takes_at_most_twelve_prompts(here, tiny_model):
    tty = Tty(here)
    tty.expect("no NVIDIA GPU found")
    tty.run({})
    assert tty.write() == 0, tty.transcript()[-3000:]
    assert tty.prompts() <= 12, tty.asked
    assert "✗ refused" not in tty.transcript() and "verl-init cannot plan" not in tty.transcript()
    verify(tty.bundle(), tiny_model)


def test_gpu_nodes_picked_on_a_machine_without_gpus(here, tiny_model):
    """Issue 14: this machine's host memory was recorded as the 8×H100 nodes' (probed), and 7B GRPO was refused
    with VI605 ("137 GB of host memory per node"). Picked nodes say nothing about host memory."""
    tty = Tty(here)
    tty.expect("no NVIDIA GPU found")
    tty.run({"gpus": "8x H100" + ENTER, "model": typed("Qwen/Qwen2.5-7B-Instruct")})
    assert tty.write() == 0, tty.transcript()[-3000:]
    text = tty.transcript()
    assert "VI605" not in text and "✗ refused" not in text and "(probed)" not in text
    a = tty.answers()
    assert "host_memory_gb" not in a and (a["gpus_per_node"], a["gpu_memory_gb"], a["gpu_type"]) == (8, 80, "H100")
    assert a["model"] == "Qwen/Qwen2.5-7B-Instruct"
    verify(tty.bundle(), tiny_model)


def test_a_missing_data_file_is_refused_and_asked_again_empty_of_it(here):
    tty = Tty(here)
    # the second answer is a bare Enter: were the refused path pre-filled, it would be refused again
    tty.run({"dataset": [typed("mydata/nope.jsonl"), ENTER]})
    assert tty.write() == 0, tty.transcript()[-3000:]
    text = tty.flat()
    assert "✗ refused dataset = mydata/nope.jsonl: no file 'mydata/nope.jsonl' here" in text
    assert "give the path of an existing .jsonl/.json/.csv/.parquet file" in text
    assert tty.asked.count("dataset") == 2 and tty.answers()["dataset"] == "gsm8k"


def test_a_small_data_file_and_a_batch_it_cannot_hold(here, tiny_model):
    """200 rows, 190 for training: 256 prompts per step is not offered, and typed it is refused with VI519."""
    (here / "qa.jsonl").write_text("".join(f'{{"q": "What is {i} + 1?", "a": "{i + 1}"}}\n' for i in range(200)))
    tty = Tty(here)
    tty.run({"dataset": typed("qa.jsonl"), "question_field": typed("q"), "answer_field": typed("a"),
             "prompts_per_step": [("another" + ENTER, r"type the number", typed("256")), ENTER]})
    assert tty.write() == 0, tty.transcript()[-3000:]
    text = tty.flat()
    assert "✗ refused prompts_per_step = 256:" in text and "190 training row(s)" in text and "[VI519]" in text
    a = tty.answers()
    assert a["prompts_per_step"] <= 190 and tty.asked.count("prompts_per_step") == 2
    verify(tty.bundle(), tiny_model)


def test_lora_ranks_offered_when_all_weights_do_not_fit(here, tiny_model):
    tty = Tty(here)
    tty.run({"gpus": "other" + ENTER, "gpus_per_node": typed("4"), "gpu_memory_gb": typed("24"),
             "model": typed("Qwen/Qwen2.5-7B-Instruct"), "lora_rank": "0" + ENTER})
    assert tty.write() == 0, tty.transcript()[-3000:]
    text = tty.flat()
    m = re.search(r"training all weights does not fit these GPUs; LoRA ranks that fit: ([0-9, ]+)", text)
    assert m, text
    ranks = [int(r) for r in m.group(1).split(",")]
    assert 0 not in ranks and 32 in ranks
    rank = tty.answers()["lora_rank"]
    assert rank in ranks and rank != 0  # "0" matches no offered rank
    assert tty.asked.index("lora_rank") == tty.asked.index("model") + 1  # asked right after the model
    verify(tty.bundle(), tiny_model)


def test_70b_ppo_on_kuberay_asks_only_what_it_needs(here, tiny_model):
    tty = Tty(here)
    tty.run({"cluster": "kuberay" + ENTER, "nnodes": typed("4"), "algorithm": "ppo" + ENTER,
             "model": typed("Qwen/Qwen2.5-72B-Instruct"), "shared_pvc": typed("verl-data")})
    assert tty.write() == 0, tty.transcript()[-3000:]
    assert tty.prompts() <= 12, tty.asked  # 34 before one question per decision
    assert not {"image", "k8s_namespace", "k8s_secret", "shm_size_gb", "critic_model", "logger"} & set(tty.asked)
    a = tty.answers()
    assert (a["cluster"], a["nnodes"], a["algorithm"], a["shared_pvc"]) == ("kuberay", 4, "ppo", "verl-data")
    verify(tty.bundle(), tiny_model)


@pytest.mark.parametrize("cluster", ["local", "kuberay"])
def test_tool_rl_walk(here, tiny_model, cluster):
    """Multi-turn tool calling chosen under the advanced settings: the tool and turns follow, checked as answered
    (16 turns do not fit max_response_length=2048: refused with VI562 and its fix), and verl accepts the bundle. On
    KubeRay the ConfigMap carries the tool files to every pod."""
    script: dict[str, Any] = {"gpus": "other" + ENTER, "gpus_per_node": typed("2"), "gpu_memory_gb": typed("80"),
                              "prompts_per_step": "64" + ENTER, "advanced": "y", "max_response_length": typed("2048"),
                              "agent": "tool" + ENTER, "max_turns": [typed("16"), typed("3")]}
    if cluster == "kuberay":
        script.update(cluster="kuberay" + ENTER, nnodes=typed("2"))
    tty = Tty(here)
    tty.run(script)
    assert tty.write() == 0, tty.transcript()[-3000:]
    assert tty.asked.index("agent") < tty.asked.index("tool") < tty.asked.index("max_turns")
    text = tty.flat()
    assert "max_response_length=2048 covers every turn" in text
    assert "✗ refused max_turns = 16:" in text and "[VI562]" in text
    a = tty.answers()
    assert (a["agent"], a["max_turns"], a["cluster"]) == ("tool", 3, cluster) and "tool" not in a  # gsm8k
    bundle = tty.bundle()
    cfg = yaml.safe_load((bundle / "verl_config.yaml").read_text())
    assert cfg["actor_rollout_ref"]["rollout"]["multi_turn"]["tool_config_path"] == "verl_init_tools/tool_config.yaml"
    assert (bundle / "verl_init_tools" / "gsm8k_tool.py").is_file()
    if cluster == "kuberay":
        from wizard.env.cluster import bundle_problems, load_expected

        cm = yaml.safe_load((bundle / "k8s" / "configmap.yaml").read_text())
        assert cm["data"]["verl_init_tools.gsm8k_tool.py"] == (bundle / "verl_init_tools" / "gsm8k_tool.py").read_text()
        assert bundle_problems(load_expected(bundle)[0]) == []
    verify(bundle, tiny_model)


def test_vlm_walk(here, tiny_model):
    """A vision-language model on geometry3k: the image questions are asked (and only then); the image budget offered
    fits max_prompt_length, typed bigger it is refused with VI570; verl accepts the bundle."""
    tty = Tty(here)
    tty.run({"model": typed("Qwen/Qwen2.5-VL-3B-Instruct"), "dataset": typed("geo3k"),
             "images_per_prompt": typed("1"),
             "image_max_pixels": [("another" + ENTER, r"\(type th", typed("1003520")), ENTER],
             "prompts_per_step": "64" + ENTER, "advanced": "y", "freeze_vision_tower": ENTER})
    assert tty.write() == 0, tty.transcript()[-3000:]
    for q in ("images_per_prompt", "image_max_pixels", "freeze_vision_tower"):
        assert q in tty.asked
    assert "image_key" not in tty.asked  # geo3k's images column is written by data/prepare_data.py
    text = tty.flat()
    assert "✗ refused image_max_pixels = 1003520:" in text and "[VI570]" in text
    a = tty.answers()
    assert a["model"] == "Qwen/Qwen2.5-VL-3B-Instruct" and a["image_max_pixels"] == 256 * 28 * 28
    cfg = yaml.safe_load((tty.bundle() / "verl_config.yaml").read_text())
    assert cfg["data"]["image_key"] == "images"
    verify(tty.bundle(), tiny_model)


def test_ctrl_c_exits_non_zero_and_writes_nothing(here):
    tty = Tty(here)
    tty.run({}, stop_at="algorithm")
    tty.child.send(CTRL_C)
    tty.expect("interrupted; nothing was written")
    assert tty.finish() == 130
    assert list(here.iterdir()) == []


def test_ctrl_c_at_the_last_prompt_writes_nothing(here):
    tty = Tty(here)
    tty.run({"gpus_per_node": typed("8"), "gpu_memory_gb": typed("80")})
    tty.child.send(ENTER)
    tty.expect("Bundle folder")
    tty.child.send(CTRL_C)
    tty.expect("interrupted; nothing was written")
    assert tty.finish() == 130
    assert list(here.iterdir()) == []


def test_local_chat_parquet_walk(here, tiny_model):
    """Issue 27: a local chat-format parquet (system + user messages, an answer column). The wizard offers its chat
    column, the bundle's prepared rows carry the original messages (system role kept) in verl's RLHFDataset, and
    PLAN.md shows the first prompt as the model will see it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    system = "You are a careful math tutor."
    rows = [{"prompt": [{"role": "system", "content": system}, {"role": "user", "content": f"What is {i} + {i}?"}],
             "answer": str(2 * i)} for i in range(200)]
    pq.write_table(pa.Table.from_pylist(rows), here / "chat.parquet")
    tty = Tty(here)
    tty.run({"dataset": typed("chat.parquet"), "prompts_per_step": [("another" + ENTER, r"type the number",
                                                                      typed("16")), ENTER]})
    assert tty.write() == 0, tty.transcript()[-3000:]
    assert "messages_field" in tty.asked and "question_field" not in tty.asked
    a = tty.answers()
    assert a["messages_field"] == "prompt" and a["answer_field"] == "answer"
    plan_md = (tty.bundle() / "PLAN.md").read_text()
    assert f"<system> {system}" in plan_md and "Ground truth the scorer gets: `0`" in plan_md
    import subprocess

    r = subprocess.run([sys.executable, str(tty.bundle() / "data" / "prepare_data.py")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    if not HAS_VERL:
        return
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": True,
                            "filter_overlong_prompts_workers": 1, "cache_dir": str(here / "cache")})
    ds = RLHFDataset([str(tty.bundle() / "data" / "train.parquet")], AutoTokenizer.from_pretrained(str(tiny_model)), cfg)
    assert ds[0]["raw_prompt"][0] == {"role": "system", "content": system}
    assert ds[0]["raw_prompt"][1]["role"] == "user"
