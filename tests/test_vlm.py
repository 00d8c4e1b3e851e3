"""Vision-language models, end to end: the vision tower's size (exact against transformers' own model), the plan
(keys, memory, VI570-VI573), data/prepare_data.py on a tiny image dataset (PNGs made with PIL) loaded through
verl's own RLHFDataset, the image-token count checked with transformers' Qwen2-VL image processor, and
validate-dataset's image checks (VI574-VI576).

Offline limits (said, not hidden): a full Qwen2.5-VL processor cannot be built here (its video processor needs
torchvision, not installed), so verl's RLHFDataset is given the real Qwen2-VL image processor, which is all its
__getitem__ path reads (patch_size; `processor is not None` in _build_messages); the chat-template expansion into
<|image_pad|> tokens is checked through the image processor's image_grid_thw instead. The geometry3k hub download
is not run (no network)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import wizard
from wizard.intent.answers import make_answers
from wizard.intent.errors import WizardError
from wizard.planner.shapes import from_catalogue, from_local, resolve_shape

PIL = pytest.importorskip("PIL.Image")

VL = dict(nnodes=1, gpus_per_node=8, gpu_memory_gb=80, model="Qwen/Qwen2.5-VL-7B-Instruct", dataset="geo3k",
          max_prompt_length=2048, max_response_length=2048, prompts_per_step=64, samples_per_prompt=5,
          updates_per_step=2)

# transformers 5.10's numel of each model built on the meta device from its config.json values (tests below
# rebuild them; these literals pin the catalogue even where transformers is absent)
NUMEL = {
    "Qwen/Qwen2.5-VL-3B-Instruct": (3754622976, 668684288),
    "Qwen/Qwen2.5-VL-7B-Instruct": (8292166656, 676550144),
    "Qwen/Qwen3-VL-8B-Instruct": (8767123696, 576388336),
}


@pytest.mark.parametrize("name", sorted(NUMEL))
def test_catalogue_counts_the_vision_tower_exactly(name):
    shape = from_catalogue(name)
    assert shape is not None and shape.vision
    assert (shape.params, shape.vision_params()) == NUMEL[name]
    assert shape.params == shape.text_params + shape.vision_params()


def _hf_config(shape):
    """config.json of a Qwen2.5-VL (text fields at the top, as the hub's file has them) or Qwen3-VL (text_config)."""
    vision = {"depth": shape.vision_depth, "hidden_size": shape.vision_hidden, "intermediate_size": shape.vision_intermediate,
              "num_heads": shape.vision_heads, "patch_size": shape.vision_patch, "spatial_merge_size": shape.vision_merge,
              "temporal_patch_size": 2, "out_hidden_size": shape.hidden}
    text = {"hidden_size": shape.hidden, "intermediate_size": shape.intermediate, "num_attention_heads": shape.heads,
            "num_hidden_layers": shape.layers, "num_key_value_heads": shape.kv_heads, "vocab_size": shape.vocab,
            "tie_word_embeddings": shape.tied, "max_position_embeddings": shape.max_pos}
    if shape.vision == "qwen3_vl":
        vision.update(num_position_embeddings=shape.vision_pos, deepstack_visual_indexes=[8, 16, 24][:shape.vision_deepstack])
        return {"model_type": "qwen3_vl", "text_config": {**text, "model_type": "qwen3_vl_text", "head_dim": shape.head_dim},
                "vision_config": vision, "tie_word_embeddings": shape.tied}
    return {"model_type": "qwen2_5_vl", **text, "vision_config": vision}


@pytest.mark.parametrize("name", sorted(NUMEL))
def test_local_config_json_of_a_vl_model_is_read_with_its_vision_tower(name, tmp_path):
    shape = from_catalogue(name)
    (tmp_path / "config.json").write_text(json.dumps(_hf_config(shape)))
    local = from_local(str(tmp_path))
    assert (local.params, local.vision_params()) == NUMEL[name]
    assert resolve_shape(str(tmp_path)).vision == shape.vision


@pytest.mark.parametrize("name", sorted(NUMEL))
def test_counts_match_transformers_on_the_meta_device(name, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    shape = from_catalogue(name)
    (tmp_path / "config.json").write_text(json.dumps(_hf_config(shape)))
    config = transformers.AutoConfig.from_pretrained(str(tmp_path))
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    vision = sum(p.numel() for n, p in model.named_parameters() if ".visual." in n)
    assert (total, vision) == NUMEL[name]


def test_unknown_vision_family_is_refused_with_its_name(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llava", "vision_config": {"depth": 1},
                                                      "text_config": {"hidden_size": 64, "num_attention_heads": 4,
                                                                      "num_hidden_layers": 2, "vocab_size": 100}}))
    with pytest.raises(ValueError, match="llava"):
        from_local(str(tmp_path))


