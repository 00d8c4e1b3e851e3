"""`check` on Mixture-of-Experts and Ascend NPU configs (issue 16 item 4): Megatron's expert (EP·ETP), context and
virtual-pipeline layout keys are understood, and MoE memory is estimated with the experts sharded (a MoE of unknown
shape gives an info), without false errors.

Independent source: verl's own launch scripts (tests/data/reference/verl-main-scripts, traced by bash, with verl
0.9.1's verdicts). Each is checked against the hardware it names (trainer.nnodes × n_gpus_per_node) on 80 GB GPUs,
the card size none of them states, except where the arithmetic below says the script needs a larger card.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import REFERENCE
from wizard.check.lint import check
from wizard.verlspec.arithmetic import megatron_layout

SCRIPTS = REFERENCE / "verl-main-scripts"
INDEX = json.loads((SCRIPTS / "index.json").read_text(encoding="utf-8"))["scripts"]
MOE_PATH = re.compile(r"a\d+b|deepseek|moonlight|gpt_oss|mixtral|nemotron_nano", re.IGNORECASE)
MOE = [e for e in INDEX if MOE_PATH.search(Path(e["path"]).name)
       or any(re.search(r"expert_(model_)?parallel_size=([2-9]|\d\d)", a) for a in e["traced"]["args"])]
NPU = [e for e in INDEX if "npu" in e["path"].lower()]


# Scripts whose state alone leaves a full micro-batch no room on an 80 GB card (none of them names its GPUs), with
# the card they are judged on instead. Per GPU, in the update (verl loads offloaded state back for it:
# workers/engine/base.py BaseEngineCtx):
# - RW002, RW040 (Qwen3-30B-A3B, Megatron TP 2 / EP 8 / ETP 1 on 8 GPUs, no CPU optimizer): bf16 weights 8.2 GiB,
#   fp32 gradient buffer 16.4, distributed-optimizer states 12 B × 30.5B / 8 = 42.7 → 67.3 GiB, and a 30720-token
#   micro-batch's logits alone (151936 × 6 B / TP 2 per token) 13 GiB: over 79.6 GiB; tight on a 96 GB H20.
# - RW021, RW061 (Qwen3-30B-A3B, FSDP on 8 GPUs): verl 0.9.1 keeps FSDP weights in fp32 (engine/fsdp.yaml
#   model_dtype) and loads weights, gradients and Adam back for the update: 16 B × 30.5B / 8 = 56.9 GiB, plus 32768-
#   (20480-) token micro-batches whose bf16 logits alone are 9.3 (5.8) GiB and whose checkpointed layer inputs are 6.0
#   (3.8) GiB: over 79.6 GiB even before the allocator's reserve; they fit a 141 GB H200.
LARGER_CARD = {"RW002": 96.0, "RW040": 96.0, "RW021": 141.0, "RW061": 141.0}


def _hardware(entry: dict, gpu_gb: float | None = None) -> dict:
    args = dict(a.lstrip("+").split("=", 1) for a in entry["traced"]["args"] if "=" in a)
    return {"nnodes": int(args.get("trainer.nnodes", 1)), "gpus_per_node": int(args.get("trainer.n_gpus_per_node", 8)),
            "gpu_memory_gb": gpu_gb or LARGER_CARD.get(entry["id"], 80.0)}


def _check(entry: dict, gpu_gb: float | None = None):
    return check(str(SCRIPTS / entry["file"]), env={"HOME": "$HOME"}, defaults="snapshot", **_hardware(entry, gpu_gb))


def test_the_sets_are_what_the_issue_names():
    names = {Path(e["path"]).name for e in MOE}
    assert {"run_qwen3_30b_a3b_megatron.sh", "run_qwen3_235b_a22b_megatron.sh", "run_deepseek_v3_671b_megatron.sh",
            "run_moonlight_16b_a3b_megatron.sh", "run_gpt_oss_20b_fsdp.sh"} <= names
    assert any("dppo" in e["path"] for e in MOE)
    assert len(MOE) >= 20 and len(NPU) >= 2
    assert any(e["verl_0_9_1_verdict"]["result"] == "ACCEPTED" for e in MOE)


@pytest.mark.parametrize("entry", [e for e in MOE + NPU if e["verl_0_9_1_verdict"]["result"] == "ACCEPTED"],
                         ids=lambda e: e["id"])
def test_no_error_on_moe_and_npu_scripts_verl_accepts(entry):
    report = _check(entry)
    assert not report.errors, [f.problem.line() for f in report.errors]


@pytest.mark.parametrize("entry", MOE, ids=lambda e: e["id"])
def test_moe_memory_is_estimated_without_false_errors(entry):
    """Every MoE script: no memory error on its hardware; a MoE of exact shape (catalogue or local config.json) is
    estimated with its experts sharded, one of unknown shape (or an unresolved layout) gets an info saying why."""
    report = _check(entry)
    assert not [f for f in report.errors if f.problem.rule in ("VI860", "VI862")], \
        [f.problem.line() for f in report.errors if f.problem.rule in ("VI860", "VI862")]
    infos = [f.problem.message for f in report.findings if f.problem.rule == "VI861"]
    if report.memory is None:
        assert any("MoE memory not modelled" in m or "unresolved" in m or "not modelled" in m for m in infos), infos
    else:
        assert report.memory.peak_gib <= report.memory.capacity_gib


@pytest.mark.parametrize("rid", sorted(LARGER_CARD))
def test_scripts_that_need_a_larger_card_are_refused_at_80_gb_by_their_update(rid):
    """The arithmetic above, as the estimate states it: the update phase is over an 80 GB card."""
    entry = next(e for e in MOE if e["id"] == rid)
    report = _check(entry, gpu_gb=80.0)
    (err,) = [f.problem for f in report.errors if f.problem.rule == "VI860"]
    assert "does not fit" in err.message and "update phase" in err.message
    assert report.memory.gib("update", "actor", "optimizer states") > 0


@pytest.mark.slow
def test_moe_scripts_of_catalogue_models_are_estimated():
    estimated = {e["id"] for e in MOE if _check(e).memory is not None}
    # Qwen3-30B-A3B (Megatron and FSDP), Qwen3-235B-A22B, DeepSeek-V3 671B, Moonlight-16B-A3B
    assert {"RW002", "RW007", "RW014", "RW020", "RW021", "RW022", "RW040"} <= estimated, estimated


def test_megatron_moe_layout_keys_are_read():
    """The layout rules see EP/ETP/VPP: the 30B-A3B layout verl's examples use passes; a broken expert grid fails."""
    base = ["model_engine=megatron", "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B", "trainer.nnodes=1",
            "trainer.n_gpus_per_node=8", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
            "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=1"]
    ok = check(None, base + ["actor_rollout_ref.actor.megatron.expert_model_parallel_size=8"], defaults="snapshot",
               env={}, gpu_memory_gb=96.0)
    assert not [f for f in ok.findings if f.problem.rule == "VI813"], [f.problem.line() for f in ok.findings]
    bad = check(None, base + ["actor_rollout_ref.actor.megatron.expert_model_parallel_size=3"], defaults="snapshot", env={})
    lines = [f.problem.line() for f in bad.errors if f.problem.rule == "VI813"]
    assert any("expert grid" in line for line in lines), lines
    assert any("128 experts do not spread evenly" in line for line in lines), lines
    unset = check(None, base[:-1] + ["actor_rollout_ref.actor.megatron.expert_model_parallel_size=8"], defaults="snapshot", env={})
    (hit,) = [f.problem for f in unset.errors if f.problem.rule == "VI813"]
    assert "ETP = TP = 2" in hit.message and "expert_tensor_parallel_size=1" in hit.hint
    vpp = check(None, base + ["actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size=2"],
                defaults="snapshot", env={})
    assert any("interleaved schedule" in f.problem.message for f in vpp.errors if f.problem.rule == "VI813")


