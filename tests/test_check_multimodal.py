"""VI798, VI799, VI920: vision-language RL settings that verl 0.9.1 takes and then misbehaves on.

Real cases: verl#6592 (Qwen3-VL with data.image_patch_size=14, its PR #6595 changed only RLHFDataset's fallback, and
verl's YAML default 14 still wins over it), verl#856 / PR #506 (image prompts with the overlong filter off and
data.truncation='left'), verl#2942 (data.mm_processor_kwargs to cap pixels, with the SGLang rollout).

The oracles are verl's own code: its YAML default and RLHFDataset.__init__ (which patch size the overlong filter
uses), RLHFDataset._process_multi_modal_info (the patch size handed to qwen_vl_utils), transformers' Qwen2-VL image
processor with Qwen3-VL's patch 16 (the tokens each resize makes), AgentLoopBase.ct_build_initial_tokens (the
raise on a long image prompt), and the signatures of verl's rollout servers against the call its LLM server client
makes. Offline limits: qwen_vl_utils needs torchvision (not installed here), so its process_vision_info is stood in
for by a stub that records the patch size verl hands it and resizes as qwen_vl_utils' fetch_image does
(smart_resize at factor 2 × patch, transformers' own smart_resize); agent_loop.py and llm_server.py import modules
not installed here (cachetools, sglang), so their methods and signatures are read from verl's installed files.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import sys
import types
from typing import Any, Optional

import pytest

from wizard.check.lint import check

VERL = ["algorithm.adv_estimator=grpo", "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=8", "data.max_prompt_length=2048", "data.max_response_length=1024"]
QWEN3_VL = "actor_rollout_ref.model.path=Qwen/Qwen3-VL-8B-Instruct"
QWEN25_VL = "actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-7B-Instruct"
TEXT = "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct"
ON = "data.filter_overlong_prompts=True"


def _hits(rule: str, *extra: str):
    return [f for f in check(None, [*VERL, *extra]).findings if f.problem.rule == rule]


def _verl_file(rel: str) -> str:
    verl = pytest.importorskip("verl")
    return os.path.join(os.path.dirname(verl.__file__), rel)


def _method(rel: str, cls: str, name: str) -> ast.AsyncFunctionDef | ast.FunctionDef:
    tree = ast.parse(open(_verl_file(rel), encoding="utf-8").read())
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in klass.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)


# ---- VI798: the overlong filter's patch size ----------------------------------------------------------------------

def _qwen3_vl_processor():
    transformers = pytest.importorskip("transformers")
    # Qwen3-VL's preprocessor_config.json: patch_size 16, merge_size 2, temporal_patch_size 2
    image = transformers.Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, temporal_patch_size=2,
                                                  min_pixels=65536, max_pixels=16777216)
    return types.SimpleNamespace(image_processor=image)


@pytest.mark.verl
def test_verl_filters_qwen3_vl_images_on_the_yaml_default_grid(tmp_path):
    import pandas as pd
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    transformers = pytest.importorskip("transformers")
    from wizard.smoketest.tiny import build_tokenizer

    default = OmegaConf.load(_verl_file("trainer/config/data/legacy_data.yaml")).image_patch_size
    assert default == 14
    pd.DataFrame({"prompt": [[{"role": "user", "content": "hi"}]]}).to_parquet(tmp_path / "t.parquet")
    build_tokenizer(tmp_path / "tok")
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    proc = _qwen3_vl_processor()
    used = {}
    for given in (default, None, 16):
        config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 1024, "filter_overlong_prompts": False,
                                   "image_patch_size": given})
        used[given] = RLHFDataset([str(tmp_path / "t.parquet")], tok, config, processor=proc).image_patch_size
    # the YAML's 14 wins over the processor's 16; only null falls back to it (rl_dataset.py:112-114)
    assert used == {14: 14, None: 16, 16: 16}


@pytest.mark.verl
def test_the_two_grids_count_different_tokens(monkeypatch):
    """verl hands qwen_vl_utils the patch size it holds; the image it gets back, through Qwen3-VL's processor, makes
    a different number of tokens on the 28-pixel grid (the filter's) than on the 32-pixel grid (the rollout's)."""
    PIL = pytest.importorskip("PIL.Image")
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize
    from verl.utils.dataset.rl_dataset import RLHFDataset

    seen = []

    def process_vision_info(messages, image_patch_size=14, return_video_metadata=False):
        seen.append(image_patch_size)
        factor = 2 * image_patch_size  # qwen_vl_utils fetch_image: patch × SPATIAL_MERGE_SIZE
        out = []
        for m in messages:
            for item in m["content"]:
                if item.get("type") == "image":
                    w, h = item["image"].size
                    rh, rw = smart_resize(h, w, factor=factor, min_pixels=4 * factor ** 2,
                                          max_pixels=16384 * factor ** 2)
                    out.append(item["image"].resize((rw, rh)))
        return out, None

    monkeypatch.setitem(sys.modules, "qwen_vl_utils", types.SimpleNamespace(process_vision_info=process_vision_info))
    proc = _qwen3_vl_processor().image_processor
    counts = {}
    for patch in (14, 16):
        msgs = [{"role": "user", "content": [{"type": "image", "image": PIL.new("RGB", (1045, 1045))},
                                            {"type": "text", "text": "x"}]}]
        images, _, _ = RLHFDataset._process_multi_modal_info(msgs, image_patch_size=patch, config={})
        grid = proc(images=images, return_tensors="np")["image_grid_thw"][0]
        counts[patch] = int(grid[0] * grid[1] * grid[2]) // 4
    assert seen == [14, 16]
    assert counts[14] < counts[16]  # the filter under-counts: a prompt at the limit passes it and stops the rollout


@pytest.mark.slow
def test_vi798_fires_on_the_class_and_is_silent_on_controls():
    hit = _hits("VI798", QWEN3_VL, ON, "data.image_patch_size=14")
    assert hit and hit[0].problem.severity == "warning" and hit[0].fix.set == {"data.image_patch_size": 16}
    assert "16" in hit[0].problem.message and "(set)" in hit[0].problem.message
    assert _hits("VI798", QWEN3_VL, ON)  # verl's YAML default 14 is the same mismatch
    assert _hits("VI798", QWEN25_VL, ON, "data.image_patch_size=16")  # any model: Qwen2.5-VL's patch is 14
    assert not _hits("VI798", QWEN3_VL, ON, "data.image_patch_size=16")
    assert not _hits("VI798", QWEN3_VL, ON, "data.image_patch_size=null")  # verl falls back to the processor's
    assert not _hits("VI798", QWEN25_VL, ON)
    assert not _hits("VI798", QWEN3_VL, "data.filter_overlong_prompts=False", "data.image_patch_size=14")
    assert not _hits("VI798", TEXT, ON, "data.image_patch_size=16")


def test_vi798_reads_the_patch_from_a_local_config(tmp_path):
    import json

    shape = {"model_type": "qwen2_5_vl", "hidden_size": 1024, "intermediate_size": 2048, "num_attention_heads": 8,
             "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 4096,
             "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2,
                               "patch_size": 12, "spatial_merge_size": 2, "out_hidden_size": 1024}}
    (tmp_path / "config.json").write_text(json.dumps(shape), encoding="utf-8")
    hit = _hits("VI798", f"actor_rollout_ref.model.path={tmp_path}", ON)
    assert hit and hit[0].fix.set == {"data.image_patch_size": 12}



@pytest.mark.parametrize("model,patch", [("Qwen/Qwen3-VL-8B-Instruct", 16), ("Qwen/Qwen2.5-VL-7B-Instruct", 14)])
def test_the_planner_writes_the_models_patch(tmp_path, model, patch):
    """verl-init's own bundle for a vision model sets data.image_patch_size to the model's patch (a bundle left at
    verl's default 14 drew VI798 for Qwen3-VL), and check finds no VI798 in it."""
    import wizard

    p = wizard.plan(wizard.make_answers(dict(model=model, dataset="geo3k", nnodes=1, gpus_per_node=8,
                                             gpu_memory_gb=80, gpu_type="H100", max_prompt_length=2048,
                                             max_response_length=2048, image_max_pixels=1003520,
                                             images_per_prompt=1)), base_dir=str(tmp_path))
    assert p.value("data.image_patch_size") == patch
    bundle = wizard.write_bundle(wizard.render(p), tmp_path / "b")
    assert not [f for f in check(str(bundle / "verl_config.yaml"), defaults="snapshot").findings
                if f.problem.rule == "VI798"]

# ---- VI799: image prompts without the overlong filter --------------------------------------------------------------

def _agent_loop_methods():
    ns: dict[str, Any] = {"Optional": Optional, "Any": Any, "logger": __import__("logging").getLogger("t"),
                          "Image": types.SimpleNamespace(Image=object), "torch": types.SimpleNamespace(Tensor=object)}
    out = {}
    for name in ("ct_build_initial_tokens", "_cap_text_prompt_length"):
        node = _method("experimental/agent_loop/agent_loop.py", "AgentLoopBase", name)
        node.decorator_list = []
        exec(ast.unparse(node), ns)  # verl's own method body
        out[name] = ns[name]
    return out


@pytest.mark.verl
def test_verl_raises_on_a_long_image_prompt_and_cuts_a_text_one():
    methods = _agent_loop_methods()

    class Builder:
        def build_initial_tokens(self, messages, **kw):
            return list(range(5000))

    async def run(**media):
        self = types.SimpleNamespace(loop=asyncio.get_running_loop(), continuous_token_builder=Builder(),
                                     rollout_config=types.SimpleNamespace(prompt_length=4096))
        self._cap_text_prompt_length = types.MethodType(methods["_cap_text_prompt_length"], self)
        return await methods["ct_build_initial_tokens"](self, [{"role": "user", "content": "x"}], **media)

    assert len(asyncio.run(run())) == 4096  # text: left-truncated
    with pytest.raises(ValueError, match="Multimodal prompt produced 5000 tokens"):
        asyncio.run(run(images=["<img>"]))
    # data.truncation: RLHFDataset stores it and no line reads it back
    src = open(_verl_file("utils/dataset/rl_dataset.py"), encoding="utf-8").read()
    assert src.count("self.truncation") == 1 and "self.truncation = config.get(" in src


@pytest.mark.slow
def test_vi799_fires_on_the_class_and_is_silent_on_controls():
    hit = _hits("VI799", QWEN3_VL)  # verl's default: filter off
    assert hit and hit[0].problem.severity == "warning" and hit[0].fix.set == {"data.filter_overlong_prompts": True}
    assert _hits("VI799", "actor_rollout_ref.model.path=Qwen/Qwen2-VL-7B-Instruct", "data.image_key=images",
                 "data.filter_overlong_prompts=False", "data.truncation=left")
    assert "nothing reads it" in _hits("VI799", QWEN25_VL, "data.truncation=left")[0].problem.message
    assert not _hits("VI799", QWEN3_VL, ON)
    assert not _hits("VI799", TEXT)  # a text model, no image column named


# ---- VI920: mm_processor_kwargs with SGLang ------------------------------------------------------------------------

def _signature(rel: str, cls: str) -> inspect.Signature:
    node = _method(rel, cls, "generate")
    stub = ast.AsyncFunctionDef(name="generate", args=node.args, body=[ast.Pass()], decorator_list=[], returns=None,
                                type_params=[])
    ns: dict[str, Any] = {}
    src = ast.unparse(ast.fix_missing_locations(ast.Module(body=[stub], type_ignores=[])))
    exec(src, {"Optional": Optional, "Any": Any, "torch": types.SimpleNamespace(Tensor=object)}, ns)
    return inspect.signature(ns["generate"])


def _client_call_keywords() -> set[str]:
    """The keywords LLMServerClient.generate passes to server.generate.remote, with the keys it puts in
    multimodal_kwargs when mm_processor_kwargs is non-empty (llm_server.py:131-158)."""
    node = _method("workers/rollout/llm_server.py", "LLMServerClient", "generate")
    call = next(n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "remote" and ast.unparse(n.func.value) == "server.generate")
    names = {k.arg for k in call.keywords if k.arg}
    spread = {ast.unparse(k.value) for k in call.keywords if k.arg is None}
    assert "multimodal_kwargs" in spread
    for n in ast.walk(node):
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Subscript) and \
                ast.unparse(n.targets[0].value) == "multimodal_kwargs" and ast.unparse(n.value) == "mm_processor_kwargs":
            names.add(ast.literal_eval(n.targets[0].slice))
    return names


