"""VI629 / VI635: Megatron override_transformer_config.pipeline_model_parallel_layout (R75-05 Megatron-Bridge#1502,
R75-06 NVIDIA/Megatron-LM#1852, rebuilt on verl's Megatron actor).

Oracles: verl's own McoreEngineConfig (workers/config/engine.py), which accepts every layout at config time (so the
failure is a worker-time one verl does not catch), and megatron-core's own PipelineParallelLayerLayout parser and
validate_layer_layout where megatron-core is importable (verl 0.9.1's [megatron] extra; not installed in this
environment's venv, so that comparison skips here). The megatron-core facts the rule encodes are written out in
wizard/check/rules/pp_layout.py's docstring with file:line.
"""

from __future__ import annotations

import importlib.util
import json
import re
import warnings
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.pp_layout import layout_problems, parse_layout

LAYOUT = "actor_rollout_ref.actor.megatron.override_transformer_config.pipeline_model_parallel_layout"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",  # 28 layers
        "data.train_batch_size=256", "actor_rollout_ref.actor.ppo_mini_batch_size=64",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=12288",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]


def run(pp: int, layout: str | None, vpp: int | None = None, *extra: str):
    over = [*BASE, f"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size={pp}", *extra]
    if vpp is not None:
        over.append(f"actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size={vpp}")
    if layout is not None:
        over.append(f"+{LAYOUT}='{layout}'")
    return check(None, over, config_name="ppo_megatron_trainer")


def test_r75_05_layout_vpp_conflict():
    # Megatron-Bridge#1502: 16 stages over PP=4 (VPP 4 implied) with virtual_pipeline_model_parallel_size=1
    report = run(4, "E|(t*2|)*14L", 1)
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI629"]
    assert hit.severity == "error" and "virtual_pipeline_model_parallel_size=4" in hit.hint and LAYOUT in hit.keys


def test_r75_06_decoder_count():
    # Megatron-LM#1852 style: a trailing '|' and 13 × 'tt' + 't' = 27 decoders for a 28-layer model
    report = run(4, "Et|(tt|)*13L|")
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI629"]
    assert "27 decoder layers" in hit.message and "28" in hit.message


def test_stage_count_and_conflicts():
    assert "VI629" in run(4, "Et*9|t*9|t*10L").ids("error")  # 3 stages over PP=4
    assert "VI629" in run(2, "t*14|t*14", 1).ids("error")  # no E / L
    assert "VI629" in run(2, "Et*14|t*14x", 1).ids("error")  # unknown character
    report = run(2, "Et*14|t*14L", None,
                 "+actor_rollout_ref.actor.megatron.override_transformer_config.num_layers_in_first_pipeline_stage=14")
    assert "VI629" in report.ids("error")


def test_valid_layouts_stay_clean():
    for pp, layout, vpp in ((4, "E,t*7|t*7|t*7|t*7,L", None), (2, "Et*7|t*7|t*7|t*7L", 2), (1, "Et*28L", None)):
        ids = run(pp, layout, vpp).ids()
        assert not {"VI629", "VI635"} & ids, (layout, ids)
    assert not {"VI629", "VI635"} & run(2, None).ids()  # no layout: nothing to judge


def test_unset_vpp_warns():
    report = run(2, "Et*7|t*7|t*7|t*7L")
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI635"]
    assert hit.severity == "warning" and hit.hint.endswith("virtual_pipeline_model_parallel_size=2")


def test_critic_layout_checked():
    critic = ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-7B-Instruct", "critic.strategy=megatron",
              "critic.megatron.pipeline_model_parallel_size=4",
              "critic.megatron.virtual_pipeline_model_parallel_size=1",
              "+critic.megatron.override_transformer_config.pipeline_model_parallel_layout='E|(t*2|)*14L'"]
    report = check(None, [*BASE, *critic, "critic.ppo_micro_batch_size_per_gpu=4"], config_name="ppo_megatron_trainer")
    assert any(f.problem.rule == "VI629" and "critic" in f.problem.message for f in report.findings)


def test_verl_accepts_every_layout_at_config_time():
    """verl's own McoreEngineConfig takes the bad layouts without a word: the failure comes later, in the worker."""
    from verl.workers.config.engine import McoreEngineConfig

    for layout, vpp in (("E|(t*2|)*14L", 1), ("Et|(tt|)*13L|", None), ("t*14|t*14", None)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = McoreEngineConfig(pipeline_model_parallel_size=4, virtual_pipeline_model_parallel_size=vpp,
                                    override_transformer_config={"pipeline_model_parallel_layout": layout})
        assert cfg.override_transformer_config["pipeline_model_parallel_layout"] == layout


DATA = Path(__file__).resolve().parent.parent / "wizard" / "check" / "data" / "mcore_pp_layout.json"


def _table() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


def test_grammar_matches_megatron_core_verdicts():
    """Every case megatron-core's own parser and validate_layer_layout judged (scripts/mcore_pp_layout.py): the rule
    flags exactly the layouts megatron-core rejects, implies the same virtual pipeline, and parses the same stages."""
    table = _table()
    assert table["megatron_core"] and len(table["cases"]) >= 10
    assert {r["accepted"] for r in table["cases"]} == {True, False}
    for row in table["cases"]:
        problems, implied = layout_problems(row["layout"], row["pp"], row["vpp"], row["num_layers"])
        assert row["accepted"] == (not problems), (row, problems)
        if row["implied_vpp"] is not None:
            assert implied == row["implied_vpp"], row
        if row["stages"] is not None:
            assert ["".join(stage) for stage in parse_layout(row["layout"])] == row["stages"], row


def test_table_regenerates_where_megatron_core_is_installed():
    """With megatron-core importable the committed table is what the script writes now; without it (this venv:
    verl's [megatron] extra is not installed) the table still names the megatron-core release that answered."""
    spec = importlib.util.spec_from_file_location("mcore_pp_layout", DATA.parents[3] / "scripts" / "mcore_pp_layout.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)  # type: ignore[union-attr]
    assert [(r["layout"], r["pp"], r["vpp"], r["num_layers"]) for r in _table()["cases"]] == list(script.CASES)
    if importlib.util.find_spec("megatron") is None or importlib.util.find_spec("megatron.core") is None:
        assert re.fullmatch(r"\d+\.\d+\.\d+\S*", _table()["megatron_core"])
        return
    assert script.build() == _table()
