"""Time per training step, per phase, and for the whole run (GPU-hours), for verl's colocated hybrid engine.

verl runs the phases of one step one after the other on every GPU (trainer/ppo/ray_trainer.py fit():
`timing_s/gen`, `old_log_prob`, `ref`, `values`, `update_critic`, `update_actor`; the weight sync to the rollout
engine before each generation). Each phase is modelled from first principles and a few efficiencies that were
calibrated once on the real runs of tests/data/reference/step-times.json (benchmarks/step_times.py fits them;
tests/test_steptime_calibration.py states the error per report, also on a held-out half):

- rollout: response lengths follow an exponential clipped at max_response_length (mean: the answer, or a default).
  A replica (rollout TP GPUs) runs at most C sequences at once (its KV cache, max_num_seqs, the sequences it has):
  while more are queued, C decode at a time; then the last C drain until the step's longest response ends (at
  max_response_length: some of a step's thousands of samples are cut there) — the floor more GPUs do not shorten.
  One decode iteration is the slower of the GPU's work (weights and KV cache read at a share of HBM bandwidth, or
  the FLOPs; per-layer kernels; TP all-reduces, their latency and their bytes over the GPU's link, slower across
  nodes) and the engine's host work (per iteration, per running sequence, per layer without CUDA graphs). Prefill
  is FLOP-bound; DAPO's dynamic sampling repeats the generation.
- weight sync: the bf16 weights gathered from the training shards and loaded into the engine: a fixed cost, a cost
  per checkpoint tensor (each handed over on its own: a MoE's every expert) and the bytes at a rate per backend.
- log-prob passes (actor old log-probs, reference, critic values): 2 × active params × tokens FLOPs; updates:
  6 × active params × tokens × (4/3 with activation recompute) FLOPs (LoRA: 4 ×, the frozen base has no weight
  gradients). Time = FLOPs × (1 / (peak × η) + 1 / (HBM bandwidth × intensity)): a roofline sum whose two
  calibrated numbers are shared by every GPU (the H20's 148 TFLOPS with 4 TB/s and the H100's 989 with 3.35 both
  fit), plus a fixed cost per micro-batch (a micro-batch far below what memory allows makes many of them: the GPU
  idles between them), the driver's data path (the padded batch shipped to the workers), the pipeline bubble of
  Megatron PP, the offload traffic over PCIe, a MoE's token dispatch (all-to-all over NVLink or the NICs, by the EP
  group's span) and FSDP's parameter gathers per micro-batch (overlapped with the compute: the longer of the two;
  wizard.planner.steptime_links). LoRA: wizard.planner.steptime_lora.

Only the standard library is imported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from wizard.planner.steptime_links import (  # noqa: F401 (COLLECTIVE_ETA, PCIE_GB_S, params_per_gpu re-exported)
    COLLECTIVE_ETA, INTRA_NODE_GB_S, NIC_GB_S, PCIE_GB_S, fsdp_gather_seconds, offload_seconds, params_per_gpu)
from wizard.planner.steptime_lora import (adapter_seconds, adapter_update_seconds, decode_kernel_factor,
                                          lora_assumptions)
from wizard.verlspec.hardware import (DEFAULT_PEAK_GPU, GPU_PEAK, Peak, capacity_gib, memory_of_gpu_type,
                                      peak_of_gpu_type)

GIB = float(1 << 30)

# -- calibrated efficiencies (benchmarks/step_times.py fits them on tests/data/reference/step-times.json; one per
#    phase kind or backend, never per report) -------------------------------------------------------------------
# FLOP efficiency (share of the dense bf16 peak) and arithmetic intensity (FLOPs per byte of HBM traffic) of the
# training engines' forward and forward+backward passes, the roofline sum above
TRAIN_ETA = 1.0
TRAIN_INTENSITY = 208.0
FORWARD_ETA = 1.0
FORWARD_INTENSITY = 198.0
# fixed cost of one micro-batch on top of its FLOPs (kernel launches, the engines' Python, TP/SP collectives'
# latency, logits and loss): many small micro-batches make a pass slow (static micro-batches of 2 sequences:
# update_actor 300 s instead of 102 s with token budgets in the same benchmark table)
TRAIN_MICRO_S = 0.106
FORWARD_MICRO_S = 0.0737
# MoE token dispatch (Megatron: moe_token_dispatcher_type "alltoall", verl 0.9.1 models/mcore/config_converter.py:91
# and workers/engine/megatron/transformer_impl.py:368): every MoE layer sends each token's bf16 hidden state to its
# top-k experts' EP ranks and back (dispatch + combine), the backward as much again, a recomputed forward once more.
# The share of it that leaves the GPU goes over NVLink while the EP group (EP × ETP consecutive ranks) fits in a
# node, else mostly over the NICs. A2A_ETA is the share of NVLink's bandwidth the in-node part reaches, with what
# else a MoE layer costs beyond its FLOPs folded in (router, small grouped GEMMs, the host sync that sizes the
# all-to-all: calibrated, bounded to 0.02–1). A2A_NIC_ETA is the share of the NIC's bandwidth the part that crosses
# nodes reaches: a link of its own, 9 × slower than NVLink but far less of it lost to those per-layer costs
# (fitted 1-D, the rest held, on the shown reports with the sibling rows of their source tables, whose only timed
# runs with an EP group across nodes are the Qwen3-235B-A22B EP32 report and four Qwen3-30B-A3B EP16/EP32 rows; a
# refit of every efficiency on the shown reports alone lands between 0.26 and 0.35, by where it starts). Until
# 2026-12 the in-node share served both links, and those runs' log-prob and update came out 1.6–2.6 × too slow
A2A_ETA = 0.153
A2A_NIC_ETA = 0.35
# decode (the rollout): one iteration of a replica is max(GPU time, host time), overlapped. GPU: the weights and KV
# cache read at DECODE_BW_ETA of HBM bandwidth (fixed at a physical 0.7, not fitted), or the FLOPs at
# PREFILL_ETA of the peak, + DECODE_LAYER_S per layer (a dozen kernels of a few microseconds each, however small
# the batch) + per layer with rollout TP > 1 its two all-reduces: DECODE_TP_GRAPH_LAYER_S inside a CUDA graph
# (vLLM captures its custom all-reduce: about 20 µs each; assumed, not fitted), DECODE_TP_LAYER_S launched one by
# one in eager mode (calibrated). Host: DECODE_STEP_S + DECODE_SEQ_S per running sequence (scheduler, sampler,
# detokenizer) + per layer without CUDA graphs (rollout.enforce_eager: every kernel launched from Python)
# EAGER_LAYER_S with vLLM's V1 engine, EAGER_V0_LAYER_S with its older V0 engine (verl up to 0.3 pins
# vllm<=0.8.2, setup.py; vLLM's V1 is its default from 0.8)
DECODE_BW_ETA = 0.7
DECODE_STEP_S = 0.00235
DECODE_SEQ_S = 7.53e-5
DECODE_LAYER_S = 45e-6
DECODE_TP_LAYER_S = 213e-6
DECODE_TP_GRAPH_LAYER_S = 40e-6
# a TP group spanning nodes runs its all-reduces with NCCL over the NICs (vLLM's custom all-reduce needs peer
# access inside a node): a decode-sized all-reduce is latency-bound, about 47 µs on 2 nodes of 8 GPUs over NDR
# InfiniBand (NVIDIA/nccl#1244: 16 H20, 4 B to 1 KB, 46-48 µs), on top of the in-node cost per layer; its bytes go
# over the NIC (tp_bytes). Measured elsewhere, not fitted. (Until 2026-12 this was a 9 × factor on the per-layer
# cost, NVLink's bandwidth over a NIC's: it counted the bytes twice and made a latency a bandwidth.)
CROSS_NODE_ALLREDUCE_S = 47e-6
EAGER_LAYER_S = 1.03e-4
EAGER_V0_LAYER_S = 9.1e-4
PREFILL_ETA = 0.5
# trainer-side rollout overhead over the engine's generation (verl's timing_s/gen − generate_sequences: waking the
# engine, chat templates, reward scoring, data transfer between the workers and the driver), a share of generation
ROLLOUT_OVERHEAD = 0.39
# weight sync: a fixed cost per sync (Megatron's export sets up its conversion tasks and PP broadcasts), a cost per
# checkpoint tensor (each is gathered, converted and handed to the engine's load_weights on its own: verl 0.9.1
# workers/engine/megatron/transformer_impl.py:1033-1055 export_hf_weights, rollout/vllm_rollout/vllm_rollout.py:210
# buckets), and the bf16 bytes of the whole model at a rate per backend (calibrated; FSDP's fixed cost assumed)
SYNC_GB_S = {"fsdp": 31.0, "megatron": 29.0}
SYNC_FIXED_S = {"fsdp": 0.5, "megatron": 2.2}
SYNC_TENSOR_S = 1.75e-4
# the single controller's data path: the driver pads, serialises and sends each pass's batch to the workers
# (ray.put of the DataProto chunks) and gathers the results, at this rate (calibrated)
DRIVER_GB_S = 0.633
# Inside the old_log_prob timer the driver also reduces the pass's per-token results over the whole padded batch
# (sequences × max_response_length slots), in the TaskRunner's one torch thread (a Ray actor: OMP_NUM_THREADS=1):
# the entropy metric, agg_loss in the actor's loss_agg_mode (verl 0.9.1 trainer/ppo/v1/trainer_base.py:1677-1682;
# in the timer since verl 0.4), and with rollout.calculate_log_probs on (0.9.1's default, rollout/rollout.yaml:237,
# PR #6616) the rollout-vs-actor comparison calculate_debug_metrics (trainer_base.py:1690-1691, under the timer at
# :585-586; the legacy trainer/ppo/ray_trainer.py:1611-1615). Seconds per slot: medians of verl's own functions
# timed by benchmarks/driver_metrics.py
DEBUG_METRICS_SLOT_S = 25e-9
ENTROPY_AGG_SLOT_S = {"token-mean": 10e-9, "token-sum": 9e-9, "seq-mean-token-sum": 6e-9,
                      "seq-mean-token-mean": 6e-9, "seq-mean-token-sum-norm": 6e-9}
# transformers before v5 runs a MoE layer's routed experts one by one in Python, in training (Qwen2/Qwen3-MoE,
# Mixtral, DeepSeek-V2/V3, gpt-oss modeling in 4.57: `for expert_idx in expert_hit`, each with a torch.where and an
# index that wait for the GPU and about ten small kernels launched eagerly); from v5 they run as grouped GEMMs
# (modeling_utils.py get_correct_experts_implementation: "grouped_mm" unless asked otherwise). verl's FSDP engine
# trains that transformers model, so with v4 every micro-batch pays per routed expert, MoE layer and pass (forward,
# backward, recomputed forward): measured, not fitted, by benchmarks/expert_loop.py with transformers 4.57.1 on a
# CPU (160 µs a forward, 145 µs a backward per expert; a lower bound: a GPU adds the torch.where's synchronisation)
EXPERT_LOOP_S = 1.5e-4
# without CUDA graphs (rollout.enforce_eager), vLLM's fused-MoE layer costs the host more than a dense MLP: routing
# (topk-softmax), the block alignment, two Triton fused-MoE launches from Python (~40 µs each: argument binding of a
# ~30-argument kernel), the activation, the sum and their buffers, about 0.2 ms a MoE layer and decode iteration
# beyond EAGER_LAYER_S (an estimate from that count, neither traced nor fitted: the weakest-sourced constant here;
# six eager Qwen3-30B-A3B runs of one calibration table were looked at beside it; CUDA graphs capture it all)
EAGER_MOE_LAYER_S = 2.0e-4

# -- assumptions (not calibrated; named in every result) ----------------------------------------------------------
# vLLM's engine keeps at most this many sequences running (verl 0.9.1 rollout.max_num_seqs: 256,
# trainer/config/rollout/rollout.yaml:84)
MAX_NUM_SEQS = 256
# the mean response when nobody says: RESPONSE_SQRT × √max_response_length, at most half the cap. RESPONSE_SQRT is
# the median of mean response / √max_response_length over the ten reports of tests/data/reference/step-times.json
# that measured or implied their mean (2.2 to 71; tests/test_steptime_calibration.py recomputes it): a longer cap
# lets a few responses run long while most stay near what the task needs. The response_length_mean answer (plan)
# or --response-length-mean (check) replaces it.
RESPONSE_SQRT = 9.6
# DAPO's dynamic sampling (algorithm.filter_groups) drops the groups whose responses all scored the same and
# generates again until train_batch_size groups are kept: the share kept is assumed (not calibrated) to be half,
# so a step runs ⌈train_batch_size / (gen_batch_size × KEEP)⌉ generation rounds
FILTER_GROUPS_KEEP = 0.5
# the mean prompt when nobody says: this share of max_prompt_length
DEFAULT_PROMPT_SHARE = 0.25
# a multi-turn tool run's tool outputs are cut at rollout.multi_turn.max_tool_response_length characters (verl
# 0.9.1 experimental/agent_loop/tool_agent_loop.py:499-505; default 256, trainer/config/rollout/rollout.yaml); a
# tool output is assumed to fill it, at CHARS_PER_TOKEN characters per token (an assumption, not calibrated)
TOOL_RESPONSE_CHARS = 256
CHARS_PER_TOKEN = 4.0
ENGINE_OVERHEAD_GIB = 1.5  # as wizard.planner.memory: the engine's own activations beside weights and KV cache

PHASE_ORDER = ("rollout", "weight sync", "old log-prob", "ref log-prob", "values", "update critic", "update actor")


@dataclass(frozen=True)
class Workload:
    """What one verl step does, from the plan or a checked config."""

    params: float  # all parameters of the policy
    active_params: float  # per token (MoE: the routed experts a token uses)
    layers: int
    hidden: int
    kv_bytes_per_token: float  # bf16 K and V per token on one GPU of a rollout TP group
    n_gpus: int
    prompts: int  # prompts generated per round (data.train_batch_size, or gen_batch_size for DAPO)
    n: int  # responses per prompt
    max_prompt: int
    max_response: int
    response_mean: Optional[float] = None  # None: RESPONSE_SQRT × √max_response (at most half of it)
    thinking: str = ""  # why the model reasons by default (reasoning.thinks_by_default): default mean half the cap
    response_mean_basis: str = "given"  # where response_mean came from (the answer, --response-length-mean)
    prompt_mean: Optional[float] = None  # None: DEFAULT_PROMPT_SHARE × max_prompt
    train_prompts: Optional[int] = None  # prompts trained per step (data.train_batch_size); None: as prompts
    filter_groups: bool = False  # DAPO dynamic sampling: generation rounds until train_prompts groups are kept
    gpu_type: Optional[str] = None
    gpu_memory_gb: Optional[float] = None
    rollout_tp: int = 1
    rollout_dp: int = 1
    max_num_seqs: int = MAX_NUM_SEQS  # rollout.max_num_seqs
    enforce_eager: bool = False  # rollout.enforce_eager (verl 0.9.1: False, rollout.yaml:52)
    vllm_v0: bool = False  # vLLM's V0 engine (verl up to 0.3); verl 0.9.1 runs V1
    gpus_per_node: int = 8  # trainer.n_gpus_per_node: a rollout TP group larger than it spans nodes
    gmu: float = 0.5
    kv_tokens: Optional[float] = None  # KV-cache tokens per replica (the memory plan's); None: from gmu
    # a hybrid's (Qwen3-Next, Qwen3.5): the layers of full attention (ModelShape.attn_layers; 0: all `layers`), and
    # the fixed Gated DeltaNet state one sequence holds on one GPU of a rollout TP group (ModelShape.
    # state_bytes_per_seq): cache room it takes besides its KV, bytes every decode step reads and writes back
    attn_layers: int = 0
    state_bytes_per_seq: float = 0.0
    backend: str = "fsdp"  # fsdp | megatron
    moe: bool = False
    weight_tensors: int = 0  # the checkpoint's tensors (ModelShape.checkpoint_tensors), 0: unknown
    moe_layers: int = 0  # layers with routed experts (ModelShape.moe_layers), 0: dense
    top_k: int = 0  # routed experts per token (num_experts_per_tok)
    routed_params: float = 0.0  # all routed experts' parameters (ModelShape.routed_expert_params): what EP splits
    experts: int = 0  # routed experts per MoE layer (ModelShape.experts)
    # FSDP on transformers < 5: experts one by one (EXPERT_LOOP_S); verl 0.9.1 requires transformers>=5.5.3 (setup.py)
    expert_loop: bool = False
    expert_parallel: int = 1  # Megatron expert_model_parallel_size: EP ranks a MoE layer's tokens are spread over
    expert_tp: int = 1  # Megatron expert_tensor_parallel_size (verl's null: as TP, engine/megatron.yaml:17)
    dynamic_bsz: bool = True
    train_tokens: int = 0  # tokens per training micro-batch per GPU (a budget), 0: from micro × mean length
    logprob_tokens: int = 0
    train_micro: int = 0  # static micro-batch (sequences per GPU) when not dynamic
    logprob_micro: int = 0
    mini_batches: int = 1  # optimizer steps per step (train_batch_size / ppo_mini_batch_size)
    ppo_epochs: int = 1
    recompute: bool = True  # activation recompute (FSDP gradient checkpointing, Megatron full recompute)
    model_parallel: int = 1  # GPUs that share one sequence in training (Ulysses SP, Megatron TP × CP)
    context_parallel: int = 1  # Megatron CP: the token budget per micro-batch is budget × CP (not × TP)
    pipeline: int = 1  # Megatron PP
    virtual_pipeline: int = 1  # Megatron VPP (virtual_pipeline_model_parallel_size): the interleaved schedule
    offload_params: bool = False
    offload_optimizer: bool = False
    # the FSDP actor's fsdp_config.fsdp_size: below n_gpus a (ddp × fsdp) mesh, sharded over fsdp_size GPUs and
    # replicated over the rest (verl 0.9.1 workers/engine/fsdp/utils.py:47-52); 0 or -1: over every GPU
    fsdp_size: int = 0
    has_ref: bool = False
    has_critic: bool = False
    critic_params: Optional[float] = None  # None: as the policy
    multi_turn: bool = False
    # multi-turn: rollout.multi_turn.max_assistant_turns (else max_user_turns), 0: not set (one turn assumed)
    assistant_turns: int = 0
    tool_response_chars: int = TOOL_RESPONSE_CHARS  # rollout.multi_turn.max_tool_response_length
    prefix_caching: bool = True  # rollout.enable_prefix_caching
    remove_padding: bool = True  # use_remove_padding: packed sequences (False: every micro-batch padded to its longest)
    # algorithm.rollout_correction.bypass_mode: old log-probs are the rollout's own, no pass (ray_trainer.py:1550)
    old_logprob: bool = True
    # GPUs of their own for the rollout (one-step-off and fully async: rollout.nnodes × rollout.n_gpus_per_node);
    # 0: colocated with training on the n_gpus
    rollout_gpus: int = 0
    # rollout.n_gpus_per_node when the rollout has GPUs of its own: a rollout TP group larger than it spans nodes
    # (0: gpus_per_node, the colocated rollout's)
    rollout_per_node: int = 0
    # the next batch generates while this one trains (one-step-off, fully async): a step is the longer of the two
    overlap: bool = False
    # fully async with partial rollout: the engine streams (new prompts join, interrupted ones resume after a sync),
    # so a step's samples cost the full engine's throughput, no drain to the longest response
    streaming: bool = False
    # query heads × head_dim (ModelShape.attention_width): what the attention's context FLOPs scale with; 0: hidden
    attn_width: int = 0
    # rollout.calculate_log_probs: the driver compares the rollout's log-probs with the old ones (DEBUG_METRICS_SLOT_S)
    rollout_logprobs: bool = False
    # the driver reduces the old log-prob pass's entropy in actor.loss_agg_mode (ENTROPY_AGG_SLOT_S; verl >= 0.4)
    driver_entropy: bool = True
    loss_agg_mode: str = "token-mean"
    # LoRA (wizard.planner.steptime_lora.lora_fields): the adapters' parameters, the only ones trained (0: all), the
    # adapter tensors a sync ships alone (lora.merge false, verl's default; 0: merged) and a token's adapter_io
    lora_params: float = 0.0
    adapter_tensors: int = 0
    adapter_io: tuple[float, float] = (0.0, 0.0)
    # seconds a sequence's images add to every forward of the vision tower on torch 2.9 without cuDNN 9.15 (its
    # Conv3d patch embedding's per-channel loop: wizard.planner.patch_embed; 0: not on such a torch)
    vision_fallback_s: float = 0.0


@dataclass
class StepTime:
    phases: dict[str, float]
    assumptions: dict[str, object]
    detail: dict[str, float] = field(default_factory=dict)
    overlap: bool = False  # the rollout runs beside the training passes (Workload.overlap)
    rollout_gpus: int = 0  # GPUs of the rollout's own (Workload.rollout_gpus), counted in the GPU-hours
    # overlapped: the trainer's receipt of the batch the rollout built (padded to max_prompt + max_response, as the
    # driver ships a pass's), inside verl's gen timer, after the rollout ends
    receive_s: float = 0.0

    @property
    def training_s(self) -> float:
        """The training passes' seconds (log-probs, values, updates): all but the rollout and the weight sync."""
        return sum(v for k, v in self.phases.items() if k not in ("rollout", "weight sync"))

    @property
    def step_s(self) -> float:
        if not self.overlap:
            return sum(self.phases.values())
        return max(self.phases.get("rollout", 0.0), self.training_s) + self.receive_s \
            + self.phases.get("weight sync", 0.0)

    @property
    def gen_timer_s(self) -> float:
        """What verl's `timing_s/gen` measures. Colocated: the rollout. With a rollout of its own, the trainer's
        wait for the next batch, the rollout's seconds beyond the training's, and the batch's receipt: the fully
        async trainer times its fetch from the sample queue (experimental/fully_async_policy/fully_async_trainer.py:
        646-647), the one-step-off trainer its wait on the batch generated during the last step
        (experimental/one_step_off_policy/ray_trainer.py:389-390; verl main 1dda039b)."""
        rollout = self.phases.get("rollout", 0.0)
        return max(rollout - self.training_s, 0.0) + self.receive_s if self.overlap else rollout

    def grouped(self) -> dict[str, float]:
        """The contract's four phase kinds (plus the critic's, when there is one)."""
        p = self.phases
        out = {"rollout": p.get("rollout", 0.0), "weight sync": p.get("weight sync", 0.0),
               "log-prob": p.get("old log-prob", 0.0) + p.get("ref log-prob", 0.0) + p.get("values", 0.0),
               "update": p.get("update actor", 0.0) + p.get("update critic", 0.0)}
        return {k: round(v, 1) for k, v in out.items()}

    def bottleneck(self) -> str:
        return max(self.phases, key=lambda k: self.phases[k])


