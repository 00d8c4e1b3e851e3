"""The attention kernel verl's FSDP engine trains a model with, against the model family's attention (VI642-VI644;
paths under site-packages/verl, verl 0.9.1). The table, wizard/check/data/verl_attention_kernels.json, is written by
scripts/verl_attention_kernels.py from verl's and transformers' source.

verl passes `model.override_config.attn_implementation`, flash_attention_2 when unset (workers/config/model.py:185),
to AutoConfig.from_pretrained, and the FSDP engine loads the model with that config (workers/engine/fsdp/
transformer_impl.py:276-280); an FSDP critic is loaded by load_valuehead_model with flash_attention_2 whatever its
override says (utils/model.py:649, 674). Only a model folder on this machine (or a hub id's cached snapshot) is read:
its config.json, bounded; nothing is fetched.

- VI642 (error): an attention layer with a head dimension above 256 (config.json's head_dim / global_head_dim, else
  hidden_size / num_attention_heads, at the top and in every nested *_config) under a flash-attention kernel.
  flash-attn 2 and 3 take head dimensions up to 256 (flash_api.cpp: "FlashAttention forward only supports head
  dimension at most 256"): the first training forward, after the first rollout, stops. Real case verl PR#7131:
  Gemma 4, whose full-attention layers use global_head_dim=512 (transformers models/gemma4/modeling_gemma4.py:1189).
- VI643 (warning; error for sdpa where transformers has no sdpa path for the model, `_supports_sdpa = False`: gpt-oss,
  refused when the worker builds it): a model whose attention has learned sinks (transformers passes `s_aux=` to the attention
  function: gpt_oss, ...) trained with an attention other than eager. flash-attn 2's kernels take no sink argument,
  and transformers hands `s_aux` only to a kernel that declares it (modeling_flash_attention_utils.py
  _process_flash_attention_kwargs), so the sinks drop out of the training forward; transformers 5 instead swaps
  gpt-oss to the hub kernel kernels-community/vllm-flash-attn3 (modeling_utils.py
  _check_and_adjust_attn_implementation; Hopper only, needs the `kernels` package). The rollout engine applies the
  sinks: the trainer's log-probs then differ from the rollout's (real case verl#3894, high
  training/rollout log-prob mismatch on gpt-oss-20B; the thread's fix and verl's docs/advance/
  attention_implementation.rst: override_config.attn_implementation=eager).
- VI644 (error): such a model with Ulysses sequence parallel > 1 on the FSDP actor. verl's Ulysses attention
  (models/transformers/monkey_patch.py:87) splits the query heads across the sequence-parallel ranks and passes every
  other argument, the per-head sink tensor included, through whole: the flash kernel then stops ("s_aux must have
  shape (num_heads)", real case verl PR#4551, still open for 0.9.1); verl installs that wrapper only on the
  flash-attention entry point (:543-551), so eager does not take part in the all-to-all either.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, M, Ctx, Facts, folder_json, model_folder
from wizard.check.shellargs import PLACEHOLDER

FSDP_STRATEGIES = ("fsdp", "fsdp2")
FLASH = ("flash_attention_2", "flash_attention_3")
MAX_FLASH_HEAD_DIM = 256  # flash-attn 2 and 3 (csrc/flash_attn/flash_api.cpp; hopper/flash_api.cpp)


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_attention_kernels.json").read_text(encoding="utf-8")
    return json.loads(text)


def _config(folder: Path) -> dict | None:
    return folder_json(folder, "config.json")


def _configs(doc: dict) -> list[tuple[str, dict]]:
    """The config and every nested *_config mapping (text_config, vision_config, ...), with their names."""
    out = [("", doc)]
    for key, value in doc.items():
        if key.endswith("_config") and isinstance(value, dict):
            out += [(f"{key}.{name}" if name else key, sub) for name, sub in _configs(value)]
    return out


def head_dims(doc: dict) -> list[tuple[str, int]]:
    """(config key, head dimension) of every attention a config declares."""
    out = []
    for name, cfg in _configs(doc):
        where = f"{name}." if name else ""
        found = [(f"{where}{k}", cfg[k]) for k in ("head_dim", "global_head_dim")
                 if isinstance(cfg.get(k), int) and not isinstance(cfg.get(k), bool)]
        hidden, heads = cfg.get("hidden_size"), cfg.get("num_attention_heads")
        if not any(k.endswith(".head_dim") or k == "head_dim" for k, _ in found) and isinstance(hidden, int) \
                and isinstance(heads, int) and heads > 0 and hidden % heads == 0:
            found.append((f"{where}hidden_size/num_attention_heads", hidden // heads))
        out += found
    return out


def model_types(doc: dict) -> set[str]:
    return {cfg["model_type"] for _, cfg in _configs(doc) if isinstance(cfg.get("model_type"), str)}


def _model_doc(c: Ctx, key: str) -> tuple[str, dict] | None:
    path = c.v(key)
    if not isinstance(path, str) or not path or c.unknown(key) or PLACEHOLDER in path:
        return None
    folder = model_folder(c, path)
    doc = _config(folder) if folder is not None else None
    return (path, doc) if doc is not None else None


def rule_attention_kernels(c: Ctx, f: Facts) -> None:
    t = table()
    default, where = t["default_attention"]["value"], t["default_attention"]["where"]
    if c.v(f"{A}.strategy") in FSDP_STRATEGIES and (found := _model_doc(c, f"{M}.path")) is not None:
        path, doc = found
        key = f"{M}.override_config.attn_implementation"
        if c.unknown(key):
            return
        given = c.set_by_user(key) and isinstance(c.v(key), str)
        attn = c.v(key) if given else default
        said = f"{key}={attn}" if given else f"attention {attn} (verl's default, {where})"
        plus = _plus(c, key)
        _head_dim(c, "actor", path, doc, attn, said, (key,),
                  f"set {plus}{key}=sdpa (or eager): the FSDP actor and reference then load the model with it",
                  Fix(set={plus + key: "sdpa"}))
        sinks = sorted(model_types(doc) & set(t["sink_model_types"]))
        if sinks and attn == "sdpa" and sinks[0] in t["sink_model_types_without_sdpa"]:
            c.add("VI643", "error", (key, f"{M}.path"),
                  f"{key}=sdpa on {path} ({sinks[0]}, attention sinks): transformers has no sdpa path for it "
                  "(_supports_sdpa = False) and refuses it when the worker builds the model",
                  f"set {plus}{key}=eager (verl's docs/advance/attention_implementation.rst)",
                  fix=Fix(set={plus + key: "eager"}))
        elif sinks and attn != "eager":
            c.add("VI643", "warning", (key, f"{M}.path"),
                  f"{path} is {sinks[0]}, whose attention has learned sinks (transformers passes s_aux), trained with "
                  f"{said}: transformers hands the sinks only to a kernel that declares them (flash-attn 2 does "
                  "not: they drop out of the trainer's forward; transformers 5 swaps gpt-oss to the Hopper-only hub "
                  "kernel vllm-flash-attn3), while the rollout applies them: the trainer's log-probs differ from the "
                  "rollout's (verl#3894)",
                  f"set {plus}{key}=eager (verl's docs/advance/attention_implementation.rst)",
                  fix=Fix(set={plus + key: "eager"}))
        sp = f.sp
        if sinks and sp > 1:
            ulysses = t["ulysses"]
            c.add("VI644", "error", (f"{A}.ulysses_sequence_parallel_size", f"{M}.path"),
                  f"Ulysses sequence parallel {sp} on {path} ({sinks[0]}, attention sinks): verl's Ulysses attention "
                  f"({ulysses['where']}:{ulysses['line']}) splits the query heads across the {sp} ranks but passes "
                  "the per-head sinks whole (\"s_aux must have shape (num_heads)\" in the first training forward, "
                  "verl PR#4551), and wraps only the flash-attention entry point, so eager is not split either",
                  f"set {A}.ulysses_sequence_parallel_size=1 (and its fsdp_config copy); shorten the sequences or "
                  "offload instead")
    if f.use_critic and c.v("critic.strategy") in FSDP_STRATEGIES and (found := _model_doc(c, "critic.model.path")):
        path, doc = found
        critic = t["critic_attention"]
        lines = ", ".join(str(n) for n in critic["lines"])
        _head_dim(c, "critic", path, doc, critic["values"][0],
                  f"attention {critic['values'][0]} (load_valuehead_model, {critic['where']}:{lines}, whatever "
                  "critic.model.override_config says)", (),
                  "no setting changes an FSDP critic's attention in verl 0.9.1: use a critic model with head "
                  "dimensions ≤ 256, the Megatron engine, or a critic-free estimator (algorithm.adv_estimator=grpo)")


def _plus(c: Ctx, key: str) -> str:
    """"+" where an override of `key` must add it (verl's override_config is an empty mapping): as the user's own
    override wrote it, else "" for a key the user's YAML sets and "+" for one nobody sets."""
    for text in reversed(c.src.overrides):
        name = text.split("=", 1)[0]
        if name.lstrip("+~") == key:
            return "+" if name.startswith("+") else ""
    return "" if c.set_by_user(key) else "+"


def _head_dim(c: Ctx, role: str, path: str, doc: dict, attn: str, said: str, keys: tuple[str, ...],
              hint: str, fix: Fix | None = None) -> None:
    if attn not in FLASH:
        return
    over = [(k, d) for k, d in head_dims(doc) if d > MAX_FLASH_HEAD_DIM]
    if not over:
        return
    name, dim = max(over, key=lambda kd: kd[1])
    c.add("VI642", "error", (*keys, "critic.model.path" if role == "critic" else f"{M}.path"),
          f"the {role} model {path} has attention layers of head dimension {dim} ({name}) and is trained with "
          f"{said}: flash-attn takes head dimensions up to {MAX_FLASH_HEAD_DIM} and stops the first training "
          "forward, after the first rollout (\"FlashAttention forward only supports head dimension at most 256\", "
          "verl PR#7131)", hint, fix=fix)