# -- the plan ------------------------------------------------------------------------------------


def test_plan_sets_verl_vlm_keys_and_counts_images_in_memory():
    plan = wizard.plan(make_answers(VL), base_dir="/tmp")
    assert plan.value("data.image_key") == "images"
    assert plan.value("actor_rollout_ref.rollout.engine_kwargs.vllm.limit_mm_per_prompt") == {"image": 1}
    assert "actor_rollout_ref.actor.freeze_vision_tower" not in plan.settings
    vision = plan.facts["vision"]
    assert vision["image_tokens_per_image"] == 1003520 // 28 ** 2 == 1280
    assert vision["image_share"] == pytest.approx(1280 / 4096, abs=1e-4)
    # the same plan on text data: no image tokens, so less activation memory per token
    text = wizard.plan(make_answers({**VL, "dataset": "gsm8k"}), base_dir="/tmp")
    assert "vision" in text.facts and text.facts["vision"]["image_share"] == 0
    assert plan.memory.gib("update", "actor", "weights") == text.memory.gib("update", "actor", "weights")
    from dataclasses import replace

    from wizard.planner.memory import Layout, train_bytes_per_token
    from wizard.planner.shapes import resolve_shape

    shape = resolve_shape(VL["model"])
    lay = Layout(gpu_gb=80, n_gpus=8, gpus_per_node=8, seq_len=4096, rollout_tp=1, gmu=0.5, dp=8)
    assert train_bytes_per_token(shape, replace(lay, image_share=vision["image_share"])) > train_bytes_per_token(shape, lay)
    # the vision tower's weights are in the model size: larger than the text model of the same family
    text_model = wizard.plan(make_answers({**VL, "dataset": "gsm8k", "model": "Qwen/Qwen2.5-7B-Instruct"}), base_dir="/tmp")
    assert plan.memory.gib("update", "actor", "weights") > text_model.memory.gib("update", "actor", "weights")
    plan_md = wizard.render(plan)["PLAN.md"]
    assert "Vision tower: qwen2_5_vl: 32 blocks" in plan_md and "= 1280 image tokens each" in plan_md
    assert "--image-key images" in plan_md


def test_image_tokens_beyond_max_prompt_length_are_refused():
    with pytest.raises(WizardError) as err:
        wizard.plan(make_answers({**VL, "max_prompt_length": 1024}), base_dir="/tmp")
    assert "VI570" in str(err.value) and "max_prompt_length=1536" in str(err.value)
    # fewer pixels per image fit
    wizard.plan(make_answers({**VL, "max_prompt_length": 1024, "image_max_pixels": 401408}), base_dir="/tmp")


def test_freeze_vision_tower_is_set_and_said_to_have_no_effect_in_verl_091():
    plan = wizard.plan(make_answers({**VL, "freeze_vision_tower": True}), base_dir="/tmp")
    assert plan.value("actor_rollout_ref.actor.freeze_vision_tower") is True
    assert any(p.rule == "VI571" for p in plan.findings)


def test_images_need_a_vision_language_model():
    with pytest.raises(WizardError, match="VI572"):
        wizard.plan(make_answers({**VL, "model": "Qwen/Qwen2.5-7B-Instruct"}), base_dir="/tmp")
    plan = wizard.plan(make_answers({**VL, "model": "Qwen/Qwen2.5-7B-Instruct", "dataset": "gsm8k",
                                     "images_per_prompt": 2}), base_dir="/tmp")
    assert any(p.rule == "VI573" for p in plan.findings)
    assert "data.image_key" not in plan.settings