def peak(gpu_type: Optional[str]) -> tuple[str, Peak, bool]:
    """(name, peaks, assumed): the GPU's peaks, or the default GPU's when the type is not known."""
    found = peak_of_gpu_type(gpu_type)
    if found is None:
        return DEFAULT_PEAK_GPU, GPU_PEAK[DEFAULT_PEAK_GPU], True
    return found[0], found[1], False


def _lengths(w: Workload) -> tuple[float, float, str, str]:
    turns = max(w.assistant_turns, 1) if w.multi_turn else 1
    resp = min(w.response_mean or default_response(w.max_response, bool(w.thinking), turns, tool_tokens(w)),
               w.max_response)
    prompt = w.prompt_mean if w.prompt_mean else DEFAULT_PROMPT_SHARE * w.max_prompt
    multi = (f"multi-turn: {turns} assistant turns (multi_turn.max_assistant_turns) of {RESPONSE_SQRT:g} × "
             f"√(max_response_length / {turns}) each plus {tool_tokens(w):.0f} tokens of tool output "
             "(max_tool_response_length), at most half of max_response_length" if turns > 1 else "")
    why_r = w.response_mean_basis if w.response_mean else (
        f"default: half of max_response_length, the model reasons by default ({w.thinking}; not given)" if w.thinking
        else f"default: {multi}; {RESPONSE_SQRT:g} is the median of the calibration reports that measured it (not given)"
        if multi else f"default: {RESPONSE_SQRT:g} × √max_response_length, at most half of it, "
        "the median of the calibration reports that measured it (not given)")
    why_p = "given" if w.prompt_mean else f"{DEFAULT_PROMPT_SHARE:g} × max_prompt_length (not given)"
    return resp, prompt, why_r, why_p


