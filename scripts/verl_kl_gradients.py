#!/usr/bin/env python3
"""What gradient each `kl_loss_type` gives the actor's KL loss in expectation: writes
wizard/check/data/verl_kl_gradients.json, read by check's VI777.

    python scripts/verl_kl_gradients.py           # regenerate the table with the installed verl
    python scripts/verl_kl_gradients.py --check   # exit 1 when the committed table differs

With use_kl_loss=True verl adds kl_loss_coef × agg(kl_penalty(log_prob, ref_log_prob, kl_loss_type)) to the actor's
loss (workers/utils/losses.py:132-140) and backpropagates it, on tokens the policy itself sampled. The estimator is
only a regulariser if its expected gradient is the gradient of KL(pi || ref). verl's own kl_penalty
(trainer/ppo/core_algos.py) computes the per-token estimate here under autograd, for every token of a small
categorical policy; weighting each token's estimate by its (detached) probability gives the exact expected gradient
of sampling from the policy, compared with autograd's gradient of the exact KL(pi || ref):
- "zero gradient": the expected gradient is 0 (k1: E_pi[grad log pi] = 0): the KL term regularises nothing;
- "unbiased": it equals the true gradient;
- "biased": anything else (a gradient, not KL's);
- "raises: <verl's exception>": kl_penalty refuses it.
The names are those kl_penalty_forward compares its argument with, each also with the '+' suffix kl_penalty strips
(its straight-through variants). Each class must hold on every one of SEEDS policy/reference pairs.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_kl_gradients.json"
VOCAB = 50
SEEDS = (0, 1, 2)


def kl_type_names() -> tuple[list[str], str]:
    """The names kl_penalty_forward dispatches on (string constants it compares its `kl_penalty` argument with)."""
    import verl.trainer.ppo.core_algos as core_algos

    path = Path(core_algos.__file__)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "kl_penalty_forward")
    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "kl_penalty":
            for comp in node.comparators:
                for c in ast.walk(comp):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        names.add(c.value)
    return sorted(names), f"verl/trainer/ppo/core_algos.py:{fn.lineno}"


def expected_gradient(kind: str, seed: int):
    """(E_{token ~ pi}[grad kl_penalty(token)], grad KL(pi || ref)) for one random policy and reference."""
    import torch
    from verl.trainer.ppo.core_algos import kl_penalty

    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(VOCAB, generator=g, dtype=torch.float64).requires_grad_(True)
    ref = torch.log_softmax(torch.randn(VOCAB, generator=g, dtype=torch.float64), -1)
    logp = torch.log_softmax(logits, -1)
    probs = logp.exp().detach()  # the sampling distribution: tokens come from the policy, no gradient through it
    estimate = kl_penalty(logp, ref, kind)
    got = torch.autograd.grad((probs * estimate).sum(), logits)[0]
    logp = torch.log_softmax(logits, -1)
    true = torch.autograd.grad((logp.exp() * (logp - ref)).sum(), logits)[0]
    return got, true


def classify(kind: str) -> str:
    import torch

    verdicts = set()
    for seed in SEEDS:
        try:
            got, true = expected_gradient(kind, seed)
        except Exception as exc:  # noqa: BLE001 - what verl raises is the answer
            return "raises: " + " ".join(f"{type(exc).__name__}: {exc}".split())[:120].rstrip(": ")
        scale = float(true.norm())
        if float(got.norm()) <= 1e-9 * scale:
            verdicts.add("zero gradient")
        elif torch.allclose(got, true, rtol=1e-6, atol=1e-9 * scale):
            verdicts.add("unbiased")
        else:
            verdicts.add("biased")
    assert len(verdicts) == 1, (kind, verdicts)
    return verdicts.pop()


def build() -> dict:
    import warnings

    warnings.simplefilter("ignore")
    names, where = kl_type_names()
    types = {}
    for name in names:
        for kind in (name, name + "+"):
            types[kind] = classify(kind)
    return {"computed_by": "verl/trainer/ppo/core_algos.py kl_penalty (the names: " + where + " kl_penalty_forward)",
            "vocab": VOCAB, "seeds": list(SEEDS), "types": types}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
