"""An engine package's helper module runs only where its engine runs (scripts/verl_readers.py _helper_scopes).

Case R100-01 (verl-project/verl PR #7945, which proposes `use_fused_kernels + use_liger` on the Megatron engine):
in verl 0.9.1 actor_rollout_ref.model.use_liger is read by the FSDP engine (verl/workers/engine/fsdp/transformer_impl.py:307)
and by verl/workers/engine/fsdp/utils.py:28 (apply_npu_fsdp_patches), which only that engine imports (:140). The
readers table used to count utils.py as run by every configuration, so VI890 never flagged use_liger on Megatron,
where nothing applies Liger. The oracle is verl's own source: its import graph and the Megatron engine's code.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from wizard.check.lint import check
from wizard.check.rules import readers

BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]


def _verl() -> Path:
    return Path(importlib.util.find_spec("verl").origin).parent


def _script():
    from helpers_scripts import load_script

    return load_script("verl_readers")


def _vi890(report) -> dict[str, str]:
    return {f.problem.keys[0]: f.problem.line() for f in report.findings if f.problem.rule == "VI890"}


def test_verls_fsdp_helper_is_imported_by_the_fsdp_engine_alone():
    """Oracle: verl's own import graph. Only the FSDP engine imports engine/fsdp/utils.py, and the Megatron engine's
    code never names use_liger, so on Megatron nothing acts on it."""
    users = _script().importers(_verl())["workers/engine/fsdp/utils.py"]
    assert users == {"workers/engine/fsdp/transformer_impl.py"}
    megatron = (_verl() / "workers/engine/megatron/transformer_impl.py").read_text(encoding="utf-8")
    names = {n.attr for n in ast.walk(ast.parse(megatron)) if isinstance(n, ast.Attribute)}
    assert "use_liger" not in names and "use_liger" not in megatron


def test_the_table_scopes_the_helper_to_the_engines_importing_it():
    table = readers.readers_table()
    assert set(table["scopes"]["engine:fsdp/utils"]["any"][0]["in"]) >= {"fsdp", "fsdp2"}
    assert "megatron" not in table["scopes"]["engine:fsdp/utils"]["any"][0]["in"]
    for key in ("actor_rollout_ref.model.use_liger", "critic.model.use_liger"):
        assert "always" not in table["keys"][key], key


def test_use_liger_on_megatron_is_flagged_and_points_at_fused_kernels():
    got = _vi890(check(None, BASE + ["model_engine=megatron", "actor_rollout_ref.model.use_liger=true"]))
    line = got["actor_rollout_ref.model.use_liger"]
    assert "use_fused_kernels=True" in line and "verl/workers/engine/fsdp/transformer_impl.py:307" in line


def test_use_liger_on_fsdp_stays_clean():
    for strategy in ([], ["actor_rollout_ref.actor.strategy=fsdp2"]):
        got = _vi890(check(None, BASE + strategy + ["actor_rollout_ref.model.use_liger=true"]))
        assert "actor_rollout_ref.model.use_liger" not in got


def test_a_helper_imported_from_outside_the_engines_keeps_running_always(tmp_path):
    """The rule of _helper_scopes on a tiny planted package: a helper only an engine imports gets its scope; one a
    non-engine module also imports stays 'always'."""
    eng = tmp_path / "workers" / "engine" / "toy"
    eng.mkdir(parents=True)
    (eng / "__init__.py").write_text("")
    (eng / "impl.py").write_text("from .helper import f\nfrom .shared import g\n")
    (eng / "helper.py").write_text("def f(c):\n    return c.knob\n")
    (eng / "shared.py").write_text("def g(c):\n    return c.other\n")
    (tmp_path / "trainer.py").write_text("from verl.workers.engine.toy.shared import g\n")
    per_module = {"workers/engine/toy/impl.py": {"toy"}}
    _script()._helper_scopes(tmp_path, per_module)
    assert per_module["workers/engine/toy/helper.py"] == {"toy"}
    assert "workers/engine/toy/shared.py" not in per_module