def tool_tokens(w: Workload) -> float:
    """Tokens of tool output inside a multi-turn response: one output after every assistant turn but the last, each
    cut at max_tool_response_length characters (tool_agent_loop.py:499). They are in the response the training
    passes compute over (masked from the loss only), but the engine prefills them rather than decoding them."""
    if not w.multi_turn or w.assistant_turns <= 1:
        return 0.0
    return (w.assistant_turns - 1) * w.tool_response_chars / CHARS_PER_TOKEN


def default_response(max_response: int, thinking: bool = False, turns: int = 1, tool: float = 0.0) -> float:
    """The mean response when nobody states one: half the cap for a model that reasons by default
    (wizard.planner.reasoning: it runs long whatever the task); else RESPONSE_SQRT × √(max_response × turns) (each
    of `turns` assistant turns gets the one-turn default on its share of the cap) plus the tool outputs between
    them, at most half the cap."""
    if thinking:
        return max_response / 2
    return min(RESPONSE_SQRT * math.sqrt(max_response * turns) + tool, max_response / 2)


def mean_sequence(max_prompt: int, max_response: int, response_mean: Optional[float] = None,
                  thinking: bool = False) -> float:
    """The mean prompt + response: the given mean response, else the one-turn default (default_response); the
    prompt's default share (DEFAULT_PROMPT_SHARE)."""
    resp = response_mean or default_response(max_response, thinking)
    return DEFAULT_PROMPT_SHARE * max_prompt + min(resp, max_response)


