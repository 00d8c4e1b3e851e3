"""Training precision names and the rollout's dtype against the trainer's (VI613, VI614), verl 0.9.1.

verl turns every training dtype of its engines into a torch dtype with PrecisionType.to_dtype
(utils/torch_dtypes.py:61-69), which knows only the names of its HALF_LIST, FLOAT_LIST and BFLOAT_LIST
(utils/torch_dtypes.py:20-22) and raises RuntimeError("unexpected precision: ...") for any other.
scripts/verl_precision_names.py writes those names and the engines' calls (wizard/check/data/verl_precision_names.json).

- VI613 (error): a role's precision key holds a name to_dtype does not know. The FSDP engine reads
  fsdp_config.model_dtype (workers/engine/fsdp/transformer_impl.py:258-264) and mixed_precision.param_dtype /
  reduce_dtype / buffer_dtype (:391-395), the Megatron engine megatron.dtype (megatron/transformer_impl.py:292),
  both while the workers build the model, after Ray has started them and the GPUs are held (yaof20/Flash-RL#39:
  model_dtype=int8, "unexpected precision: int8"). Only the roles that run are read: the reference when a KL term
  uses it and no LoRA puts it in the actor (trainer/ppo/v1/trainer_base.py:234-237), the critic when one is built;
  in the SFT trainer the one `engine` section.
- VI614 (warning): the rollout generates in the other 16-bit format than the actor trains in. verl hands
  rollout.dtype to vLLM / SGLang / TensorRT-LLM (vllm_async_server.py:326, async_sglang_server.py:316,
  trtllm_async_server.py:227; its own comment: "Align with actor model's FSDP/Megatron type",
  trainer/config/rollout/rollout.yaml:42); the FSDP actor computes in mixed_precision.param_dtype, bf16 when unset
  (fsdp/transformer_impl.py:391-403, autocast :1555-1565), the Megatron actor in megatron.dtype (bfloat16 by default,
  trainer/config/engine/megatron.yaml:120). fp16 and bf16 round differently (10 against 7 mantissa bits), so the
  rollout samples from a policy whose log-probs differ from the ones the actor recomputes by more than either
  format's own noise: the off-policy gap that fp16 RL removes only when actor, reference and rollout all run fp16
  (verl PR#4036). model.override_config.torch_dtype does not change it: it only edits the HF config
  (workers/config/model.py:204-220).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import REF, A, M, R, Ctx, Facts

FSDP = ("fsdp", "fsdp2")
MIXED = ("param_dtype", "reduce_dtype", "buffer_dtype")
# the argument text of each engine's to_dtype call (the table's readers) for the key it reads
READER_ARG = {"model_dtype": ("fsdp/", "torch_dtype"), "param_dtype": ("fsdp/", "'param_dtype'"),
              "reduce_dtype": ("fsdp/", "'reduce_dtype'"), "buffer_dtype": ("fsdp/", "'buffer_dtype'"),
              "dtype": ("megatron/", "engine_config.dtype")}
ALIASES = {"half": "fp16", "float": "fp32"}  # torch's other names: no fix is surer than these
# the rollout engines' dtype names (vLLM's --dtype choices) for the two 16-bit formats
ROLLOUT_16 = {"half": "fp16", "float16": "fp16", "fp16": "fp16", "bfloat16": "bf16", "bf16": "bf16"}
ENGINES = ("vllm", "sglang", "trtllm")


@cache
def precision_table() -> dict[str, Any]:
    """scripts/verl_precision_names.py's table: names (dtype → config values) and readers (file:line argument)."""
    text = resources.files("wizard.check").joinpath("data/verl_precision_names.json").read_text(encoding="utf-8")
    return json.loads(text)


def dtype_of(value: Any) -> str | None:
    """'fp16' / 'fp32' / 'bf16' for a value verl's PrecisionType.to_dtype accepts, None for one it raises on."""
    for dtype, names in precision_table()["names"].items():
        if not isinstance(value, bool) and value in names:
            return dtype
    return None


def _reader(leaf: str) -> str:
    folder, arg = READER_ARG[leaf]
    hit = next((r for r in precision_table()["readers"] if folder in r and r.endswith(arg)), "")
    return hit.split()[0].removeprefix("verl/") if hit else "verl/workers/engine"


def _ref_in_actor(c: Ctx) -> bool:
    """verl computes the reference with the actor's engine (adapters off) when a LoRA rank or adapter is set."""
    lora = (c.int(f"{M}.lora.rank") or 0) > 0 or (c.int(f"{M}.lora_rank") or 0) > 0
    return lora or bool(c.v(f"{M}.lora_adapter_path"))


