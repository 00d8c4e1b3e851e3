#!/usr/bin/env python3
"""The host cost of a MoE layer that runs its routed experts one by one (the transformers 4 training path), per
expert and pass: the measurement behind wizard.planner.steptime.EXPERT_LOOP_S.

    python benchmarks/expert_loop.py                       # the installed transformers
    PYTHONPATH=/path/to/transformers-4.57 python benchmarks/expert_loop.py

It builds a Qwen3-MoE sparse block with tiny widths (hidden 64, expert width 16: the arithmetic is negligible,
what is left is Python, dispatch and per-kernel cost), runs it on 1,024 tokens with 16 and with 128 experts, and
divides the difference by 112: the marginal seconds one more routed expert costs a forward, and a forward plus
backward. transformers 4.x loops over the experts its tokens hit (`for expert_idx in expert_hit`, each with a
`torch.where`, an index, three linears and an `index_add_`); transformers 5 runs them as grouped GEMMs, so the
same script shows what v5 removed. On a GPU each expert adds a host-device synchronisation (the `torch.where`)
and kernel launches on top of what this measures on the CPU: read it as a lower bound.

Measured on the project's CI machine (2-core AMD EPYC VM, torch 2.13 CPU), two runs: transformers 4.57.1 160-164 µs
forward and 305-318 µs forward + backward per expert; transformers 5.10.4 (eager experts) between −250 and +35 µs a
forward + backward over five runs on 2026-12-05: no loop, the same tokens over more experts cost no more. Each round
times both blocks back to back and the result is the median difference, so a busy machine's drift cancels.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch


def block(experts: int):
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    cfg = Qwen3MoeConfig(hidden_size=64, moe_intermediate_size=16, num_experts=experts, num_experts_per_tok=8,
                         norm_topk_prob=True)
    cfg._experts_implementation = "eager"  # transformers 5 only: the loop it keeps as its eager fallback
    return Qwen3MoeSparseMoeBlock(cfg)


def passes(experts: int, tokens: int = 1024):
    """A forward without gradients and a forward + backward of a block with `experts` routed experts."""
    torch.manual_seed(0)
    blk = block(experts)
    x = torch.randn(1, tokens, 64, requires_grad=True)

    def forward():
        out = blk(x)
        return out[0] if isinstance(out, tuple) else out

    def no_grad_forward():
        with torch.no_grad():
            forward()

    def forward_backward():
        forward().sum().backward()

    for _ in range(3):
        forward_backward()
    return no_grad_forward, forward_backward


def marginal(few_step, many_step, repeats: int = 41) -> float:
    """The median over `repeats` rounds of (many − few): each round times both back to back, so a busy machine's
    drift and spikes hit both sides of one difference instead of one side of a difference of medians."""
    diffs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        few_step()
        t1 = time.perf_counter()
        many_step()
        diffs.append((time.perf_counter() - t1) - (t1 - t0))
    return statistics.median(diffs)


def main() -> int:
    import transformers

    torch.set_num_threads(1)
    (few_fwd, few_both), (many_fwd, many_both) = passes(16), passes(128)
    fwd = marginal(few_fwd, many_fwd) / 112
    both = marginal(few_both, many_both) / 112
    print(json.dumps({"transformers": transformers.__version__, "forward_s_per_expert": round(fwd, 7),
                      "forward_backward_s_per_expert": round(both, 7),
                      "backward_s_per_expert": round(both - fwd, 7)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