def test_vlm_profile_is_accepted_by_verl(tmp_path, tiny_model):
    """verify reads the config, not the weights: the tiny text model stands in (verl's checks are the same)."""
    from wizard.verify.harness import verify_with_verl

    plan = wizard.plan(wizard.load_profile("vlm-grpo"), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "vlm")
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()


# -- data/prepare_data.py on images ----------------------------------------------------------------


def _png(width: int, height: int, color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    PIL.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture()
def image_rows(tmp_path: Path) -> Path:
    """A parquet file: images as {bytes} (one too large), as a path, two per prompt, and broken rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "b.png").write_bytes(_png(64, 48, (0, 0, 255)))
    rows = [
        {"question": "<image>What colour is the square?", "answer": "red", "images": [{"bytes": _png(2000, 1500), "path": None}]},
        {"question": "How many shapes?", "answer": "1", "images": [{"bytes": None, "path": "pics/b.png"}]},
        {"question": "<image> and <image>: same colour?", "answer": "no",
         "images": [{"bytes": _png(32, 32), "path": None}, {"bytes": _png(40, 40, (0, 255, 0)), "path": None}]},
        {"question": "<image><image> two placeholders, one image", "answer": "x", "images": [{"bytes": _png(32, 32), "path": None}]},
        {"question": "<image> broken image", "answer": "y", "images": [{"bytes": b"not an image", "path": None}]},
        {"question": "What is 2+2?", "answer": "4", "images": []},
    ]
    path = tmp_path / "pics.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _prepared(tmp_path: Path, image_rows: Path) -> tuple[Path, list[dict], subprocess.CompletedProcess]:
    answers = make_answers({**VL, "dataset": str(image_rows), "answer_format": "text", "reward": "function", "prompts_per_step": 2,
                            "samples_per_prompt": 4, "updates_per_step": 1, "val_fraction": 0,
                            "image_max_pixels": 200704, "max_prompt_length": 1024})
    bundle = wizard.write_bundle(wizard.render(wizard.plan(answers, base_dir=str(tmp_path))), tmp_path / "bundle")
    r = subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py")], capture_output=True, text=True,
                       timeout=120, cwd=bundle)
    import pyarrow.parquet as pq

    rows = pq.read_table(bundle / "data" / "train.parquet").to_pylist() if r.returncode == 0 else []
    return bundle, rows, r


def test_prepare_data_writes_images_verl_reads(tmp_path, image_rows):
    bundle, rows, r = _prepared(tmp_path, image_rows)
    assert r.returncode == 0, r.stderr
    assert "skipped train row 3: 2 <image> placeholder(s) for 1 image(s)" in r.stderr
    assert "skipped train row 4: an image does not decode" in r.stderr
    assert [len(row["images"]) for row in rows] == [1, 1, 2, 0]
    # a prompt without placeholders gets them in front; counts match everywhere
    for row in rows:
        assert sum(m["content"].count("<image>") for m in row["prompt"]) == len(row["images"])
    assert rows[1]["prompt"][-1]["content"].startswith("<image>How many shapes?")
    # the large image was shrunk so that Qwen-VL's rounding stays within image_max_pixels
    big = PIL.open(io.BytesIO(rows[0]["images"][0]["bytes"]))
    w, h = big.size
    assert (round(w / 28) * 28) * (round(h / 28) * 28) <= 200704 < 2000 * 1500
    small = rows[2]["images"][0]["bytes"]
    assert small == _png(32, 32)  # small images are kept byte for byte

    # verl's own dataset pairs each <image> with its image (rl_dataset.py _build_messages asserts the counts)
    transformers = pytest.importorskip("transformers")
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from wizard.smoketest.tiny import build_tokenizer

    build_tokenizer(tmp_path / "tok")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    image_processor = transformers.Qwen2VLImageProcessorPil(max_pixels=200704)
    config = OmegaConf.create({"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 1024,
                               "filter_overlong_prompts": False, "return_raw_chat": True})
    dataset = RLHFDataset([str(bundle / "data" / "train.parquet")], tokenizer, config, processor=image_processor)
    assert len(dataset) == 4
    item = dataset[2]
    contents = item["raw_prompt"][-1]["content"]
    kinds = [c["type"] for c in contents]
    assert kinds.count("image") == 2 and kinds.count("text") >= 1
    assert all(c["image"].size for c in contents if c["type"] == "image")  # decoded PIL images

    # the image tokens the processor makes of the shrunk image: within the plan's count per image
    grid = image_processor(images=[big.convert("RGB")], return_tensors="np")["image_grid_thw"][0]
    tokens = int(grid[0] * grid[1] * grid[2]) // 4
    plan_tokens = from_catalogue("Qwen/Qwen2.5-VL-7B-Instruct").image_tokens(200704)
    assert 0 < tokens <= plan_tokens == 256


def test_validate_dataset_checks_image_columns(tmp_path, image_rows):
    from wizard.env.datasets import Options, validate

    bundle, rows, r = _prepared(tmp_path, image_rows)
    assert r.returncode == 0, r.stderr
    prepared = str(bundle / "data" / "train.parquet")
    ok = validate([prepared], Options(image_key="images"))
    assert not [f for f in ok.findings if f.rule in ("VI574", "VI575", "VI576")], [f.message for f in ok.findings]

    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = [dict(rows[0], images=[{"bytes": b"garbage", "path": None}]),
           dict(rows[2], images=rows[2]["images"][:1])]
    bad_path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist(bad), bad_path)
    report = validate([str(bad_path)], Options(image_key="images"))
    rules = {f.rule for f in report.findings}
    assert {"VI575", "VI576"} <= rules and not report.ok

    missing = validate([prepared], Options(image_key="pictures"))
    assert any(f.rule == "VI574" and "'pictures' not found" in f.message for f in missing.findings)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "wizard.cli.app", "validate-dataset", *args], capture_output=True,
                              text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent)

    scorer = f"{bundle / 'reward' / 'reward_fn.py'}:compute_score"  # reward=function: the bundle's scorer
    ok_run = cli(prepared, "--image-key", "images", "--reward-function", scorer)
    assert ok_run.returncode == 0, ok_run.stdout
    bad_run = cli(str(bad_path), "--image-key", "images")
    assert bad_run.returncode == 1 and "VI575" in bad_run.stdout and "VI576" in bad_run.stdout


def test_check_warns_that_freeze_vision_tower_has_no_effect(tmp_path):
    from wizard.check.lint import check

    plan = wizard.plan(make_answers({**VL, "freeze_vision_tower": True}), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")

    result = check(str(bundle / "verl_config.yaml"))
    rules = [fd.problem.rule for fd in result.findings]
    assert "VI836" in rules
    plain = wizard.write_bundle(wizard.render(wizard.plan(make_answers(VL), base_dir=str(tmp_path))), tmp_path / "c")
    findings = check(str(plain / "verl_config.yaml")).findings
    assert not [fd.problem.line() for fd in findings if fd.problem.severity in ("error", "warning")]


def test_geo3k_from_a_local_snapshot_is_prepared_as_verls_geo3k_py(tmp_path):
    """The geometry3k path without the download: a local copy in the hub snapshot's layout (data/<split>-*.parquet,
    columns problem / answer / images as {bytes, path}) read with --local-dir, written as verl's geo3k.py writes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from wizard.planner.dataprep import GEO3K_INSTRUCTION

    snap = tmp_path / "geometry3k" / "data"
    snap.mkdir(parents=True)
    for split, n in (("train", 3), ("test", 2)):
        rows = [{"problem": f"<image>Find x in triangle {i}.", "answer": str(3 + i),
                 "images": [{"bytes": _png(80 + i, 60), "path": f"{split}_{i}.png"}]} for i in range(n)]
        pq.write_table(pa.Table.from_pylist(rows), snap / f"{split}-00000-of-00001.parquet")
    answers = make_answers({**VL, "prompts_per_step": 2, "samples_per_prompt": 4, "updates_per_step": 1})
    bundle = wizard.write_bundle(wizard.render(wizard.plan(answers, base_dir=str(tmp_path))), tmp_path / "geo")
    r = subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py"), "--local-dir", str(tmp_path / "geometry3k")],
                       capture_output=True, text=True, timeout=120, cwd=bundle)
    assert r.returncode == 0, r.stderr
    train = pq.read_table(bundle / "data" / "train.parquet").to_pylist()
    val = pq.read_table(bundle / "data" / "val.parquet").to_pylist()
    assert (len(train), len(val)) == (3, 2)
    row = train[1]
    assert row["data_source"] == "hiyouga/geometry3k"  # verl's geo3k scorer (reward_score/__init__.py:89)
    assert row["prompt"] == [{"role": "user", "content": "<image>Find x in triangle 1. " + GEO3K_INSTRUCTION}]
    assert row["reward_model"] == {"style": "rule", "ground_truth": "4"}
    assert len(row["images"]) == 1 and PIL.open(io.BytesIO(row["images"][0]["bytes"])).size == (81, 60)


