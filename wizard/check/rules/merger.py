"""The model-merger command a launch script runs after training (`python -m verl.model_merger merge ...`), held to
the checkpoint the same script's run writes. verl 0.9.1 (paths under site-packages/verl/):

- VI684 (error): the merger's --backend does not fit what the run saves. The Megatron merger reads only
  <local_dir>/model/dist_ckpt (model_merger/megatron_model_merger.py:495-500, get_model_dist_checkpoint_path,
  utils/megatron_utils.py:1060-1064, which creates that folder empty when it is missing); the Megatron checkpoint
  manager writes Megatron shards there only with megatron.use_dist_checkpointing=True (its default is false,
  trainer/config/_generated_ppo_megatron_trainer.yaml:57): otherwise the 'model' slot is already Hugging Face weights
  under <local_dir>/model/huggingface (utils/checkpoint/megatron_checkpoint_manager.py:118-143, :245-254). The FSDP
  merger reads fsdp_config.json and model_world_size_*_rank_*.pt (model_merger/fsdp_model_merger.py:86-112), which
  only the FSDP engines write. Real case verl#4338 (bug 2): `merge --backend megatron` on a default Megatron run.
- VI685 (error): `--tie-word-embedding` for a model whose config says tie_word_embeddings=false. The flag is a bare
  store_true that nothing compares with the model (model_merger/base_model_merger.py:43-47); the Megatron merger then
  drops every output_layer tensor (megatron_model_merger.py:373-375) while it builds the model from the config's own
  tie_word_embeddings (:243, :254), so the exported lm_head is never written and loads uninitialised: the model
  emits garbage. Real case verl#2612 (Qwen3-30B-A3B, tie_word_embeddings=false).
- VI686 (warning; info when nothing in the script loads the export): merging an FSDP LoRA run. The merger writes the
  base weights under their own names to --target_dir and the adapter, unmerged, to <target_dir>/lora_adapter
  (save_lora_adapter, base_model_merger.py:311-408; save_hf_model_and_tokenizer :410-423): serving target_dir
  (`vllm serve <target_dir>` without --enable-lora) serves the untrained base model. Real case verl#7285 (and the
  question verl#3087).
- VI655 (error): `--backend fsdp` on the checkpoint of a model_engine=veomni run. The VeOmni engine saves through
  the FSDP checkpoint manager (workers/engine/veomni/transformer_impl.py:253) but its FSDP2 DTensors carry VeOmni's
  ('dp_shard',) mesh, and the merger asserts mesh_dim_names in (('fsdp',), ('ddp', 'fsdp'))
  (model_merger/fsdp_model_merger.py:138): AssertionError on every VeOmni checkpoint (verl PR#7942, merged after
  0.9.1). The accepted names come from that assert through scripts/verl_merger.py; the test runs verl's own
  FSDPModelMerger._calculate_shard_configuration on the CPU as the oracle.
- VI687 (error): the Megatron merger on a vision-language model. Its name table (params_mapping,
  megatron_model_merger.py:175-214) maps only the language decoder, embedding and output layer, and it builds a
  text-only GPT model from the config (:243-258), so a VL checkpoint's vision tower is not converted
  (verl#4498, Qwen2.5-VL-7B). With use_dist_checkpointing the Hugging Face weights come only from 'hf_model' in
  actor.checkpoint.save_contents (written through the bridge, megatron_checkpoint_manager.py:139-143).

The merger's options, folders and name table come from wizard/check/data/verl_merger.json, written from verl's
source by scripts/verl_merger.py (tests/test_check_merger.py regenerates it and compares).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from wizard.check.rules.context import A, M, Ctx, Facts, model_folder, script_text

SAVE = f"{A}.checkpoint.save_contents"
DIST = f"{A}.megatron.use_dist_checkpointing"
MAX_CONFIG_BYTES = 1 << 20


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(resources.files("wizard.check").joinpath("data/verl_merger.json").read_text(encoding="utf-8"))


@dataclass
class Merge:
    line: int
    backend: str | None
    local_dir: str | None
    target_dir: str | None
    flags: set[str] = field(default_factory=set)


def _commands(text: str) -> list[tuple[int, list[str]]]:
    """(first line, words) of each command of the script, backslash-continued lines joined; unparsable ones skipped."""
    out: list[tuple[int, list[str]]] = []
    start, buf = 0, ""
    for i, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = i
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        buf += raw
        try:
            words = shlex.split(buf, comments=True)
        except ValueError:
            words = []
        if words:
            out.append((start, words))
        buf = ""
    return out


def _option(words: list[str], name: str) -> str | None:
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def merges(text: str) -> list[Merge]:
    """The script's `verl.model_merger merge` commands (python -m / torchrun -m)."""
    found = []
    for line, words in _commands(text):
        if "verl.model_merger" not in words:
            continue
        at = words.index("verl.model_merger")
        if "merge" not in words[at + 1:at + 2]:
            continue
        rest = words[at + 2:]
        found.append(Merge(line, _option(rest, "--backend"), _option(rest, "--local_dir"), _option(rest, "--target_dir"),
                           {w.split("=", 1)[0] for w in rest if w.startswith("--")}))
    return found