def micro_share(st: "StepTime", phase: str) -> float:
    """Share of a pass's time spent on fixed per-micro-batch costs (FORWARD_MICRO_S / TRAIN_MICRO_S)."""
    total = st.phases.get(phase, 0.0)
    return st.detail.get(f"{phase} micro-batches s", 0.0) / total if total else 0.0


def _pass_seconds(flops_per_gpu: float, pk: Peak, eta: float, intensity: float) -> float:
    return flops_per_gpu / (pk.compute_tflops * 1e12 * eta) + flops_per_gpu / (pk.hbm_tb_s * 1e12 * intensity)


def _replica_weight_bytes(w: Workload) -> float:
    """bf16 weights on one GPU of a rollout replica: split over its TP GPUs (a MoE's also over its DP, which vLLM's
    expert parallel spans)."""
    return 2 * w.params / (max(w.rollout_tp, 1) * (w.rollout_dp if w.moe else 1))


def shape_fields(shape: Any, tp: int) -> dict[str, Any]:
    """A Workload's fields that a model's shape (wizard.planner.shapes.ModelShape) sets, at rollout TP `tp`."""
    return dict(params=shape.params, active_params=shape.active_params, layers=shape.layers, hidden=shape.hidden,
                attn_width=int(getattr(shape, "attention_width", 0) or 0), kv_bytes_per_token=shape.kv_bytes_per_token(tp),
                attn_layers=int(getattr(shape, "attn_layers", 0) or 0),
                state_bytes_per_seq=float(shape.state_bytes_per_seq(tp)) if hasattr(shape, "state_bytes_per_seq") else 0.0)


