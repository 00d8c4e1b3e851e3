"""The attention backend an SGLang rollout runs with, against the card and the model (VI958, VI959).

verl 0.9.1 never lets SGLang choose its attention backend: SGLangHttpServer.launch_server
(workers/rollout/sglang_rollout/async_sglang_server.py) pops `engine_kwargs.sglang.attention_backend` (:277) and,
when it is unset, picks one with no look at the card or the model (:289-297): "aiter" on ROCm, "flashinfer" when the
installed sglang is 0.5.12 or later, else "fa3". The value goes to SGLang's ServerArgs (:332), so SGLang's own
per-device choice never runs, and a backend the card cannot run stops the rollout server at start-up, inside the
rollout worker, after the GPUs are booked. What SGLang refuses (SGLang's source, not verl's):
- fa3 (FlashAttention 3): sglang's create_flashattention_v3_backend (srt/layers/attention/attention_registry.py)
  asserts compute capability major 8 (non-MLA models) or 9: "FlashAttention v3 Backend requires SM>=80 and SM<=90";
  so it fails on Blackwell (B200/GB200 10.0, B300 10.3, RTX 50xx 12.0) and on Volta/Turing;
- flashinfer for a hybrid GDN model (GatedDeltaNet + full attention: Qwen3-Next, Qwen3.5) on a datacenter Blackwell
  card (major 10): sglang 0.5.17 asserts "Only {'trtllm_mha', 'triton', 'fa4'} backends are supported on Blackwell
  GPUs for hybrid GDN models" (sglang#35080, found running verl's own one-step-off delta-sync example on B300).

- VI958 (error): the backend SGLang gets is one it refuses on this card for this model: `engine_kwargs.sglang.
  attention_backend=fa3` on a card outside major 8/9; `flashinfer` on a major-10 card for a hybrid GDN model; or the
  key left unset for a hybrid GDN model on a Blackwell card, where both of verl's CUDA defaults are refused (fa3 by
  the card, flashinfer by the model); or unset on a Blackwell card with an sglang older than 0.5.12 installed here.
- VI959 (warning): the key unset on a Blackwell card for another model, with no sglang installed here to read: verl
  gives fa3 (refused there) to an sglang older than 0.5.12 and flashinfer to a newer one.

Both SGLang servers verl starts are read: the actor's rollout (actor_rollout_ref.rollout, serving
actor_rollout_ref.model.path) and a served reward model (reward.reward_model.rollout, serving
reward.reward_model.model_path, when reward.reward_model.enable=True); each has its own engine_kwargs.sglang.

The card comes from --gpu-type (wizard.verlspec.hardware's compute capabilities; ROCm and Ascend cards are left out:
verl gives ROCm "aiter"). A hybrid GDN model is one whose config.json (or a nested text_config) has a model_type verl
patches as a GatedDeltaNet family (models/transformers/npu_patch.py NPU_PATCHES: the entries that replace a
`*RMSNormGated.forward`) or a `layer_types` entry "linear_attention" (verl's own test, utils/flops_counter.py:271-275).
The defaults, their lines and the GDN families come from verl's source: wizard/check/data/verl_sglang_attention.json,
written by scripts/verl_sglang_attention.py.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.attention_kernels import _configs, _model_doc, model_types
from wizard.check.rules.context import M, R, Ctx, Facts
from wizard.verlspec.hardware import accelerator_of_gpu_type, compute_capability_of_gpu_type

ATTN = ".engine_kwargs.sglang.attention_backend"
KEY = f"{R}{ATTN}"
SERVERS = {R: f"{M}.path", "reward.reward_model.rollout": "reward.reward_model.model_path"}
FA3_MAJORS = (8, 9)  # sglang attention_registry.py create_flashattention_v3_backend
GDN_BLACKWELL_MAJOR = 10  # sglang 0.5.17's hybrid-GDN gate (sglang#35080: B300, sm_103)
GDN_BLACKWELL_BACKENDS = ("trtllm_mha", "triton", "fa4")  # the backends that gate allows
SAFE = "triton"  # SGLang's Triton backend: no compute-capability assert, and allowed for hybrid GDN on Blackwell


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_sglang_attention.json").read_text(encoding="utf-8")
    return json.loads(text)


def is_hybrid_gdn(doc: dict) -> bool:
    t = table()
    if model_types(doc) & set(t["gdn_model_types"]):
        return True
    return any(isinstance(cfg.get("layer_types"), list) and t["gdn_layer_type"] in cfg["layer_types"]
               for _, cfg in _configs(doc))


def installed_sglang() -> str | None:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # noqa: BLE001 - not installed (the usual case on a launch host)
        return None


def _older(ver: str, than: str) -> bool:
    def parts(s: str) -> tuple[int, ...]:
        out = []
        for p in s.split(".")[:3]:
            digits = "".join(ch for ch in p if ch.isdigit())
            out.append(int(digits) if digits else 0)
        return tuple(out)

    return parts(ver) < parts(than)


def refusal(backend: str, major: int, gdn: bool) -> str | None:
    """Why SGLang refuses `backend` on a card of compute capability major `major` (None when it runs)."""
    if backend == "fa3" and major not in FA3_MAJORS:
        return ("SGLang's fa3 backend asserts compute capability major 8 or 9 (\"FlashAttention v3 Backend requires "
                "SM>=80 and SM<=90\", sglang attention_registry.py)")
    if backend == "flashinfer" and gdn and major == GDN_BLACKWELL_MAJOR:
        return (f"SGLang allows only {', '.join(GDN_BLACKWELL_BACKENDS)} for a hybrid GDN model on Blackwell "
                "(\"Only {'trtllm_mha', 'triton', 'fa4'} backends are supported on Blackwell GPUs for hybrid GDN "
                "models\", sglang 0.5.17; sglang#35080)")
    return None


def rule_sglang_attention(c: Ctx, f: Facts) -> None:
    """VI958 / VI959, for the actor's rollout and a served reward model (verl starts both with SGLangHttpServer)."""
    if accelerator_of_gpu_type(c.hw.gpu_type or "") not in (None, "nvidia"):
        return
    found = compute_capability_of_gpu_type(c.hw.gpu_type)
    if found is None:
        return
    for rollout, model_key in SERVERS.items():
        if rollout.startswith("reward.") and c.v("reward.reward_model.enable") is not True:
            continue
        if c.v(f"{rollout}.name") == "sglang" and not c.unknown(f"{rollout}{ATTN}"):
            _server(c, found, f"{rollout}{ATTN}", model_key)


