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
forward and 305-318 µs forward + backward per expert; transformers 5.10.4 (eager experts) 1.4 µs and 4.1 µs.
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


def seconds(experts: int, tokens: int = 1024, repeats: int = 20) -> tuple[float, float]:
    torch.manual_seed(0)
    blk = block(experts)
    x = torch.randn(1, tokens, 64, requires_grad=True)

    def forward():
        out = blk(x)
        return out[0] if isinstance(out, tuple) else out

    def timed(step) -> float:
        """The median of `repeats` single runs: a busy machine's spikes land in the tails, not in the result."""
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            step()
            runs.append(time.perf_counter() - t0)
        return statistics.median(runs)

    def no_grad_forward():
        with torch.no_grad():
            forward()

    for _ in range(3):
        forward().sum().backward()
    return timed(no_grad_forward), timed(lambda: forward().sum().backward())


def main() -> int:
    import transformers

    torch.set_num_threads(1)
    few, many = seconds(16), seconds(128)
    fwd = (many[0] - few[0]) / 112
    both = (many[1] - few[1]) / 112
    print(json.dumps({"transformers": transformers.__version__, "forward_s_per_expert": round(fwd, 7),
                      "forward_backward_s_per_expert": round(both, 7),
                      "backward_s_per_expert": round(both - fwd, 7)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