def servers(text: str) -> list[tuple[str, bool]]:
    """(model path, adapters enabled) of each `vllm serve PATH` / `--model PATH` command of the script."""
    out = []
    for _, words in _commands(text):
        if "vllm" in words and "serve" in words:
            at = words.index("serve")
            path = words[at + 1] if at + 1 < len(words) and not words[at + 1].startswith("-") else None
        elif any("vllm.entrypoints" in w for w in words):
            path = _option(words, "--model")
        else:
            continue
        if path:
            out.append((path.rstrip("/"), "--enable-lora" in words or "--lora-modules" in words))
    return out


def _model_config(c: Ctx) -> dict[str, Any] | None:
    path = c.v(f"{M}.path")
    folder = model_folder(c, path) if isinstance(path, str) and not c.unknown(f"{M}.path") else None
    if folder is None or not (folder / "config.json").is_file():
        return None
    from wizard._io import read_user_file, safe_json

    try:
        doc = safe_json(read_user_file(str(folder / "config.json"), MAX_CONFIG_BYTES))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _tied(doc: dict[str, Any]) -> bool | None:
    """tie_word_embeddings as the model's config says it (its class default when config.json leaves it out)."""
    if isinstance(doc.get("tie_word_embeddings"), bool):
        return doc["tie_word_embeddings"]
    text = doc.get("text_config")
    if isinstance(text, dict) and isinstance(text.get("tie_word_embeddings"), bool):
        return text["tie_word_embeddings"]
    try:
        from transformers import CONFIG_MAPPING

        cls = CONFIG_MAPPING[doc.get("model_type")]
        return bool(getattr(cls(), "tie_word_embeddings", True))
    except Exception:  # noqa: BLE001 - an unknown model_type: say nothing
        return None


def _contents(value: object) -> list[str] | None:
    if isinstance(value, str):
        value = [p.strip().strip("'\"") for p in value.strip().strip("[]").split(",") if p.strip()]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else None


def rule_merger(c: Ctx, f: Facts) -> None:
    text = script_text(c)
    found = merges(text) if text else []
    if not found:
        return
    t = table()
    dist = c.v(DIST) if f.megatron else None
    dist = t["use_dist_checkpointing_default"] if dist is None else dist
    doc = _model_config(c)
    served = servers(text or "")
    for m in found:
        where = f"the merge at line {m.line}"
        _backend(c, f, m, where, bool(dist), t)
        if m.backend == "megatron" and "--tie-word-embedding" in m.flags and doc is not None and _tied(doc) is False:
            c.add("VI685", "error", (f"{M}.path",),
                  f"{where} passes --tie-word-embedding, but {M}.path's config has tie_word_embeddings=false: verl's "
                  "Megatron merger then skips every output_layer tensor (model_merger/megatron_model_merger.py:373-375) "
                  "and the exported lm_head is never written, so the merged model loads it uninitialised and emits "
                  "garbage (verl#2612)",
                  "drop --tie-word-embedding (pass it only for a model whose config.json has tie_word_embeddings=true)")
        if m.backend == "megatron" and f.megatron and dist and doc is not None and "vision_config" in doc \
                and not t["megatron_maps_vision"]:
            has_hf = "hf_model" in (_contents(c.v(SAVE)) or [])
            c.add("VI687", "error", (f"{M}.path", DIST, SAVE),
                  f"{where} converts a Megatron checkpoint of a vision-language model ({doc.get('architectures')}): "
                  "verl's Megatron merger maps only the language decoder, embedding and output layer "
                  "(megatron_model_merger.py:175-214) and builds a text-only model (:243-258), so the vision tower "
                  "is not converted (verl#4498)",
                  f"read the Hugging Face weights at <local_dir>/{t['megatron_hf']} instead" + (
                      "" if has_hf else f", which the run writes only with 'hf_model' in {SAVE} (through the bridge, "
                      "megatron_checkpoint_manager.py:139-143)"))
        if not f.megatron and f.lora > 0 and m.backend in (None, "fsdp"):
            _lora(c, f, m, where, served, t)


