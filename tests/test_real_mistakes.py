"""`check` on real configuration mistakes from verl's GitHub issues (tests/data/reference/real-mistakes.json).

Each case is checked with the hardware and environment it states. A case is *named* when a warning or error
carries one of its expected keys. The statically detectable cases (statically_detectable = "yes") are the
measure; NAMED_BY says which mechanism names each of them, so a change that names a case by accident, or stops
naming it, shows here. The negative controls must get no error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wizard.check.lint import check

# every case runs check once (the module fixture `reports`): minutes on 2 cores, so the whole module is slow
pytestmark = pytest.mark.slow

CASES = json.loads((Path(__file__).parent / "data" / "reference" / "real-mistakes.json").read_text(encoding="utf-8"))

# case → the rule (mechanism) that names it
NAMED_BY = {
    "C01": "VI810",  # rollout TP does not tile the GPUs (engine_workers.py:659)
    "C03": "VI814",  # config vs the hardware given
    "C04": "VI811",  # rollout TP crosses nodes
    "C05": "VI905",  # rollout DP makes one vLLM replica span nodes for a dense model (replica.py:113-118)
    "C10": "VI821", "C11": "VI821", "C16": "VI821",  # batch × n over the data-parallel world (validate_config)
    "C12": "VI904",  # Megatron CP under dynamic batching: budget × CP before the split (engine/utils.py:111)
    "C13": "VI830",  # token budget below prompt + response
    "C15": "VI820",  # mini-batch above train batch
    "C26": "VI814", "C27": "VI814", "C34": "VI814",
    "C36": "VI804",  # +key a dataclass rejects (FSDPActorConfig has no field 'model')
    "C38": "VI890",  # hybrid_engine: read only by trainers this configuration does not run
    "C39": "VI890",  # rollout.nnodes: read only in standalone (separate) rollout
    "C37": "VI894",  # a VLM critic: no token-classification class in transformers (utils/model.py:641-680)
    "C40": "VI842",
    "C41": "VI906",  # rollout max_model_len above max_num_batched_tokens (rollout.yaml:86, vllm_async_server.py:1113)
    "C44": "VI853",
    # cases only partly detectable from the config, named by the same mechanisms
    "C17": "VI890",  # filter_groups.max_num_gen_batches: the V1 trainer reads it only to warn it is ignored
    "C20": "VI802",  # SFT entry point's own tree: +data.prompt_key is a key sft_trainer never reads
}


def _run(case: dict):
    hw = case["hardware"]
    name = case["config_name"]
    extra = [] if name == "ppo_trainer" else [f"--config-name={name}"]
    return check(None, [*extra, *case["overrides"]], nnodes=hw.get("nnodes"), gpus_per_node=hw.get("gpus_per_node"),
                 gpu_memory_gb=hw.get("gpu_memory_gb"), env={})


def _naming_rules(case: dict, report) -> set[str]:
    want = set(case["expected_keys"])
    return {f.problem.rule for f in report.findings if f.problem.severity in ("error", "warning")
            and want & set(f.problem.keys)}


@pytest.fixture(scope="module")
def reports():
    return {c["id"]: _run(c) for c in CASES}


@pytest.mark.parametrize("cid", sorted(NAMED_BY))
def test_each_case_is_named_by_its_mechanism(cid, reports):
    case = next(c for c in CASES if c["id"] == cid)
    assert NAMED_BY[cid] in _naming_rules(case, reports[cid]), [f.problem.line() for f in reports[cid].findings]


def test_share_of_statically_detectable_mistakes_named(reports):
    yes = [c for c in CASES if c["statically_detectable"] == "yes" and c["expected_severity"] != "none"]
    named = [c["id"] for c in yes if _naming_rules(c, reports[c["id"]])]
    share = len(named) / len(yes)
    print(f"named {len(named)} of {len(yes)} statically detectable mistakes: {named}")
    assert share >= MIN_SHARE, sorted(set(c["id"] for c in yes) - set(named))


MIN_SHARE = 1.0  # 20 of 20 (the goal is 0.9)


def test_negative_controls_get_no_error(reports):
    for c in CASES:
        if c["expected_severity"] == "none":
            assert not reports[c["id"]].errors, (c["id"], [f.problem.line() for f in reports[c["id"]].errors])