def _server(c: Ctx, found: tuple[str, tuple[int, int]], key: str, model_key: str) -> None:
    """One SGLang server: its attention_backend key and the key of the model it serves."""
    name, (major, minor) = found
    card = f"--gpu-type {c.hw.gpu_type} ({name}, compute capability {major}.{minor})"
    got = _model_doc(c, model_key)
    gdn = got is not None and is_hybrid_gdn(got[1])
    model = f"{model_key}={got[0]} is a hybrid GDN model" if gdn else ""
    fix = Fix(set={"++" + key: SAFE})  # ++: engine_kwargs.sglang has no such key in verl's tree, a YAML may have it
    hint = f"set ++{key}={SAFE} (" + \
        ("or trtllm_mha / fa4, " if major == GDN_BLACKWELL_MAJOR else "") + "a backend SGLang runs on this card)"
    d = table()["launch_server"]
    where = f"async_sglang_server.py:{d['default_lines'][0]}-{d['default_lines'][1]}"
    backend = c.v(key)
    if isinstance(backend, str) and backend:
        why = refusal(backend, major, gdn)
        if why:
            c.add("VI958", "error", (key, model_key),
                  f"{key}={backend} on {card}{'; ' + model if model else ''}: {why}; verl hands it to SGLang as it "
                  "is (async_sglang_server.py:332), so the rollout server dies at start-up, after the GPUs are booked",
                  hint, fix=fix)
        return
    if major in FA3_MAJORS:
        return  # both of verl's CUDA defaults run on SM 8.x / 9.x
    older, newer, since = d["older"], d["newer"], d["sglang_from"]
    refused = {b: refusal(b, major, gdn) for b in (older, newer)}
    head = (f"{key} is unset, so verl picks SGLang's backend itself ({where}: {newer} with sglang >= {since}, "
            f"else {older}; no look at the card or the model), on {card}")
    ver = None if refused[older] and refused[newer] else installed_sglang()
    pick = None if ver is None else (older if _older(ver, since) else newer)
    if refused[older] and refused[newer]:
        why = f"{model}: {older} is refused ({refused[older]}) and so is {newer} ({refused[newer]})"
    elif pick is not None:
        why = f"the sglang installed here is {ver}, so verl gives it {pick}: {refused[pick]}" if refused[pick] else ""
    else:
        bad = [b for b in (older, newer) if refused[b]]
        if bad:
            c.add("VI959", "warning", (key,),
                  f"{head}; " + "; ".join(f"with {'an older' if b == older else 'a newer'} sglang verl gives {b}: "
                                          f"{refused[b]}" for b in bad)
                  + " (no sglang installed here to tell which)", hint, fix=fix)
        return
    if why:
        c.add("VI958", "error", (key, model_key),
              f"{head}; {why}; the rollout server dies at start-up, after the GPUs are booked", hint, fix=fix)
