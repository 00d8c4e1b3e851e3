"""`check` on Mixture-of-Experts and Ascend NPU configs (issue 16 item 4): Megatron's expert (EP·ETP), context and
virtual-pipeline layout keys are understood, and MoE memory (not modelled) gives an info, not a false error.

Independent source: verl's own launch scripts (tests/data/reference/verl-main-scripts, traced by bash, with verl
0.9.1's verdicts). Each is checked against the hardware it names (trainer.nnodes × n_gpus_per_node) on 80 GB GPUs.
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


def _hardware(entry: dict) -> dict:
    args = dict(a.lstrip("+").split("=", 1) for a in entry["traced"]["args"] if "=" in a)
    return {"nnodes": int(args.get("trainer.nnodes", 1)), "gpus_per_node": int(args.get("trainer.n_gpus_per_node", 8)),
            "gpu_memory_gb": 80.0}


def _check(entry: dict):
    return check(str(SCRIPTS / entry["file"]), env={"HOME": "$HOME"}, defaults="snapshot", **_hardware(entry))


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
def test_moe_memory_is_an_info_not_an_error(entry):
    report = _check(entry)
    assert not [f for f in report.findings if f.problem.rule in ("VI860", "VI862")], \
        [f.problem.line() for f in report.findings if f.problem.rule in ("VI860", "VI862")]
    if not any(f.problem.rule == "VI861" and "unresolved" in f.problem.message for f in report.findings):
        assert any(f.problem.rule == "VI861" and "MoE memory not modelled" in f.problem.message for f in report.findings)


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