def _kv_tokens(w: Workload, pk_name: str) -> float:
    if w.kv_tokens is not None:
        return max(w.kv_tokens, 1.0)
    gb = w.gpu_memory_gb or memory_of_gpu_type(pk_name) or 80
    cap = capacity_gib(gb, w.gpu_type) * GIB
    room = w.gmu * cap - _replica_weight_bytes(w) - ENGINE_OVERHEAD_GIB * GIB
    return max(room / w.kv_bytes_per_token, 1.0)


def _state_tokens(w: Workload) -> float:
    """A sequence's fixed GDN state in tokens of KV cache: the room it takes besides its own tokens'."""
    return w.state_bytes_per_seq / w.kv_bytes_per_token if w.kv_bytes_per_token else 0.0


def rollout_unfit(w: Workload) -> Optional[str]:
    """Why the rollout cannot be timed: its engine's reservation (gpu_memory_utilization of a GPU) holds a
    replica's bf16 weights but not one whole sequence (prompt + response) of KV cache beside them; None when it
    does. (The decode model would run one token of cache at a time: a prediction with no meaning.)"""
    name, _, _ = peak(w.gpu_type)
    if _kv_tokens(w, name) >= w.max_prompt + w.max_response + _state_tokens(w):
        return None
    weights = _replica_weight_bytes(w) / GIB
    return (f"not predicted: the rollout engine's memory (gpu_memory_utilization {w.gmu:g} of each GPU) holds no "
            f"whole sequence of {w.max_prompt + w.max_response} tokens beside the bf16 weights of a replica "
            f"({weights:.0f} GiB per GPU at rollout TP {w.rollout_tp})")