def _backend(c: Ctx, f: Facts, m: Merge, where: str, dist: bool, t: dict[str, Any]) -> None:
    if m.backend not in t["backends"]:
        return
    if m.backend == "megatron" and f.megatron and not dist:
        c.add("VI684", "error", (DIST,),
              f"{where} runs the Megatron merger, which reads only <local_dir>/{t['megatron_dist_ckpt']} "
              "(megatron_model_merger.py:495-500), but with "
              f"{DIST}=False this run saves no Megatron shards: its 'model' slot is already Hugging Face weights at "
              f"<local_dir>/{t['megatron_hf']} (megatron_checkpoint_manager.py:118-143), and the merge fails "
              "(verl#4338)",
              f"skip the merge and load <local_dir>/{t['megatron_hf']} directly (or set {DIST}=True, with "
              f"{A}.megatron.dist_checkpointing_path, to save Megatron shards for the merger)")
    elif m.backend == "fsdp" and not f.megatron and _veomni(c) and ["dp_shard"] not in t["fsdp_mesh_dim_names"]:
        names = t["fsdp_mesh_dim_names"]
        c.add("VI655", "error", ("model_engine", f"{A}.strategy"),
              f"{where} runs the FSDP merger on a model_engine=veomni checkpoint: VeOmni's FSDP2 shards carry a "
              f"('dp_shard',) device mesh and verl's merger accepts only {' or '.join(str(tuple(n)) for n in names)} "
              "(model_merger/fsdp_model_merger.py:138), so it stops with AssertionError: Unsupported mesh_dim_names "
              "('dp_shard',) (verl PR#7942, after 0.9.1)",
              f"add 'hf_model' to {SAVE} so the run writes Hugging Face weights to <local_dir>/huggingface, and drop "
              "the merge")
    elif m.backend == "megatron" and not f.megatron or m.backend == "fsdp" and f.megatron:
        engine = "Megatron" if f.megatron else "FSDP"
        c.add("VI684", "error", (f"{A}.strategy",),
              f"{where} passes --backend {m.backend}, but this run trains with the {engine} engine: the "
              f"{m.backend} merger reads files the {engine} checkpoint manager does not write "
              "(fsdp_model_merger.py:86-112: fsdp_config.json and model_world_size_*_rank_*.pt; "
              f"megatron_model_merger.py:495-500: {t['megatron_dist_ckpt']})",
              f"pass --backend {'megatron' if f.megatron else 'fsdp'}" + (
                  f" (or, with {DIST}=False, load <local_dir>/{t['megatron_hf']} directly)" if f.megatron else ""))


def _veomni(c: Ctx) -> bool:
    return "veomni" in (c.v("model_engine"), c.v(f"{A}.strategy"))


def _lora(c: Ctx, f: Facts, m: Merge, where: str, served: list[tuple[str, bool]], t: dict[str, Any]) -> None:
    target = (m.target_dir or "tmp").rstrip("/")
    bare = [p for p, lora in served if p == target and not lora]
    adapter = f"{target}/{t['lora_adapter_dir']}"
    message = (f"{where} exports a LoRA run ({M}.lora_rank={f.lora}): verl's merger writes the base weights to "
               f"{target} and the trained adapter, unmerged, to {adapter} (model_merger/base_model_merger.py:311-423)")
    hint = (f"merge it yourself: PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained('{target}'), "
            f"'{adapter}').merge_and_unload().save_pretrained(...), or serve the adapter: vllm serve {target} "
            f"--enable-lora --lora-modules trained={adapter}")
    if bare:
        c.add("VI686", "warning", (f"{M}.lora_rank",),
              message + f"; the script then serves {target} without the adapter, which is the untrained base model "
              "(verl#7285)", hint)
    else:
        c.add("VI686", "info", (f"{M}.lora_rank",), message + ": loading that folder alone gives the base model "
              "(verl#7285)", hint)

