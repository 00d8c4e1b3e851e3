"""A Qwen-VL vision tower's Conv3d patch embedding on torch 2.9 without a fixed cuDNN (wizard.planner.patch_embed):
which towers have it (transformers' own check), what the fallback does per image (torch's own loop, counted), which
torch and cuDNN run it, and the doctor (VI762) and check (VI837) findings."""

from __future__ import annotations

import importlib.metadata
import types

import pytest
import torch

from wizard.planner import patch_embed as pe
from wizard.planner.shapes import catalogue, resolve_shape


def _tiny_towers():
    """One tiny vision tower per family the catalogue knows, built by transformers on the meta device."""
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5VisionConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionModel
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

    common = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32)
    with torch.device("meta"):
        yield "qwen2_5_vl", Qwen2_5_VisionTransformerPretrainedModel._from_config(
            Qwen2_5_VLVisionConfig(**common, fullatt_block_indexes=[0]))
        yield "qwen3_vl", Qwen3VLVisionModel._from_config(Qwen3VLVisionConfig(**common, deepstack_visual_indexes=[]))
        yield "qwen3_vl", Qwen3_5VisionModel._from_config(Qwen3_5VisionConfig(**common))


def test_transformers_own_fusion_check_finds_a_stride_equals_kernel_conv3d_in_every_catalogued_vision_family():
    """transformers' PatchEmbeddingsFusionSpec (the linear swap it offers, off by default) accepts the patch_embed of
    each family's tower: a Conv3d whose stride is its kernel. Every catalogued vision model is of such a family."""
    from transformers.fusion_mapping import PatchEmbeddingsFusionSpec

    spec = PatchEmbeddingsFusionSpec()
    seen = set()
    for family, tower in _tiny_towers():
        assert spec.is_fusable(tower.patch_embed), family
        assert family in pe.CONV3D_FAMILIES
        seen.add(family)
    assert seen == set(pe.CONV3D_FAMILIES)
    catalogued = {shape.vision for shape in catalogue().values() if shape.vision}
    assert catalogued and catalogued <= set(pe.CONV3D_FAMILIES)
    # the check itself tells convolutions apart: an overlapping Conv3d is not a patch projection
    overlapping = types.SimpleNamespace(proj=torch.nn.Conv3d(3, 8, kernel_size=(2, 4, 4), stride=(1, 2, 2)))
    assert not spec.is_fusable(overlapping)
    assert not pe.has_conv3d_patch_embed(resolve_shape("Qwen/Qwen2.5-7B-Instruct"))
    assert pe.has_conv3d_patch_embed(resolve_shape("Qwen/Qwen3.5-9B"))


def test_the_fallback_fills_every_output_channel_of_every_patch_one_op_at_a_time():
    """aten::slow_conv_dilated3d (the CPU twin of the CUDA kernel torch 2.9 falls back to, same loop) fills each
    output channel of each batch element, here each patch, with its own fill_: patches × hidden ops, which
    seconds_per_image counts for an image."""
    from torch.profiler import ProfilerActivity, profile

    shape = types.SimpleNamespace(vision_patch=16, vision_hidden=48)
    pixels = 7 * 16 * 16  # seven patches
    n = pixels // 16 ** 2
    x = torch.randn(n, 3, 2, 16, 16, dtype=torch.bfloat16)
    w = torch.randn(shape.vision_hidden, 3, 2, 16, 16, dtype=torch.bfloat16)
    b = torch.randn(shape.vision_hidden, dtype=torch.bfloat16)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        y = torch.ops.aten.slow_conv_dilated3d(x, w, [2, 16, 16], b, [2, 16, 16], [0, 0, 0], [1, 1, 1])
    fills = sum(e.count for e in prof.key_averages() if e.key == "aten::fill_")
    assert fills == n * shape.vision_hidden
    assert pe.seconds_per_image(shape, n) == pytest.approx((fills + 2 * n) * pe.FILL_OP_S)  # + copy and GEMM
    assert fills != n  # a count per patch alone (a planted fault) misses the channel loop
    # and it is the patch projection: the same numbers as a linear layer on the flattened patches
    linear = torch.nn.functional.linear(x.reshape(n, -1).float(), w.reshape(shape.vision_hidden, -1).float(), b.float())
    assert torch.allclose(y.reshape(n, -1).float(), linear, rtol=0.05, atol=0.5)


