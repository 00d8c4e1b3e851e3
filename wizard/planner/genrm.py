"""A generative reward model (reward=genrm): an LLM judge served by verl's reward loop (VI590-VI596).

`b` is the planner's working state (wizard.planner.state.Build); this module does not import the pipeline (the
import graph has no cycle), so it is typed loosely here.

verl 0.9.1 facts, each with its source (paths under the installed `verl/`):

- One reward model config serves a classifier and a judge alike: `reward.reward_model.{enable, model_path, rollout.*}`
  (trainer/config/reward/reward.yaml). The RewardLoopManager starts the judge as rollout replicas of
  `rollout.name` (vllm or sglang), TP×DP×PP GPUs each, behind one HTTP router (experimental/reward_loop/
  reward_model.py:48-103); `world_size // replica size` replicas, none is an assert: "Not enough GPUs to run the
  reward model" (reward_model.py:60-64).
- A judge needs `reward.custom_reward_function`: without one the worker treats the model as a classifier and posts to
  /classify (reward_loop.py:147-156, "genrm must set custom_reward_function"). With one, the reward manager calls it
  with `reward_router_address` and `reward_model_tokenizer` (reward_manager/naive.py:56-63); the function posts an
  OpenAI chat request to `http://{reward_router_address}/v1/chat/completions` and parses the verdict
  (verl's docs/advance/reward_loop.rst "Generative Reward Model"). The bundle ships reward/genrm_fn.py.
- Placement (trainer/ppo/v1/trainer_base.py:823-835): `enable_resource_pool=False` puts the judge in the policy's
  global pool (its engine sleeps beside the rollout engine and wakes after rollout, reward_loop.py:332-360);
  `enable_resource_pool=True` makes a `reward_pool` of `n_gpus_per_node × nnodes` more GPUs, which Ray must have
  (single_controller/ray/base.py:226-242: "Total available GPUs ... less than total desired GPUs").
- DAPO's group filter needs the reward at sampling time: a colocated reward model is refused
  (trainer_base.py:195-203); a judge in its own pool scores while rollout runs.
- The judge's engine reads `rollout.max_model_len` (null: the model's max_position_embeddings, vllm_async_server.py:
  1104-1110), so the plan sets it to the judge's prompt + verdict.
"""

from __future__ import annotations

from typing import Any, Optional

from wizard.planner.memory import ENGINE_OVERHEAD_GIB, GIB, reward_engine_share, reward_layout
from wizard.planner.shapes import ModelShape, resolve_shape
from wizard.verlspec.hardware import capacity_gib

# The bundle's judge function (bundle-relative: run.sh starts verl in the bundle folder).
BUNDLE_GENRM_FN = "reward/genrm_fn.py"
BUNDLE_GENRM_NAME = "compute_score"
# Tokens of the judge prompt's own words around the question, reference answer and response (reward/genrm_fn.py's
# JUDGE_PROMPT is ~120 tokens, plus the judge's chat template).
JUDGE_TEMPLATE_TOKENS = 256
# A judge with GPUs of its own: its engine may take most of each card (nothing else lives there); verl's own genrm
# test uses 0.9 (tests/experimental/reward_loop/test_reward_model_genrm.py), 0.85 leaves the band's headroom.
POOL_GMU = 0.85
# The share of the card a judge colocated with the policy may not exceed (as reward=model's classifier: 0.3).
COLOCATED_SHARE = 0.3
# A colocated judge needing more than this share of each card (at the widest TP inside a node) is refused: the policy's
# engine and training state could not fit beside it.
COLOCATED_MAX = 0.5
# Seconds the judge function waits for one verdict before scoring 0 (every outside read is bounded).
JUDGE_TIMEOUT_S = 300
# Greedy verdicts: the same response gets the same score.
JUDGE_TEMPERATURE = 0.0


def judge_lengths(a: Any) -> tuple[int, int]:
    """(prompt, verdict) tokens of one judge request: the policy's whole sequence inside the judge prompt, then the
    judge's answer."""
    return a.max_prompt_length + a.max_response_length + JUDGE_TEMPLATE_TOKENS, a.judge_max_tokens