def length_scale(mean: float, cap: float) -> float:
    """The scale m of the response-length distribution: exponential, clipped at max_response_length (the clipped
    responses pile up at the cap), whose mean is m·(1 − e^(−cap/m)) = the mean response."""
    mean = min(mean, 0.95 * cap)
    lo, hi = mean, 50.0 * cap
    for _ in range(60):
        mid = (lo + hi) / 2
        if mid * (1 - math.exp(-cap / mid)) < mean:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def rollout_seconds(w: Workload, pk_name: str, pk: Peak, kv_tokens: float, resp: float,
                    prompt: float) -> dict[str, float]:
    """Decode + prefill of one replica's share of the step's sequences (every replica runs in parallel; the step
    waits for the slowest, the one holding the step's longest response).

    Response lengths follow an exponential clipped at max_response_length with the mean response as its mean. A
    replica runs at most C sequences at once (its KV cache, max_num_seqs, the sequences it has): while more are
    queued, C decode at a time (the bulk); then the last C drain, fewer and fewer (memoryless: their remaining
    lengths follow the same law), until the step's longest response, cut at max_response_length, ends: the tail,
    where the per-iteration costs that do not shrink with the batch (weights
    read, kernel launches, TP all-reduces) dominate.
    """
    tp = max(w.rollout_tp, 1)
    replicas = max((w.rollout_gpus or w.n_gpus) // tp, 1)
    total = max(w.prompts * w.n, 1)
    seqs = total / replicas
    conc = max(1.0, min(seqs, w.max_num_seqs, kv_tokens / (prompt + resp + _state_tokens(w))))
    bw = pk.hbm_tb_s * 1e12 * DECODE_BW_ETA
    flops = pk.compute_tflops * 1e12
    cross_node = tp > max(w.rollout_per_node or w.gpus_per_node, 1)
    per_tp_layer = DECODE_TP_LAYER_S if w.enforce_eager else DECODE_TP_GRAPH_LAYER_S
    tp_comm = (per_tp_layer + (2 * CROSS_NODE_ALLREDUCE_S if cross_node else 0.0)) * w.layers if tp > 1 else 0.0
    # and their bytes: per layer two all-reduces of each running sequence's bf16 hidden state, of which a ring
    # sends 2 (TP − 1)/TP over the GPU's link (NVLink, PCIe on cards without it, the NIC across nodes)
    link = NIC_GB_S if cross_node else INTRA_NODE_GB_S.get(pk_name, INTRA_NODE_GB_S["H100"])
    tp_bytes = 2 * 2 * (tp - 1) / tp * w.hidden * 2 * w.layers / (link * 1e9) if tp > 1 else 0.0
    lora = decode_kernel_factor(w)  # vLLM's LoRA kernels beside a layer's own
    layer_floor = DECODE_LAYER_S * w.layers * lora
    eager = (EAGER_V0_LAYER_S if w.vllm_v0 else EAGER_LAYER_S) * w.layers * lora if w.enforce_eager else 0.0
    host = DECODE_STEP_S + eager + (EAGER_MOE_LAYER_S * w.moe_layers if w.enforce_eager else 0.0)

    def iteration(c: float, ctx: float) -> float:
        """The GPU's work (weights and KV cache read, or the FLOPs, + TP all-reduces) and the engine's host work
        (scheduling, sampling, detokenizing per sequence; kernel launches without CUDA graphs) overlap: the
        slower sets the pace."""
        weight_bytes = _replica_weight_bytes(w)
        if w.moe:  # a small batch reads only the experts its tokens route to
            touched = min(1.0, c * w.active_params / w.params)
            weight_bytes = 2 * (w.active_params + (w.params - w.active_params) * touched) / tp
        read = weight_bytes + c * (ctx * w.kv_bytes_per_token + 2 * w.state_bytes_per_seq)
        gpu = max(read / bw, 2 * w.active_params * c / tp / (flops * PREFILL_ETA)) + tp_comm + layer_floor \
            + tp_bytes * c
        return max(gpu, host + DECODE_SEQ_S * c)

    # vLLM's prefix cache (verl's default: rollout.enable_prefix_caching true) computes a prompt's n samples once
    prefill = 2 * w.active_params * seqs / max(w.n if w.prefix_caching else 1, 1) * prompt / tp / (flops * PREFILL_ETA)
    if w.streaming:  # a full engine the whole time: the samples' tokens at its throughput
        decode = seqs * resp / conc * iteration(conc, prompt + resp / 2)
        return {"decode bulk": decode, "decode tail": 0.0, "prefill": prefill, "concurrency": conc,
                "longest response": float(w.max_response), "generation rounds": 1.0,
                "rollout": (decode + prefill) * (1 + ROLLOUT_OVERHEAD)}
    m = length_scale(resp, w.max_response)
    queued = max(seqs - conc, 0.0)
    bulk = queued * resp / conc * iteration(conc, prompt + resp) if queued else 0.0
    # the drain: c(t) = C·e^(−t/m) sequences at iteration t (at least the one that is still running), holding a
    # context of prompt + t, until the step's longest response ends: at max_response_length, since among the
    # thousands of samples of a step some are cut there (verl logs the share as response_length/clip_ratio; a
    # reported 7B GRPO run averaging ~200 response tokens under an 8,192 cap generates for 68 s, as long as a tail
    # to the cap takes, where the exponential's expected maximum ends at ~1,900 tokens)
    end = float(w.max_response)
    k = 200
    drain = 0.0
    for i in range(k):
        t = (i + 0.5) * end / k
        drain += iteration(max(conc * math.exp(-t / m), 1.0), prompt + t) * end / k
    rounds = generation_rounds(w)
    gen = (bulk + drain + prefill) * rounds
    return {"decode bulk": bulk, "decode tail": drain, "prefill": prefill, "concurrency": conc,
            "longest response": end, "generation rounds": rounds, "rollout": gen * (1 + ROLLOUT_OVERHEAD)}


def generation_rounds(w: Workload) -> float:
    """Generation rounds per step: 1, or with DAPO's dynamic sampling enough rounds of `prompts` to keep
    train_prompts groups when FILTER_GROUPS_KEEP of them survive the filter."""
    if not w.filter_groups:
        return 1.0
    return float(math.ceil((w.train_prompts or w.prompts) / (w.prompts * FILTER_GROUPS_KEEP) - 1e-9))


def moe_dispatch_seconds(w: Workload, pk_name: str, pk: Peak, tokens_per_gpu: float, passes: float) -> float:
    """Seconds one GPU spends moving MoE tokens in `passes` passes (forward 1; forward + backward 2; + a recomputed
    forward 3) over `tokens_per_gpu` tokens: the all-to-all of dispatch and combine (tokens × top-k × hidden bf16
    bytes each way per MoE layer, the (EP − 1)/EP share that leaves the GPU; the part that crosses nodes over the
    NIC at A2A_NIC_ETA of it, the rest over NVLink at A2A_ETA, concurrently: the slower sets the pace), plus the
    permute and unpermute copies in HBM (each routed token written and read twice). 0 for a dense model."""
    if not w.moe_layers or not w.top_k:
        return 0.0
    routed = tokens_per_gpu * w.moe_layers * w.top_k * w.hidden * 2 * passes  # bf16 bytes, one direction
    permute = 4 * routed / (pk.hbm_tb_s * 1e12 * DECODE_BW_ETA)
    ep = max(w.expert_parallel, 1)
    if ep == 1:
        return permute
    gpn = max(w.gpus_per_node, 1)
    in_node = max(min(ep, gpn // max(w.expert_tp, 1)), 1)  # EP peers on the same node (consecutive ranks)
    intra = 2 * routed * (in_node - 1) / ep / (INTRA_NODE_GB_S.get(pk_name, INTRA_NODE_GB_S["H100"]) * 1e9)
    nic = 2 * routed * (ep - in_node) / ep / (NIC_GB_S * 1e9)
    return max(intra / A2A_ETA, nic / A2A_NIC_ETA) + permute


def expert_loop_seconds(w: Workload, passes: int) -> float:
    """Seconds per micro-batch of `passes` passes that run a MoE's routed experts one by one (EXPERT_LOOP_S each,
    every expert of every MoE layer: a micro-batch of hundreds of tokens routes to all of them); 0 for Megatron, a
    dense model or grouped experts."""
    if w.backend == "megatron" or not w.expert_loop:
        return 0.0
    return w.moe_layers * w.experts * EXPERT_LOOP_S * passes


def train_flops_per_token(w: Workload, attn: float) -> float:
    """An update's FLOPs per token: forward 2 × active params, backward 4 × (activation and weight gradients),
    attention's 1 + 2 (its context FLOPs `attn`); activation recompute repeats the forward. LoRA's frozen base has
    no weight gradients (backward 2 ×); its adapters train (6 × their parameters, a token's share of a MoE's)."""
    fwd = 2 * w.active_params + attn
    bwd = (2 if w.lora_params else 4) * w.active_params + 2 * attn + 6 * w.lora_params * w.active_params / max(
        w.params, 1.0)
    return fwd * (2 if w.recompute else 1) + bwd


def weight_sync_seconds(w: Workload, load: float) -> float:
    """The weight sync: a fixed cost, the bf16 bytes at the backend's rate, a cost per tensor, and loading offloaded
    weights. Unmerged LoRA ships the adapters alone once the engine holds the base (verl 0.9.1 engine_workers.py:
    770-789); Megatron then loads only them (megatron/transformer_impl.py:1018-1021), FSDP still stages the whole
    model (fsdp/transformer_impl.py:960-962)."""
    adapters = bool(w.lora_params and w.adapter_tensors)
    return SYNC_FIXED_S.get(w.backend, SYNC_FIXED_S["fsdp"]) + 2 * (w.lora_params if adapters else w.params) / 1e9 \
        / SYNC_GB_S.get(w.backend, SYNC_GB_S["fsdp"]) + (w.adapter_tensors if adapters else sync_tensors(w)) \
        * SYNC_TENSOR_S + (0.0 if adapters and w.backend == "megatron" else load)


def sync_tensors(w: Workload) -> int:
    """The checkpoint tensors a weight sync hands over one by one: the model's own count, else a dense layer's 12
    (q, k, v, o with biases, two norms, three MLP projections) per layer."""
    return w.weight_tensors or 12 * w.layers + 3


def driver_metrics_slot_s(w: Workload) -> float:
    """Seconds per padded response slot the driver spends on the old log-prob pass's metrics: the entropy's
    aggregation (its loss_agg_mode's rate, token-mean's for a mode not measured) and the rollout-vs-actor
    comparison."""
    agg = ENTROPY_AGG_SLOT_S.get(w.loss_agg_mode, ENTROPY_AGG_SLOT_S["token-mean"]) if w.driver_entropy else 0.0
    return agg + (DEBUG_METRICS_SLOT_S if w.rollout_logprobs else 0.0)


def driver_metrics_named(w: Workload) -> str:
    """What driver_metrics_slot_s counts, in words."""
    parts = [f"the entropy metric ({w.loss_agg_mode})"] if w.driver_entropy else []
    if w.rollout_logprobs:
        parts.append("the rollout-vs-actor log-prob comparison (rollout.calculate_log_probs)")
    return " and ".join(parts)


def _attn_flops_per_token(w: Workload, ctx: float) -> float:
    # QK^T and AV: 2 × 2 × layers × (query heads × head_dim) × context, a forward pass; a hybrid's GDN layers attend
    # to a fixed state instead (their projections are in the parameters' 2 × N)
    return 4 * (w.attn_layers or w.layers) * (w.attn_width or w.hidden) * ctx


def sequence_moments(prompt: float, resp: float, cap: float) -> tuple[float, float]:
    """E[L] and E[L²] of a step's sequence lengths L = prompt + response, the response exponential clipped at `cap`
    with mean `resp` (the rollout's law, length_scale)."""
    if resp <= 0 or cap <= 0:
        return prompt + max(resp, 0.0), (prompt + max(resp, 0.0)) ** 2
    m = length_scale(resp, cap)
    tail = math.exp(-cap / m)
    r1 = m * (1 - tail)  # E[R]
    r2 = 2 * m * m - tail * (2 * m * cap + 2 * m * m)  # E[R²]: ∫₀^cap r² e^(−r/m) dr / m + cap² e^(−cap/m)
    return prompt + r1, prompt * prompt + 2 * prompt * r1 + r2


def attention_context(prompt: float, resp: float, cap: float) -> float:
    """The mean causal context a training token attends to, E[L²] / (2 E[L]): a sequence of length L costs L² / 2
    context-token pairs, as verl's own FLOP counter sums them (seqlen_square_sum, utils/flops_counter.py:116-119 in
    v0.9.0). Long responses dominate: for an unclipped exponential it is the mean sequence, not half of it."""
    mean, square = sequence_moments(prompt, resp, cap)
    return square / (2 * mean) if mean > 0 else 0.0


def pipeline_slots(micros: float, pipeline: int, virtual: int = 1) -> float:
    """The schedule slots of a pipeline's m micro-batches (one optimizer step's) per micro-batch of work:
    (m + (PP − 1) / VPP) / m, the interleaved schedule's bubble being (PP − 1) / (VPP · m) of the work (Narayanan et
    al., SC'21, section 2.2.2); 1 without a pipeline."""
    if pipeline <= 1:
        return 1.0
    m = max(micros, 1.0)
    return (m + (pipeline - 1) / max(virtual, 1)) / m


def predict(w: Workload) -> StepTime:
    name, pk, assumed = peak(w.gpu_type)
    resp, prompt, why_r, why_p = _lengths(w)
    seq = prompt + resp
    seqs = (w.train_prompts or w.prompts) * w.n  # what the training passes see (DAPO: the kept groups)
    # without remove-padding the training passes run every sequence at the longest one's length
    tokens = seqs * (seq if w.remove_padding else w.max_prompt + w.max_response)
    kv = _kv_tokens(w, name)
    # the engine decodes the assistant turns; the tool outputs between them join the context (prefilled)
    tool = min(tool_tokens(w), resp / 2)
    ro = rollout_seconds(w, name, pk, kv, resp - tool, prompt + tool)
    phases: dict[str, float] = {"rollout": ro["rollout"]}
    load = offload_seconds(w) if w.offload_params else 0.0
    phases["weight sync"] = weight_sync_seconds(w, load)
    per_gpu_tokens = tokens / w.n_gpus
    attn = _attn_flops_per_token(w, attention_context(prompt, resp, w.max_response) if w.remove_padding
                                 else (w.max_prompt + w.max_response) / 2)

    dp = max(w.n_gpus // max(w.model_parallel * w.pipeline, 1), 1)
    rank_tokens = tokens / dp  # what one data-parallel rank (a model-parallel group) processes

    def micro_tokens(budget: int, micro: int) -> float:
        """Tokens of one micro-batch of a model-parallel group: the budget per GPU × the GPUs that split a sequence
        (FSDP: × Ulysses SP; Megatron: × CP only, TP ranks share the same tokens: verl 0.9.1
        workers/engine/megatron/transformer_impl.py:836, workers/engine/utils.py:111), capped by what the rank
        has; or micro-batch × its sequences' length (the mean, or without remove-padding the padded slot
        max_prompt + max_response: the same length the pass's tokens count)."""
        if w.dynamic_bsz and budget:
            scale = w.context_parallel if w.backend == "megatron" else w.model_parallel
            return min(budget * scale, max(rank_tokens, 1.0))
        return min((micro or 1) * (seq if w.remove_padding else w.max_prompt + w.max_response), max(rank_tokens, 1.0))

    def bubble(micros: float, batches: int) -> float:
        return pipeline_slots(micros / max(batches, 1), w.pipeline, w.virtual_pipeline)

    lp_tok = micro_tokens(w.logprob_tokens or w.train_tokens, w.logprob_micro or w.train_micro)
    lp_micros = rank_tokens / lp_tok
    fwd_flops = per_gpu_tokens * (2 * w.active_params + attn)
    fwd_moe = moe_dispatch_seconds(w, name, pk, per_gpu_tokens, 1)
    fwd_gather = fsdp_gather_seconds(w, name, lp_micros, 2)
    fwd_compute = max(_pass_seconds(fwd_flops, pk, FORWARD_ETA, FORWARD_INTENSITY) + fwd_moe, fwd_gather) \
        * bubble(lp_micros, 1)
    # a micro-batch's fixed cost is its kernel launches and Python, layer by layer: a pipeline stage runs 1/PP of the
    # layers, over the same m + PP − 1 schedule slots as its compute (the bubble)
    stage = 1.0 / max(w.pipeline, 1)
    fwd_micro = lp_micros * (FORWARD_MICRO_S * stage * bubble(lp_micros, 1) + expert_loop_seconds(w, 1))
    fwd = fwd_compute + fwd_micro
    # the driver ships each pass its batch padded to max_prompt + max_response (input_ids, attention_mask,
    # position_ids: int64; responses) and collects per-token results: bytes that do not shrink with more GPUs
    slots = seqs * (w.max_prompt + w.max_response)
    fwd_io = (24 * slots + 12 * seqs * w.max_response) / 1e9 / DRIVER_GB_S
    upd_io = (24 * slots + 28 * seqs * w.max_response) / 1e9 / DRIVER_GB_S
    fwd += fwd_io
    # the driver's metrics over the padded responses, one CPU thread, in the old log-prob pass's timer only
    debug = seqs * w.max_response * driver_metrics_slot_s(w)
    # LoRA: the actor's passes run the adapters (the reference is the actor with them off: ray_trainer.py:360)
    bw = pk.hbm_tb_s * 1e12 * DECODE_BW_ETA
    lora_fwd = adapter_seconds(w.adapter_io, per_gpu_tokens, bw) if w.lora_params else 0.0
    vis = seqs / dp * w.vision_fallback_s  # each pass runs the tower on a rank's share of the sequences
    if w.old_logprob:
        phases["old log-prob"] = fwd + lora_fwd + load + debug + vis
    if w.has_ref:
        phases["ref log-prob"] = fwd + load + vis
    tr_tok = micro_tokens(w.train_tokens, w.train_micro)
    # each mini-batch is split on its own (verl 0.9.1 workers/engine_workers.py:272-288 iterates the mini-batches,
    # engine/utils.py:92 prepare_micro_batches splits one): ceil(its tokens / the budget) micro-batches, the count
    # verl's rearrange_micro_batches takes (utils/seqlen_balancing.py:398), at least one per optimizer step
    minis = max(w.mini_batches, 1)
    tr_micros = minis * math.ceil(rank_tokens / minis / tr_tok - 1e-9) * w.ppo_epochs
    train_flops = per_gpu_tokens * train_flops_per_token(w, attn) * w.ppo_epochs
    optim = offload_seconds(w, optimizer=True) if w.offload_optimizer else 0.0
    upd_moe = moe_dispatch_seconds(w, name, pk, per_gpu_tokens, (3 if w.recompute else 2) * w.ppo_epochs)
    # bf16 gathers for the forward and the backward, the fp32 gradients' reduce-scatter (none for a frozen LoRA base)
    upd_gather = fsdp_gather_seconds(w, name, tr_micros, 4 if w.lora_params else 8, 0 if w.lora_params else 4)
    upd_loop = expert_loop_seconds(w, 3 if w.recompute else 2)
    upd_micro = tr_micros * (TRAIN_MICRO_S * stage * bubble(tr_micros, w.mini_batches) + upd_loop)
    lora_upd = adapter_update_seconds(w, per_gpu_tokens, bw)
    upd = max(_pass_seconds(train_flops, pk, TRAIN_ETA, TRAIN_INTENSITY) + upd_moe + lora_upd, upd_gather) \
        * bubble(tr_micros, w.mini_batches) + upd_micro
    upd += upd_io
    phases["update actor"] = upd + load + optim + vis * w.ppo_epochs
    if w.has_critic:
        ratio = (w.critic_params or w.params) / w.params
        phases["values"] = fwd * ratio + load * ratio
        phases["update critic"] = (upd + load + optim) * ratio
    assumptions: dict[str, object] = {
        "gpu": name + (f" (assumed: GPU type {w.gpu_type!r} unknown)" if assumed and w.gpu_type
                       else " (assumed: no GPU type given)" if assumed else ""),
        "bf16_tflops": pk.bf16_tflops, "hbm_tb_s": pk.hbm_tb_s, "gpu_source": pk.source,
        **({"bf16_tflops_sustained": pk.sustained_tflops} if pk.sustained_tflops else {}),
        "response_length_mean": round(resp), "response_length_mean_basis": why_r,
        "prompt_length_mean": round(prompt), "prompt_length_mean_basis": why_p,
        "rollout_concurrency_per_replica": round(ro["concurrency"]),
        "kv_cache_tokens_per_replica": round(kv),
        "train_flop_efficiency": TRAIN_ETA, "train_intensity_flop_per_byte": TRAIN_INTENSITY,
        "micro_batch_overhead_s": {"update": TRAIN_MICRO_S, "log-prob": FORWARD_MICRO_S},
        "train_micro_batch_tokens": round(tr_tok), "logprob_micro_batch_tokens": round(lp_tok),
        "train_micro_batches_per_rank": round(tr_micros), "logprob_micro_batches_per_rank": round(lp_micros),
        "decode_bandwidth_efficiency": DECODE_BW_ETA, "decode_iteration_overhead_s": DECODE_STEP_S,
        "longest_response_tokens": round(ro["longest response"]),
        "response_length_distribution": "exponential clipped at max_response_length, mean as above",
        "weight_sync_gb_s": SYNC_GB_S.get(w.backend, SYNC_GB_S["fsdp"]),
        "weight_sync_tensors": sync_tensors(w), "weight_sync_per_tensor_s": SYNC_TENSOR_S,
        **({"driver_metrics_s_per_slot": driver_metrics_slot_s(w), "driver_metrics_s": float(f"{debug:.3g}"),
            "driver_metrics": driver_metrics_named(w)} if debug and w.old_logprob else {}),
        **({"moe_all_to_all_efficiency": A2A_ETA, "moe_all_to_all_nic_efficiency": A2A_NIC_ETA,
            "moe_expert_parallel": w.expert_parallel} if w.moe_layers else {}),
        **lora_assumptions(w, lora_fwd, lora_upd),
        **({"vision_patch_embed_fallback_s_per_pass": round(vis, 1)} if vis else {}),
        "calibration": "tests/data/reference/step-times.json (benchmarks/step_times.md)",
    }
    detail = {k: v for k, v in ro.items() if k != "rollout"}
    detail.update({"old log-prob micro-batches": lp_micros, "update actor micro-batches": tr_micros,
                   "old log-prob micro-batches s": fwd_micro, "old log-prob driver metrics s": debug * w.old_logprob,
                   "update actor micro-batches s": upd_micro, "old log-prob moe dispatch s": fwd_moe,
                   "update actor moe dispatch s": upd_moe, "old log-prob fsdp gather s": fwd_gather,
                   "update actor fsdp gather s": upd_gather})
    return StepTime({k: phases[k] for k in PHASE_ORDER if k in phases}, assumptions, detail, overlap=w.overlap,
                    rollout_gpus=w.rollout_gpus, receive_s=fwd_io if w.overlap else 0.0)


__all__ = ["Workload", "StepTime", "predict", "micro_share", "peak", "rollout_unfit"]


def moe_layers(shape) -> int:
    """A shape's MoE layers (ModelShape.moe_layers; 0 for a dense model or a shape without it)."""
    return int(getattr(shape, "moe_layers", 0) or 0) if getattr(shape, "experts", 0) else 0