def precision_keys(c: Ctx, f: Facts) -> list[tuple[str, str]]:
    """(role, key) for every precision key an engine that runs passes to PrecisionType.to_dtype."""
    if c.src.entry == "sft":
        roles = [("SFT model", "engine", "engine.strategy", "engine")]
    else:
        roles = [("actor", A, f"{A}.strategy", f"{A}.fsdp_config")]
        if f.use_ref and not _ref_in_actor(c):
            roles.append(("reference", REF, f"{REF}.strategy", f"{REF}.fsdp_config"))
        if f.use_critic:
            roles.append(("critic", "critic", "critic.strategy", "critic.fsdp"))
    out = []
    for role, prefix, strategy_key, fsdp in roles:
        strategy = c.v(strategy_key)
        if strategy in FSDP:
            out += [(role, f"{fsdp}.model_dtype")] + [(role, f"{fsdp}.mixed_precision.{k}") for k in MIXED]
        elif strategy == "megatron":
            out.append((role, f"{prefix}.dtype" if prefix == "engine" else f"{prefix}.megatron.dtype"))
    return out


def rule_precision_names(c: Ctx, f: Facts) -> None:
    """VI613: a precision name verl's PrecisionType.to_dtype raises on, in a key an engine that runs reads."""
    known = ", ".join(str(n) for names in precision_table()["names"].values() for n in names if isinstance(n, str))
    for role, key in precision_keys(c, f):
        value = c.v(key)
        if value is None or c.unknown(key) or dtype_of(value) is not None:
            continue
        leaf = key.rsplit(".", 1)[1]
        sure = ALIASES.get(str(value).lower(), str(value).lower() if dtype_of(str(value).lower()) else None)
        plus = [key] if ".mixed_precision." in key else []
        c.add("VI613", "error", (key,),
              f"{key}={value}: verl's PrecisionType.to_dtype knows only {known} (utils/torch_dtypes.py:20-22, 61-69) "
              f"and raises RuntimeError \"unexpected precision: {value}\" when the {role}'s engine builds the model "
              f"({_reader(leaf)}), after Ray has started the workers",
              f"set {key}={sure}" if sure else
              f"set {key} to bf16, fp16 or fp32 (a quantized rollout is rollout.quantization=fp8, not a training "
              "dtype)", fix=Fix(set={key: sure}, plus=plus) if sure else None)


def training_dtype(c: Ctx) -> tuple[str | None, str]:
    """The actor's compute dtype ('fp16' / 'bf16' / 'fp32', None when unknown) and the key that sets it."""
    strategy = c.v(f"{A}.strategy")
    if strategy in FSDP:
        key = f"{A}.fsdp_config.mixed_precision.param_dtype"
        if c.unknown(key) or c.unknown(f"{A}.fsdp_config.mixed_precision"):
            return None, key
        value = c.v(key)
        return ("bf16" if value is None else dtype_of(value)), key  # fsdp/transformer_impl.py:391-398
    if strategy == "megatron":
        key = f"{A}.megatron.dtype"
        return (None if c.unknown(key) else dtype_of(c.v(key))), key
    return None, ""


def rule_rollout_train_dtype(c: Ctx, f: Facts) -> None:
    """VI614: rollout.dtype fp16 against a bf16 actor, or bf16 against an fp16 one."""
    key = f"{R}.dtype"
    if c.v(f"{R}.name") not in ENGINES or c.unknown(key):
        return
    rollout = ROLLOUT_16.get(str(c.v(key)).lower())
    train, train_key = training_dtype(c)
    if rollout is None or train not in ("fp16", "bf16") or rollout == train:
        return
    said = c.v(train_key) if c.set_by_user(train_key) else None
    how = f"{train_key}={said}" if said is not None else f"{train_key} unset: verl's default {train}"
    override = c.v(f"{M}.override_config.torch_dtype")
    note = (f"; {M}.override_config.torch_dtype={override} only edits the HF config (workers/config/model.py:204-220), "
            "not the compute dtype") if override is not None else ""
    name = {"fp16": "float16", "bf16": "bfloat16"}[train]
    fsdp = train_key.endswith("param_dtype")
    plus = "" if c.set_by_user(train_key) or not fsdp else "+"
    where = "fsdp/transformer_impl.py:391-403" if fsdp else "megatron/transformer_impl.py:292"
    c.add("VI614", "warning", (key, train_key),
          f"{key}={c.v(key)} but the actor trains in {train} ({how}; {where}){note}: "
          f"the rollout samples in {rollout} and the actor recomputes every log-prob in {train}, so the two policies "
          "differ by more than either format's rounding, an off-policy gap each step (rollout.yaml:42: \"Align with "
          "actor model's FSDP/Megatron type\")",
          f"set {key}={name}, or train in {rollout} too: {plus}{train_key}="
          + (rollout if fsdp else {"fp16": "float16", "bf16": "bfloat16"}[rollout])
          + (" and the reference's the same (verl PR#4036: actor, ref and rollout all fp16)" if rollout == "fp16"
             else ""))
