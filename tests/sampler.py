"""A seeded generator of answer sets over every public key (valid and invalid combinations)."""

from __future__ import annotations

import random
from typing import Any

CHOICES: dict[str, list[Any]] = {
    "gpus_per_node": [1, 2, 4, 8, 8],
    "gpu_memory_gb": [24, 40, 80, 80, 141],
    "algorithm": ["grpo", "ppo", "dapo", "rloo", "reinforce_plus_plus", "remax", "gspo"],
    "model": ["Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
              "Qwen/Qwen2.5-32B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "org/mystery-model"],
    "rollout_engine": ["vllm", "sglang"],
    "train_backend": ["fsdp", "fsdp", "fsdp2", "megatron"],
    "lora_rank": [0, 0, 0, 8, 32, 24],
    "dataset": ["gsm8k", "gsm8k", "math", "./data/train.jsonl", "./data/train.parquet"],
    "max_prompt_length": [256, 512, 1024],
    "max_response_length": [256, 1024, 4096],
    "prompts_per_step": [8, 16, 30, 32, 64, 96, 128, 256],
    "samples_per_prompt": [None, None, 1, 2, 3, 4, 5, 8, 16],
    "updates_per_step": [1, 2, 2, 3, 4, 8],
    "kl_coef": [None, None, 0, 0.001, 0.05],
    "temperature": [1.0, 0.7],
    "rollout_tp": [None, None, None, 1, 2, 4, 3],
    "gpu_memory_utilization": [None, None, 0.5, 0.85],
    "dynamic_batch": [None, None, True, False],
    "micro_batch_per_gpu": [None, None, None, 1, 2, 3],
    "max_tokens_per_gpu": [None, None, None, 512, 16384],
    "sequence_parallel": [1, 1, 1, 2],
    "megatron_tp": [None, None, 1, 2, 4],
    "megatron_pp": [None, None, 1, 2],
    "offload": [None, None, True, False],
    "logger": [["console"], ["console"], ["console", "tensorboard"], ["console", "wandb"]],
}


def sample(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    out: dict[str, Any] = {k: rng.choice(v) for k, v in CHOICES.items()}
    out["nnodes"] = rng.choice([1, 1, 1, 2, 4])
    out["cluster"] = "local" if out["nnodes"] == 1 and rng.random() < 0.6 else rng.choice(["ray", "kuberay", "slurm", "local"])
    reward = rng.choice(["rule", "rule", "rule", "function", "model"])
    out["reward"] = reward
    if reward == "function" and rng.random() < 0.9:
        out["reward_function"] = "./reward.py:compute_score"
    if reward == "model" and rng.random() < 0.9:
        out["reward_model"] = "org/reward-model-1.5B"
    if out["algorithm"] == "ppo" and rng.random() < 0.3:
        out["critic_model"] = "Qwen/Qwen2.5-0.5B-Instruct"
    if rng.random() < 0.5:
        out["total_steps"] = rng.choice([1, 100])
    else:
        out["epochs"] = rng.choice([1, 15])
    if rng.random() < 0.3:
        out["learning_rate"] = rng.choice([1e-6, 5e-6])
    if out["dataset"].endswith(".jsonl") and rng.random() < 0.5:
        out["val_files"] = "./data/val.parquet"  # verl's schema (a raw file is VI518)
    # Most sets respect the obvious couplings (so that many reach verl); some do not (so rules fire).
    def tidy() -> bool:
        return rng.random() < 0.85

    if tidy():
        if out["dynamic_batch"] is False:
            out["max_tokens_per_gpu"] = None
        else:
            out["micro_batch_per_gpu"] = None
    if tidy() and out["train_backend"] != "megatron":
        out["megatron_tp"] = out["megatron_pp"] = None
    if tidy() and out["train_backend"] == "megatron":
        out["sequence_parallel"], out["lora_rank"], out["dynamic_batch"] = 1, 0, False
        out["max_tokens_per_gpu"] = None
    if tidy() and out["algorithm"] in ("dapo", "gspo"):
        out["kl_coef"] = None
    if tidy() and out["algorithm"] == "dapo" and reward == "model":
        out["reward"] = "rule"
        out.pop("reward_model", None)
    if tidy():
        out["prompts_per_step"] = rng.choice([16, 32, 64, 128, 256])
        out["updates_per_step"] = rng.choice([1, 2, 4, 8])
        out["gpus_per_node"] = rng.choice([1, 2, 4, 8])
        out["rollout_tp"] = rng.choice([None, None, 1, 2])
        out["sequence_parallel"] = 1 if out["sequence_parallel"] > out["gpus_per_node"] else out["sequence_parallel"]
        if out["nnodes"] > 1 and out["cluster"] == "local":
            out["cluster"] = "ray"
        if out.get("max_tokens_per_gpu") == 512:
            out["max_tokens_per_gpu"] = None
        if out.get("micro_batch_per_gpu") == 3:
            out["micro_batch_per_gpu"] = 1
        if out["model"] == "Qwen/Qwen2.5-32B-Instruct" and out["gpus_per_node"] < 4:
            out["model"] = "Qwen/Qwen2.5-7B-Instruct"
        if out["lora_rank"] == 24:
            out["lora_rank"] = 32
    if out["cluster"] == "kuberay" and rng.random() < 0.85:  # else VI757: checkpoints lost with the pods
        out["checkpoint_pvc"] = "verl-checkpoints"
    # drawn last, from its own generator: the other keys of every seed stay as they were
    acc = random.Random(f"accelerator-{seed}")
    if acc.random() < 0.15:
        out["accelerator"] = acc.choice(["amd", "ascend"])
        if acc.random() < 0.85:  # else VI632: the default H100 is another vendor's
            out["gpu_type"], out["gpu_memory_gb"] = acc.choice([("MI300X", 192), ("MI250X", 64)]) \
                if out["accelerator"] == "amd" else ("Ascend910B", 64)
        if out["cluster"] == "kuberay" and acc.random() < 0.85:  # else VI633: no image for this accelerator
            out["image"] = "registry.example.com/verl:0.9.1"
    # Multi-turn tool calling, drawn from its own generator so the draws above stay what they were.
    agent_rng = random.Random(seed * 7919 + 1)
    if agent_rng.random() < 0.2:
        out["agent"] = "tool"
        out["max_turns"] = agent_rng.choice([None, None, 1, 2, 3, 5])
        if agent_rng.random() < 0.85:  # else VI562 / VI561 may fire (kuberay carries the tools in its ConfigMap)
            out["max_response_length"] = max(out["max_response_length"], 1024)
            out["dataset"] = "gsm8k" if out["dataset"] == "math" else out["dataset"]
    # A generative reward model (reward=genrm), from its own generator so the draws above stay what they were.
    judge_rng = random.Random(f"genrm-{seed}")
    if judge_rng.random() < 0.12:
        out["reward"] = "genrm"
        out.pop("reward_function", None)
        out["reward_model"] = judge_rng.choice(["Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
                                                "Qwen/Qwen2.5-7B-Instruct", "org/house-judge"])
        gpn = out["gpus_per_node"]
        out["judge_gpus"] = judge_rng.choice([0, 0, gpn, 2 * gpn, 3])  # 3: VI593 with 2, 4 or 8 GPUs per node
        out["judge_max_tokens"] = judge_rng.choice([None, 256, 2048])
        if out["judge_gpus"] and judge_rng.random() < 0.85:  # else VI592: a pool of its own needs more machines
            out["cluster"] = "ray" if out["cluster"] == "local" else out["cluster"]
    return {k: v for k, v in out.items() if v is not None}


def write_sample_files(folder) -> None:
    """The local files sampled answers name (./data/train.jsonl, ./data/train.parquet, ./data/val.parquet,
    ./reward.py), relative to the plan's base_dir `folder`: a missing one is VI539 / VI506."""
    import json
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    base = Path(folder)
    (base / "data").mkdir(parents=True, exist_ok=True)
    rows = [{"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"} for i in range(600)]
    (base / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    verl_rows = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": r["question"]}],
                  "ability": "math", "reward_model": {"style": "rule", "ground_truth": r["answer"][5:]}} for r in rows]
    for name in ("train.parquet", "val.parquet"):
        pq.write_table(pa.Table.from_pylist(verl_rows), base / "data" / name)
    (base / "reward.py").write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n")