def test_fill_op_seconds_come_from_the_cited_measurement():
    """2.35 s (2.5 s with two 256×256 images, 0.15 s without) over 2 × 256 patches × 1024 channels."""
    assert pe.FILL_OP_S == pytest.approx(4.48e-6, rel=0.01)
    qwen35 = resolve_shape("Qwen/Qwen3.5-9B")
    # a 512 × 512 image: 1,024 patches of 16², each filling 1,152 channels (+ its copy and GEMM)
    assert pe.area_patches(qwen35, 512 * 512) == 1024
    assert pe.seconds_per_image(qwen35, 1024) == pytest.approx(1024 * (1152 + 2) * 2.35 / (512 * 1024))


@pytest.mark.parametrize("torch_v, cudnn, slow", [
    ("2.9.1", "9.10.2.21", True), ("2.9.0", None, True), ("2.9.1+cu129", "9.14.0.64", True),
    ("2.9.1", "9.16.0.29", False), ("2.8.0", "9.10.2.21", False), ("2.10.0", "9.10.2.21", False),
    ("2.13.0", None, False), (None, None, False), ("2.9.1+cpu", None, False), ("2.9.1+rocm6.4", None, False)])
def test_which_torch_and_cudnn_take_the_fallback(torch_v, cudnn, slow):
    v = pe.installed({"torch": torch_v, "nvidia-cudnn-cu12": cudnn})
    assert (pe.slow_conv3d(v) is not None) is slow
    assert pe.installed({"torch": "2.9.1", "nvidia-cudnn-cu13": "9.15.0.1"}).cudnn == "9.15.0.1"


def _metadata(monkeypatch, versions):
    real = importlib.metadata.version

    def version(name):
        if name in versions:
            if versions[name] is None:
                raise importlib.metadata.PackageNotFoundError(name)
            return versions[name]
        return real(name)
    monkeypatch.setattr(importlib.metadata, "version", version)


def test_doctor_warns_about_torch_2_9_with_its_wheel_cudnn_vi762():
    from test_doctor import VERSIONS, rules

    bad = {**VERSIONS, "torch": "2.9.1", "nvidia-cudnn-cu12": "9.10.2.21"}
    f = rules({}, versions=bad)["VI762"]
    assert f.severity == "warning" and "slow_conv_dilated3d" in f.message and "nvidia-cudnn-cu12>=9.15" in f.hint
    assert "VI762" not in rules({}, versions={**bad, "nvidia-cudnn-cu12": "9.16.0.29"})
    assert "VI762" not in rules({}, versions={**bad, "torch": "2.10.0"})
    assert "VI762" not in rules({}, versions=bad, torch_installed=False)
    assert "VI762" not in rules({}, versions=bad, torch_cuda=None)  # a CPU build has no cuDNN path


def _check(tmp_path, model, *extra):
    from wizard.check.lint import check

    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n" + " \\\n".join([
        "algorithm.adv_estimator=grpo", "data.train_batch_size=32", "data.max_prompt_length=1024",
        "data.max_response_length=2048", f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.rollout.n=5",
        "actor_rollout_ref.actor.ppo_mini_batch_size=32", "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        "trainer.n_gpus_per_node=8", "trainer.nnodes=1", *extra]) + "\n")
    return {f.problem.rule: f.problem for f in check(str(script)).findings}


