"""VI991 (warning): rollout log-probs from another distribution than the one verl's actor scores.

With algorithm.rollout_correction (rollout_is / rollout_rs, or bypass_mode, where the rollout's log-probs become the
old log-probs: trainer/ppo/rollout_corr_helper.py apply_bypass_mode) verl compares the actor's log-probs with those
vLLM returned for the sampled tokens. vLLM computes them as rollout.logprobs_mode says (verl passes it on,
workers/rollout/vllm_rollout/vllm_async_server.py:338; verl's default processed_logprobs, rollout.yaml:93):
`processed_*` after temperature and the top-k / top-p truncation, renormalised over the kept tokens; `raw_*` from
the raw logits, before temperature. verl's actor divides the logits by the rollout temperature and nothing else
(workers/engine/fsdp/transformer_impl.py:98-103; no top-k / top-p anywhere in its engines), over the full
vocabulary. So a training rollout that truncates (rollout.top_p < 1 or top_k > 0) with processed log-probs, or a
temperature other than 1 with raw ones, gives a ratio below 1 on every token at identical weights: the
importance weights and rejection masks correct a gap the weights never had (verl#6240, "keep sampling mask").
"""

from __future__ import annotations

from wizard.check.rules.context import R, Ctx, Facts

RC = "algorithm.rollout_correction"


def rule_rollout_logprob_contract(c: Ctx, f: Facts) -> None:
    if c.v(f"{R}.name") != "vllm":
        return
    uses = [k for k in (f"{RC}.rollout_is", f"{RC}.rollout_rs") if c.v(k) not in (None, "", False)]
    if c.v(f"{RC}.bypass_mode") is True:
        uses.append(f"{RC}.bypass_mode")
    mode = str(c.v(f"{R}.logprobs_mode") or "processed_logprobs")
    if not uses or c.unknown(f"{R}.top_p", f"{R}.top_k", f"{R}.temperature"):
        return
    top_p, top_k, temp = c.num(f"{R}.top_p"), c.num(f"{R}.top_k"), c.num(f"{R}.temperature")
    gaps = []
    if mode.startswith("processed"):
        if top_p is not None and top_p < 1:
            gaps.append(f"top_p={top_p:g}")
        if top_k is not None and top_k > 0:
            gaps.append(f"top_k={top_k:g}")
        keys = [f"{R}.top_p", f"{R}.top_k"]
        what = (f"vLLM returns {mode} after the {' and '.join(gaps)} truncation, renormalised over the kept tokens, "
                "while verl's actor scores the full vocabulary (only the temperature applied, "
                "workers/engine/fsdp/transformer_impl.py:98-103)")
        hint = (f"sample the training rollout untruncated ({R}.top_p=1.0, {R}.top_k=-1) and keep truncation in "
                f"{R}.val_kwargs")
    else:
        if temp is not None and temp != 1:
            gaps.append(f"temperature={temp:g}")
        keys = [f"{R}.temperature"]
        what = (f"vLLM returns {mode} from the logits before the temperature, while verl's actor divides them by "
                f"rollout.temperature={temp:g} (workers/engine/fsdp/transformer_impl.py:98-103)")
        hint = f"set {R}.logprobs_mode=processed_logprobs (verl's default)"
    if not gaps:
        return
    c.add("VI991", "warning", (*uses, *keys, f"{R}.logprobs_mode"),
          f"{', '.join(uses)} compares the actor's log-probs with the rollout's, but {what}: their ratio is below 1 "
          "on every token at identical weights, so the correction corrects a gap the weights never had (verl#6240)",
          hint)