@pytest.mark.verl
def test_sglang_server_refuses_the_keyword_verl_forwards():
    keywords = _client_call_keywords()
    assert "mm_processor_kwargs" in keywords
    call = {k: None for k in keywords}
    sglang = _signature("workers/rollout/sglang_rollout/async_sglang_server.py", "SGLangHttpServer")
    vllm = _signature("workers/rollout/vllm_rollout/vllm_async_server.py", "vLLMHttpServer")
    vllm.bind(None, **call)  # control: vLLM's server takes it
    with pytest.raises(TypeError, match="mm_processor_kwargs"):
        sglang.bind(None, **call)
    sglang.bind(None, **{k: v for k, v in call.items() if k != "mm_processor_kwargs"})  # control: without it


@pytest.mark.slow
def test_vi920_fires_on_the_class_and_is_silent_on_controls():
    sg = "actor_rollout_ref.rollout.name=sglang"
    hit = _hits("VI920", QWEN25_VL, ON, sg, "+data.mm_processor_kwargs.max_pixels=802816")
    assert hit and hit[0].problem.severity == "error" and hit[0].fix is None
    assert "max_pixels=802816" in hit[0].problem.message
    assert _hits("VI920", TEXT, sg, "data.mm_processor_kwargs={do_pan_and_scan:true}")  # any kwargs, any model
    assert not _hits("VI920", QWEN25_VL, ON, sg)
    assert not _hits("VI920", QWEN25_VL, ON, "actor_rollout_ref.rollout.name=vllm",
                     "+data.mm_processor_kwargs.max_pixels=802816")