@pytest.mark.slow
def test_check_prices_the_fallback_for_a_qwen_vl_model_on_the_torch_installed_here_vi837(tmp_path, monkeypatch):
    _metadata(monkeypatch, {"torch": "2.9.1", "nvidia-cudnn-cu12": "9.10.2.21", "nvidia-cudnn-cu13": None})
    found = _check(tmp_path, "Qwen/Qwen3.5-9B")
    p = found["VI837"]
    per_image = 1024 * (1152 + 2) * pe.FILL_OP_S  # a 512×512 image: 1,024 patches, 1,152 channels
    assert f"{per_image:.2f} s per image in every training pass, for one 512 × 512 image a sequence (1024 patches)" \
        in p.message
    # 32 prompts × 5 responses over 8 data-parallel ranks: 20 images a rank, in the update, reference and old passes
    assert f"20 sequences on each of 8 data-parallel ranks add {20 * per_image:.0f} s to each of the 3 passes" in p.message
    assert "torch>=2.10" in p.hint
    assert "VI837" not in _check(tmp_path, "Qwen/Qwen2.5-7B-Instruct")  # a text model has no tower
    _metadata(monkeypatch, {"torch": "2.9.1", "nvidia-cudnn-cu12": "9.16.0.29"})
    assert "VI837" not in _check(tmp_path, "Qwen/Qwen3.5-9B")


def test_check_says_nothing_on_this_machines_torch(tmp_path):
    """The installed torch (2.13 in the test environment) embeds patches through cuDNN."""
    from wizard.env.doctor import package_versions

    assert pe.slow_conv3d(pe.installed(package_versions(("torch", *pe.CUDNN_DISTS)))) is None
    assert "VI837" not in _check(tmp_path, "Qwen/Qwen3.5-9B")


def test_the_plan_of_a_vision_model_prices_the_fallback_per_image_of_image_max_pixels():
    """PLAN.md's vision lines say what an image of image_max_pixels costs on torch 2.9 without cuDNN 9.15: the plan is
    the same on every machine, so it says it for any torch and doctor checks the nodes."""
    import wizard
    from wizard.intent.answers import make_answers

    answers = {"model": "Qwen/Qwen2.5-VL-7B-Instruct", "dataset": "geo3k", "gpus_per_node": 8, "gpu_type": "H100",
               "max_prompt_length": 2048,
               "gpu_memory_gb": 80}
    plan = wizard.plan(make_answers(answers), base_dir="/tmp")
    # 1,003,520 pixels over 14² = 5,120 patches, each filling Qwen2.5-VL's 1,280 channels
    expected = 5120 * (1280 + 2) * 2.35 / (512 * 1024)
    assert plan.facts["vision"]["slow_patch_embed_s_per_image"] == round(expected, 1) == 29.4
    text = wizard.plan(make_answers({**answers, "model": "Qwen/Qwen2.5-7B-Instruct", "dataset": "gsm8k"}),
                       base_dir="/tmp")
    assert "vision" not in text.facts


def _processor_patches(patch: int, bounds: tuple[int, int], width: int, height: int) -> int:
    """The patches transformers' own Qwen2-VL image processor (PIL backend) makes of one image."""
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    proc = Qwen2VLImageProcessorPil(patch_size=patch, merge_size=2, temporal_patch_size=2,
                                    min_pixels=bounds[0], max_pixels=bounds[1])
    t, h, w = proc(images=[Image.new("RGB", (width, height))], return_tensors="np")["image_grid_thw"][0]
    return int(t * h * w)


@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen3.5-9B"])
@pytest.mark.parametrize("size", [(300, 200), (50, 40), (1000, 800), (640, 4000)])
def test_image_patches_are_what_the_image_processor_makes(model, size):
    """image_patches against transformers' image processor run on a real image: small images grow to the minimum,
    large ones shrink to the maximum, sides round to patch × merge pixels."""
    shape = resolve_shape(model)
    bounds = pe.pixel_bounds(shape)
    assert pe.image_patches(shape, *size, bounds) == _processor_patches(shape.vision_patch, bounds, *size)


def test_pixel_bounds_come_from_a_local_processor_config(tmp_path):
    import json

    shape = resolve_shape("Qwen/Qwen3.5-9B")
    assert pe.pixel_bounds(shape, tmp_path) == (65536, 16777216)  # no file: the hub's values
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"min_pixels": 1024, "max_pixels": 200000}))
    assert pe.pixel_bounds(shape, tmp_path) == (1024, 200000)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"size": {"shortest_edge": 4096,
                                                                            "longest_edge": 300000}}))
    assert pe.pixel_bounds(shape, tmp_path) == (4096, 300000)
    (tmp_path / "preprocessor_config.json").write_text("{not json")
    assert pe.pixel_bounds(shape, tmp_path) == (65536, 16777216)