def judge_seq(a: Any) -> int:
    p, r = judge_lengths(a)
    return p + r


def pool_nodes(a: Any) -> tuple[int, int]:
    """(nnodes, GPUs per node) of the judge's own pool: whole nodes like the policy's; (0, 0) when colocated or when
    judge_gpus does not fill whole nodes (refused by VI593)."""
    return pool_of(a.judge_gpus if a.reward == "genrm" else 0, a.gpus_per_node)


def pool_of(n: int, gpn: int) -> tuple[int, int]:
    """(nnodes, GPUs per node) of a judge pool of `n` GPUs on nodes of `gpn` GPUs (see pool_nodes)."""
    if n <= 0 or gpn <= 0:
        return 0, 0
    return (n // gpn, gpn) if n % gpn == 0 else (0, 0)


def extra_nodes(a: Any) -> int:
    """Nodes the cluster needs beyond the policy's nnodes: the judge's own pool (on nodes of its own)."""
    return pool_nodes(a)[0]


def shape(a: Any) -> Optional[ModelShape]:
    if a.reward != "genrm" or not a.reward_model:
        return None
    try:
        return resolve_shape(a.reward_model)
    except (OSError, ValueError):  # an unreadable local config.json: sized like an unknown model
        return None


def pool_layout(judge: ModelShape, gpu_gb: float, seq: int, pool_gpn: int) -> Optional[tuple[int, float]]:
    """(TP, gpu_memory_utilization) of a judge on GPUs of its own: the smallest TP (a power of two dividing the pool's
    GPUs per node that splits its attention heads) whose engine holds the bf16 weights and a KV cache for 8 full judge sequences within POOL_GMU;
    None when none does."""
    tp = 1
    while tp <= pool_gpn:
        if pool_gpn % tp == 0 and judge.engine_tp_ok(tp) and reward_engine_share(judge, gpu_gb, seq, tp) <= POOL_GMU:
            return tp, POOL_GMU
        tp *= 2
    return None


def engine(a: Any, gpn: int) -> tuple[Optional[ModelShape], int, float]:
    """The judge's engine on the policy's GPUs (colocated): shape, TP, share of each card; a judge in its own pool
    takes nothing there: (None, 1, 0.0)."""
    if a.reward != "genrm" or a.judge_gpus:
        return None, 1, 0.0
    judge = shape(a)
    if judge is None:
        return None, 1, COLOCATED_SHARE
    tp, gmu = reward_layout(judge, a.gpu_memory_gb, judge_seq(a), gpn)
    return judge, tp, gmu


def engine_memory(judge: Optional[ModelShape], gpu_gb: float, tp: int, gmu: float, seq: int) -> dict[str, Any]:
    """What the judge's engine holds per GPU: its reservation, bf16 weights and the judge sequences its KV cache
    fits (GiB; empty when the judge cannot be sized)."""
    if judge is None:
        return {}
    cap = capacity_gib(gpu_gb)
    weights = 2 * judge.params / tp / GIB
    kv = max(0.0, gmu * cap - weights - ENGINE_OVERHEAD_GIB)
    return {"reserved_gib": round(gmu * cap, 1), "weights_gib": round(weights, 1),
            "kv_seqs": int(kv * GIB // judge.cache_bytes_per_seq(tp, seq))}


def rules(b: Any) -> None:
    """VI590-VI596: what verl would refuse late (or never say) about a judge."""
    a, f = b.a, b.f
    if a.judge_gpus and a.reward != "genrm":
        f.error("VI591", ("judge_gpus", "reward"), f"judge_gpus={a.judge_gpus} is set but reward={a.reward}",
                "set reward=genrm (and reward_model to the judge), or remove judge_gpus")
    if a.reward != "genrm":
        return
    if not a.reward_model:
        f.error("VI590", ("reward", "reward_model"), "reward=genrm needs reward_model (the judge LLM)",
                "set reward_model=<hub id or path of an instruction-tuned LLM>, e.g. Qwen/Qwen2.5-7B-Instruct")
    if b.algo.filter_groups and not a.judge_gpus:
        f.error("VI595", ("algorithm", "reward", "judge_gpus"),
                "algorithm=dapo filters groups by reward at sampling time, which a judge colocated with the policy "
                "cannot provide (verl asserts it: trainer_base.py:199)",
                f"set judge_gpus={a.gpus_per_node} (a pool of its own, scoring while rollout runs"
                + (", with cluster=ray, kuberay or slurm: one more node)" if a.cluster == "local" else ")")
                + ", or choose grpo")
    if a.judge_gpus and a.cluster == "local":
        f.error("VI592", ("judge_gpus", "cluster"),
                f"judge_gpus={a.judge_gpus} puts the judge on GPUs beyond the {a.gpus_per_node} of the policy's node, "
                "but cluster=local is one machine",
                "set judge_gpus=0 (the judge shares the policy's GPUs), or use cluster=ray, kuberay or slurm")
    gpn = a.gpus_per_node
    if a.judge_gpus and a.judge_gpus % gpn:
        lower, upper = a.judge_gpus // gpn * gpn, -(-a.judge_gpus // gpn) * gpn
        f.error("VI593", ("judge_gpus", "gpus_per_node"),
                f"judge_gpus={a.judge_gpus} does not fill whole nodes of {gpn} GPUs: the judge's pool is more nodes like "
                "the policy's (verl needs the same GPU count on every node), and GPUs left over would sit idle",
                "nearest valid: judge_gpus=" + " or ".join(str(v) for v in (lower, upper) if v > 0))
    judge = shape(a)
    if a.reward_model and judge is None:
        share = f"{COLOCATED_SHARE:g} of each GPU" if not a.judge_gpus else f"{POOL_GMU:g} of each of its GPUs"
        f.warning("VI596", ("reward_model",), f"cannot size the judge {a.reward_model!r}: its engine gets {share} "
                  "and TP 1 unchecked", "give a local model folder or a catalogue model as reward_model")
    if judge is not None and not a.judge_gpus:
        tp, share = reward_layout(judge, a.gpu_memory_gb, judge_seq(a), gpn)
        if share > COLOCATED_MAX:
            f.error("VI594", ("reward_model", "judge_gpus", "gpus_per_node"),
                    f"the judge {judge.name} ({judge.params_b:.1f}B) does not fit beside the policy: even at TP {tp} its "
                    f"engine needs {share:g} of each {a.gpu_memory_gb:g} GB card (weights + KV cache for 8 judge sequences), "
                    f"more than {COLOCATED_MAX:g}",
                    f"give it GPUs of its own: judge_gpus={gpn} (one more node, with cluster=ray, kuberay or slurm)"
                    if pool_layout(judge, a.gpu_memory_gb, judge_seq(a), gpn) is not None else
                    f"choose a smaller judge: no node of {gpn} × {a.gpu_memory_gb:g} GB holds it, even on its own "
                    "(its tensor-parallel group stays inside a node)")
    nodes, pool_gpn = pool_nodes(a)
    if judge is not None and nodes and pool_layout(judge, a.gpu_memory_gb, judge_seq(a), pool_gpn) is None:
        need = reward_engine_share(judge, a.gpu_memory_gb, judge_seq(a), pool_gpn) * capacity_gib(a.gpu_memory_gb)
        f.error("VI594", ("judge_gpus", "reward_model", "judge_max_tokens"),
                f"the judge {judge.name} ({judge.params_b:.1f}B) does not fit its pool: even at TP {pool_gpn} its engine "
                f"needs {need:.0f} GiB per GPU, more than {POOL_GMU:g} of a {a.gpu_memory_gb:g} GB card",
                "raise judge_gpus (a node's GPUs give the widest TP), lower judge_max_tokens, or choose a smaller judge")


def keys(b: Any, model_path: str) -> None:
    """verl's keys of the judge (after the pipeline's reward keys, which leave reward=genrm to this stage);
    `model_path`: reward_model as the config names it."""
    a, s, roles = b.a, b.s, b.roles
    if a.reward != "genrm" or not a.reward_model:
        return
    prompt, verdict = judge_lengths(a)
    nodes, pool_gpn = pool_nodes(a)
    judge = shape(a)
    s.set("reward.custom_reward_function.path", BUNDLE_GENRM_FN,
          "reward=genrm: the bundle's judge function asks the judge for a verdict and parses its score "
          "(relative: run.sh starts verl in the bundle folder)")
    s.set("reward.custom_reward_function.name", BUNDLE_GENRM_NAME, "the judge function in genrm_fn.py")
    s.set("reward.reward_model.enable", True, "reward=genrm: verl's reward loop serves the judge")
    if nodes:
        s.set("reward.reward_model.enable_resource_pool", True, f"judge_gpus={a.judge_gpus}: a pool of its own")
        s.set("reward.reward_model.n_gpus_per_node", pool_gpn, "judge_gpus on whole nodes like the policy's")
        s.set("reward.reward_model.nnodes", nodes, f"judge_gpus={a.judge_gpus} over nodes of {a.gpus_per_node} GPUs")
    s.set("reward.reward_model.model_path", model_path, "reward_model (the judge)", "answer")
    s.set("reward.reward_model.rollout.name", a.rollout_engine, "served by the same engine as the rollout")
    if nodes:
        fit = pool_layout(judge, a.gpu_memory_gb, judge_seq(a), pool_gpn) if judge is not None else None
        tp, gmu = fit if fit is not None else (1, POOL_GMU)
        tp_reason = ("smallest split whose engine holds the judge and 8 verdicts' KV cache within "
                     f"{POOL_GMU:g} of each card" if judge is not None else "the judge could not be sized (VI596)")
        gmu_reason = "GPUs of its own: most of each card, the rest is KV cache for concurrent verdicts"
        replicas = (nodes * pool_gpn) // tp
    else:
        tp, gmu = b.reward_tp, b.reward_gmu
        tp_reason = "smallest split whose engine share stays ≤ 0.3 of the card"
        gmu_reason = "the judge's bf16 weights and KV cache for 8 full judge sequences, beside the policy's engine"
        replicas = b.n_gpus // tp if tp else 0
    s.set("reward.reward_model.rollout.tensor_model_parallel_size", tp, tp_reason)
    s.set("reward.reward_model.rollout.gpu_memory_utilization", gmu, gmu_reason)
    if not nodes:
        s.set("reward.reward_model.rollout.free_cache_engine", True,
              "the judge's engine sleeps beside the policy's and wakes for its own turn after rollout "
              "(reward_loop.py compute_rm_score), as the memory plan counts it")
    s.set("reward.reward_model.rollout.prompt_length", prompt,
          f"the judge prompt: max_prompt_length + max_response_length + {JUDGE_TEMPLATE_TOKENS} for its instructions")
    s.set("reward.reward_model.rollout.response_length", verdict, "judge_max_tokens")
    s.set("reward.reward_model.rollout.max_model_len", prompt + verdict,
          "judge prompt + verdict (null would size the engine for the model's whole context)")
    b.facts["judge"] = {"gpus": a.judge_gpus, "nodes": nodes, "tp": tp, "gmu": gmu, "replicas": replicas,
                        "prompt_tokens": prompt, "max_tokens": verdict, **engine_memory(judge, a.gpu_memory_gb, tp, gmu,
                                                                                         prompt + verdict)}
    where = (f"its own pool of {a.judge_gpus} GPU(s) on {nodes} extra node(s), {replicas} replica(s) of TP={tp}, "
             f"scoring while rollout runs" if nodes else
             f"colocated with the policy, {replicas} replica(s) of TP={tp} at {gmu:g} of each GPU, woken after rollout")
    roles["reward"] = (f"LLM judge {a.reward_model} via {BUNDLE_GENRM_FN} (verdicts of ≤ {verdict} tokens, "
                       f"score 0-10 → 0-1), {where}")
