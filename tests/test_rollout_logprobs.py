"""VI991: rollout correction comparing the actor's log-probs with vLLM log-probs of another distribution (real case
verl#6240: a training rollout at top_p 0.95 / top_k 20 with token-level IS in bypass mode).

The oracle on the trainer's side is verl's own code: the FSDP engine's temperature scaling and verl's
logprobs_from_logits, over the full vocabulary (and no top-k / top-p anywhere in verl's engines, read with ast). The
rollout's side is vLLM's definition of its logprobs modes, written out here with torch (vLLM is not installed on this
machine): processed_logprobs are taken after temperature and the top-k / top-p truncation, renormalised over the kept
tokens; raw_logprobs from the logits before any processing. At identical weights the two sides agree only without
truncation (processed) or at temperature 1 (raw), which is what the rule says.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wizard.check.lint import check

R, RC = "actor_rollout_ref.rollout", "algorithm.rollout_correction"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen3-8B", f"{R}.name=vllm",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
        f"{R}.calculate_log_probs=True", f"{RC}.rollout_is=token"]


def _vllm_logprobs(logits, tokens, temperature: float, top_k: int, top_p: float, mode: str):
    """vLLM's returned log-prob of each sampled token, per its logprobs_mode (its sampler's order: temperature, then
    top-k, then top-p, then the log-softmax of what is kept)."""
    import torch

    if mode == "raw_logprobs":
        return torch.log_softmax(logits.float(), -1).gather(-1, tokens[:, None])[:, 0]
    x = logits.float() / temperature
    if top_k > 0:
        kth = x.topk(top_k, -1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p < 1:
        srt, idx = x.sort(-1, descending=True)
        cum = srt.softmax(-1).cumsum(-1)
        drop = cum - srt.softmax(-1) > top_p
        x = x.masked_fill(drop.scatter(-1, idx, drop), float("-inf"))
    return torch.log_softmax(x, -1).gather(-1, tokens[:, None])[:, 0]


def _ratio(temperature: float, top_k: int, top_p: float, mode: str) -> float:
    import torch
    from verl.utils.torch_functional import logprobs_from_logits
    from verl.workers.engine.fsdp.transformer_impl import _scale_logits_by_temperature

    torch.manual_seed(0)
    logits = torch.randn(512, 1000) * 3
    tokens = logits.argmax(-1)  # tokens every truncation keeps
    t = torch.tensor(temperature)
    actor = logprobs_from_logits(_scale_logits_by_temperature(logits, t, is_unit_temperature=temperature == 1.0), tokens)
    rollout = _vllm_logprobs(logits, tokens, temperature, top_k, top_p, mode)
    return float((actor - rollout).exp().mean())


@pytest.mark.verl
def test_verls_actor_and_vllm_agree_only_without_truncation():
    assert _ratio(0.6, -1, 1.0, "processed_logprobs") == pytest.approx(1.0, abs=1e-5)
    assert _ratio(0.6, 20, 0.95, "processed_logprobs") < 0.99  # biased at identical weights
    assert _ratio(1.0, -1, 1.0, "raw_logprobs") == pytest.approx(1.0, abs=1e-5)
    assert abs(_ratio(0.6, -1, 1.0, "raw_logprobs") - 1) > 0.01


@pytest.mark.verl
def test_verls_engines_never_truncate_and_verl_hands_vllm_the_mode():
    import verl

    root = Path(verl.__file__).parent
    reads = [f"{p.name}:{n.lineno}" for p in (root / "workers/engine").rglob("*.py")
             for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
             if isinstance(n, ast.Attribute) and n.attr in ("top_k", "top_p")]
    assert not reads
    server = (root / "workers/rollout/vllm_rollout/vllm_async_server.py").read_text(encoding="utf-8")
    assert '"logprobs_mode": self.config.logprobs_mode' in server


def _vi991(*extra: str):
    return [f.problem for f in check(None, [*BASE, *extra]).findings if f.problem.rule == "VI991"]


@pytest.mark.slow
def test_check_warns_on_each_mismatch():
    [hit] = _vi991(f"{R}.top_p=0.95", f"{R}.top_k=20", f"{R}.temperature=0.6")
    assert hit.severity == "warning" and "top_p=0.95 and top_k=20" in hit.message and "top_p=1.0" in hit.hint
    [raw] = _vi991(f"{R}.logprobs_mode=raw_logprobs", f"{R}.temperature=0.6")
    assert "temperature=0.6" in raw.message and "processed_logprobs" in raw.hint
    [bypass] = _vi991(f"{RC}.rollout_is=null", f"{RC}.bypass_mode=true", f"{R}.top_p=0.9")
    assert "bypass_mode" in bypass.message


@pytest.mark.parametrize("extra", [
    (f"{R}.top_p=1.0", f"{R}.top_k=-1", f"{R}.temperature=0.6"),  # untruncated: the two sides agree
    (f"{R}.top_p=0.95", f"{RC}.rollout_is=null"),  # no correction reads the rollout's log-probs
    (f"{R}.logprobs_mode=raw_logprobs", f"{R}.temperature=1.0", f"{R}.top_p=0.95"),  # raw at temperature 1
    (f"{R}.name=sglang", f"{R}.top_p=0.95"),  # verl hands logprobs_mode to vLLM only
])
def test_check_is_silent_where_the_sides_agree(extra):
    assert not _vi991(*extra)