def _png(width: int, height: int) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(buf, format="PNG")
    return buf.getvalue()


def test_check_prices_the_training_files_own_images_vi837(tmp_path, monkeypatch):
    """With the training file here, VI837 reads its images' sizes (headers only) and prices their patches as the
    model's image processor makes them: two rows, three images of 320×240, 640×480 and 100×80 pixels."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sizes = [(320, 240), (640, 480), (100, 80)]
    rows = [{"prompt": [{"role": "user", "content": "<image><image> x"}], "images": [{"bytes": _png(*sizes[0])},
                                                                                    {"bytes": _png(*sizes[1])}]},
            {"prompt": [{"role": "user", "content": "<image> y"}], "images": [{"bytes": _png(*sizes[2])},
                                                                            {"bytes": b"not an image"}]}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    _metadata(monkeypatch, {"torch": "2.9.1", "nvidia-cudnn-cu12": "9.10.2.21", "nvidia-cudnn-cu13": None})
    found = _check(tmp_path, "Qwen/Qwen3.5-9B", f"data.train_files={tmp_path / 'train.parquet'}")
    p = found["VI837"]
    patches = sum(_processor_patches(16, (65536, 16777216), *s) for s in sizes) / 3
    per_image = patches * (1152 + 2) * pe.FILL_OP_S
    assert f"{per_image:.2f} s per image in every training pass, for the 3 images of 2 rows" in p.message
    assert f"({patches:.0f} patches each on average)" in p.message
    # 1.5 images a sequence (the unreadable entry is not counted), 20 sequences a rank
    assert f"add {20 * 1.5 * per_image:.0f} s to each of the 3 passes" in p.message


@pytest.mark.slow
def test_checks_step_time_counts_the_fallback_in_each_training_pass(tmp_path, monkeypatch):
    """The step time `check` predicts (VI895, the `time` object) adds what VI837 prices: a rank's sequences × the
    seconds of their images, in the old log-prob, reference and update passes; nothing on a torch without it."""
    from wizard.check.lint import check

    def timed(torch_version):
        _metadata(monkeypatch, {"torch": torch_version, "nvidia-cudnn-cu12": "9.10.2.21", "nvidia-cudnn-cu13": None})
        _check(tmp_path, "Qwen/Qwen3.5-9B")  # writes run.sh
        return check(str(tmp_path / "run.sh")).time

    slow, fast = timed("2.9.1"), timed("2.10.0")
    per_pass = 20 * 1024 * (1152 + 2) * pe.FILL_OP_S  # 20 sequences a rank, one 512×512 image each
    assert slow["phases"]["log-prob"] - fast["phases"]["log-prob"] == pytest.approx(2 * per_pass, abs=0.2)
    assert slow["phases"]["update"] - fast["phases"]["update"] == pytest.approx(per_pass, abs=0.2)
    assert slow["phases"]["rollout"] == fast["phases"]["rollout"]
    assert slow["assumptions"]["vision_patch_embed_fallback_s_per_pass"] == pytest.approx(per_pass, abs=0.1)
    assert "vision_patch_embed_fallback_s_per_pass" not in fast["assumptions"]


def test_data_images_reads_a_bounded_number_of_rows():
    """The first `limit` rows are read, whatever they hold: a file of rows without images is not read to its end."""
    read = []

    def rows():
        for i in range(10_000):
            read.append(i)
            yield {"prompt": "x"} if i < 9_000 else {"images": [{"bytes": _png(64, 64)}]}
    found = pe.data_images(rows(), "images", 50)
    assert found.rows == 0 and not found.sizes and len(read) == 51
    mixed = pe.data_images(iter([{"images": [{"bytes": _png(64, 48)}]}, {"images": []}, {"other": 1}]), "images", 10)
    assert mixed.sizes == ((64, 48),) and mixed.rows == 2 and mixed.per_row == 0.5