def test_megatron_layout_asserts():
    assert megatron_layout(64, 4, 8, 1, 8, 1) == []
    assert megatron_layout(8, 2, 1, 2, 8, 1) == []  # CP is not in the expert grid
    assert "TP×PP×CP" in megatron_layout(8, 2, 1, 3)[0]
    assert "expert grid" in megatron_layout(8, 4, 2, 1, 2)[0]  # ETP unset = TP 4: 4×2×2 = 16
    assert megatron_layout(16, 1, 4, vpp=3, layers=48) == []
    assert "48 layers" in megatron_layout(16, 1, 4, vpp=5, layers=48)[0]
    assert "interleaved" in megatron_layout(8, 1, 1, vpp=2)[0]
    assert "experts" in megatron_layout(8, 1, 1, 1, 3, 1, experts=128)[-1]


# verl v0.9.0's own example configs (tests/data/reference/verl-examples.json; verl 0.9.1 accepts every one):
# the MoE and Ascend ones, on the hardware each declares (80 GB GPUs; 64 GB Ascend 910B for the Ascend ones)
EXAMPLES = json.loads((REFERENCE / "verl-examples.json").read_text(encoding="utf-8"))["configs"]
MOE_OR_NPU_EXAMPLES = [c for c in EXAMPLES
                       if re.search(r"_a\d+b|moonlight|35b|ascend|_npu_", c["source"].split(":", 1)[1], re.I)]


@pytest.mark.parametrize("config", MOE_OR_NPU_EXAMPLES, ids=lambda c: c["source"].split("examples/", 1)[1])
def test_no_error_on_verls_v090_moe_and_ascend_examples(config):
    ascend = bool(re.search(r"ascend|_npu_", config["source"]))
    report = check(None, config["overrides"], defaults="snapshot", env={"HOME": "/root"}, nnodes=int(config["nnodes"]),
                   gpus_per_node=int(config["n_gpus_per_node"]),
                   **({"gpu_type": "Ascend910B"} if ascend else {"gpu_memory_gb": 80.0}))
    assert not report.errors, [f.problem.line() for f in report.errors]


def test_the_v090_set_holds_moe_and_ascend_examples():
    names = " ".join(c["source"] for c in MOE_OR_NPU_EXAMPLES)
    assert "moonlight_16b_a3b_megatron" in names and "ascend_extras" in names and "npu_profile" in names