def test_planner_mirror_builds_the_same_image_prompts(tmp_path, image_rows):
    """dataprep.prompt_of (the planner's overlong count) puts placeholders where prepare_data.py does."""
    import pyarrow.parquet as pq

    from wizard.planner import dataprep

    bundle, rows, r = _prepared(tmp_path, image_rows)
    assert r.returncode == 0, r.stderr
    answers = make_answers({**VL, "dataset": str(image_rows), "answer_format": "text", "reward": "function"})
    prep = dataprep.resolve(answers, str(tmp_path))
    assert prep.image_key == "images" and prep.image_factor == 28
    mirrored = []
    for raw in pq.read_table(image_rows).to_pylist():
        try:
            mirrored.append(dataprep.prompt_of(raw, prep))
        except dataprep.Skip:
            pass
    # the mirror cannot decode images, so the row with a broken image is kept there (prepare_data skips it)
    assert [m for m in mirrored if "broken image" not in m[-1]["content"]] == [row["prompt"] for row in rows]


def test_cpu_smoke_checks_image_rows_and_says_what_it_does_not_cover(tmp_path, image_rows):
    """The CPU smoke's data phase on a vision-language bundle (the full smoke run needs Ray; this is its data step)."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from wizard.smoketest.context import SmokeFailure
    from wizard.smoketest.cpu_data import _vision_rows

    bundle, rows, r = _prepared(tmp_path, image_rows)
    assert r.returncode == 0, r.stderr
    ctx = SimpleNamespace(cfg=OmegaConf.create({"data": {"image_key": "images", "prompt_key": "prompt"}}))
    _vision_rows(ctx, str(bundle / "data" / "train.parquet"), "qwen2", 4, "x")  # a text model: nothing to say
    with pytest.raises(SmokeFailure, match="vision-language model.*runs no vision-language rollout"):
        _vision_rows(ctx, str(bundle / "data" / "train.parquet"), "qwen2_5_vl", 4, "x")
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([dict(rows[0], images=[{"bytes": b"junk", "path": None}])]), bad)
    with pytest.raises(SmokeFailure, match=r"not what verl reads.*\[VI575\]"):
        _vision_rows(ctx, str(bad), "qwen3_vl", 1, "x")


def test_your_own_train_files_count_as_image_data(tmp_path):
    (tmp_path / "t.parquet").write_bytes(b"rows")  # only its existence is checked at plan time
    plan = wizard.plan(make_answers({**VL, "dataset": "gsm8k", "train_files": "t.parquet"}), base_dir=str(tmp_path))
    assert plan.facts["vision"]["images"] and plan.facts["vision"]["image_share"] > 0
    assert "actor_rollout_ref.rollout.engine_kwargs.vllm.limit_mm_per_prompt" in plan.settings
