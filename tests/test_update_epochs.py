"""VI438 / VI439: an update epoch count / a run budget below 1 (wizard/check/rules/update_epochs.py,
update_run_budget.py).

The class is verl PR #7924's (real cases R98-02..04: zero counts verl's config validation accepts); ppo_epochs=0 is
its member that never crashes. The oracle is verl itself on the CPU: FSDPActorConfig accepts ppo_epochs=0, and the
TrainingWorker's iterator, verl.utils.tensordict_utils.make_iterator, yields no mini-batch for epochs=0 (one pass per
epoch otherwise), so train_mini_batch trains nothing. For VI439 the oracle is the header of each trainer's `fit` loop,
read from verl's installed source with `ast` and evaluated at the budget the launch sets. The table the rules read is
regenerated from verl's source.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from test_check_clip_bounds import BASE, ROOT, A  # the same small GRPO launch

from wizard.check.lint import check

GAE = ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct",
       "critic.ppo_micro_batch_size_per_gpu=4", "critic.ppo_mini_batch_size=16"]


def _hits(*extra: str):
    return [f for f in check(None, BASE + list(extra), defaults="snapshot").findings if f.problem.rule == "VI438"]


@pytest.mark.verl
def test_table_matches_verls_source():
    sys.path.insert(0, str(ROOT / "scripts"))
    import update_epochs_table

    committed = json.loads((ROOT / "wizard/check/data/update_epochs.json").read_text(encoding="utf-8"))
    assert update_epochs_table.build() == committed
    assert set(committed["keys"]) == {f"{A}.ppo_epochs", "critic.ppo_epochs"}
    assert committed["consumer"].startswith("utils/tensordict_utils.py:")


@pytest.mark.verl
def test_verl_accepts_zero_epochs_and_its_iterator_then_yields_nothing():
    import torch
    from tensordict import TensorDict

    from verl.utils import tensordict_utils as tu
    from verl.workers.config import FSDPActorConfig

    config = FSDPActorConfig(ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=2, strategy="fsdp", rollout_n=1,
                             ppo_epochs=0)  # no error: verl's config accepts it
    assert config.ppo_epochs == 0
    data = TensorDict({"x": torch.arange(8).unsqueeze(1)}, batch_size=[8])
    assert list(tu.make_iterator(data, mini_batch_size=4, epochs=0)) == []  # no mini-batch: no update at all
    assert len(list(tu.make_iterator(data, mini_batch_size=4, epochs=1))) == 2
    assert len(list(tu.make_iterator(data, mini_batch_size=4, epochs=2))) == 4


@pytest.mark.parametrize("value", [0, -1])
def test_actor_epochs_below_one_is_an_error(value):
    hits = _hits(f"{A}.ppo_epochs={value}")
    assert [h.problem.keys[0] for h in hits] == [f"{A}.ppo_epochs"] and hits[0].problem.severity == "error"
    assert "range(epochs)" in hits[0].problem.message and hits[0].fix is not None


def test_critic_epochs_zero_fires_only_when_a_critic_trains():
    assert not _hits("critic.ppo_epochs=0")  # GRPO builds no critic (VI841 reports the dead key)
    hits = _hits(*GAE, "critic.ppo_epochs=0")
    assert [h.problem.keys[0] for h in hits] == ["critic.ppo_epochs"]


@pytest.mark.parametrize("extra", [(), (f"{A}.ppo_epochs=1",), (f"{A}.ppo_epochs=4",),
                                   (*GAE, "critic.ppo_epochs=2")])
def test_valid_epochs_stay_clean(extra):
    assert not _hits(*extra)


def test_registered_for_ppo_only():
    from wizard.check import lint
    from wizard.check.rules.update_epochs import rule_update_epochs

    from wizard.check.rules.update_run_budget import rule_run_budget

    assert rule_update_epochs in lint.PPO_RULES and rule_update_epochs not in lint.SFT_RULES
    assert rule_run_budget in lint.PPO_RULES and rule_run_budget in lint.SFT_RULES


def _verl_loop(rel: str):
    import ast
    import importlib.util

    root = Path(importlib.util.find_spec("verl").submodule_search_locations[0])
    tree = ast.parse((root / rel).read_text(encoding="utf-8"))
    fit = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "fit")
    loop = next(n for n in ast.walk(fit) if isinstance(n, (ast.While, ast.For))
                and "total_epochs" in ast.unparse(n.test if isinstance(n, ast.While) else n.iter))
    return compile(ast.Expression(loop.test if isinstance(loop, ast.While) else loop.iter), rel, "eval")


def _enters(rel: str, total_epochs: int, total_training_steps: int | None, steps_per_epoch: int = 4) -> bool:
    """Does verl's own loop header admit the first step? (global_steps starts at 1, epoch at 0)."""
    from types import SimpleNamespace

    tts = total_training_steps if total_training_steps is not None else steps_per_epoch * total_epochs
    self = SimpleNamespace(config=SimpleNamespace(trainer=SimpleNamespace(total_epochs=total_epochs)),
                           global_steps=1, total_training_steps=tts)
    got = eval(_verl_loop(rel), {"range": range}, {"self": self, "current_epoch": 0, "start_epoch": 0})
    return bool(got) if isinstance(got, bool) else len(got) > 0


@pytest.mark.verl
@pytest.mark.parametrize("rel", ["trainer/ppo/v1/trainer_base.py", "trainer/ppo/ray_trainer.py",
                                 "trainer/sft_trainer.py"])
def test_verls_fit_loop_is_never_entered_at_zero_epochs(rel):
    assert _enters(rel, 1, None) and not _enters(rel, 0, None)


@pytest.mark.verl
def test_v1_loop_is_never_entered_at_zero_training_steps():
    assert not _enters("trainer/ppo/v1/trainer_base.py", 3, 0)
    assert _enters("trainer/ppo/v1/trainer_base.py", 3, 1)


def _budget(*extra: str):
    return [f for f in check(None, BASE + list(extra), defaults="snapshot").findings if f.problem.rule == "VI439"]


def test_run_budget_below_one_is_an_error():
    assert [h.problem.keys[0] for h in _budget("trainer.total_epochs=0")] == ["trainer.total_epochs"]
    hits = _budget("trainer.total_training_steps=0")
    assert [h.problem.keys[0] for h in hits] == ["trainer.total_training_steps"] and hits[0].fix is not None
    # the legacy trainer's loop reads total_epochs only (ray_trainer.py:1465): total_training_steps=0 is not VI439's
    assert not _budget("trainer.use_v1=False", "trainer.total_training_steps=0")
    assert _budget("trainer.use_v1=False", "trainer.total_epochs=-1")


@pytest.mark.parametrize("extra", [(), ("trainer.total_epochs=1",), ("trainer.total_training_steps=5",)])
def test_valid_run_budget_stays_clean(extra):
    assert not _budget(*extra)


def test_sft_launch_with_zero_epochs(tmp_path):
    script = tmp_path / "sft.sh"
    script.write_text("torchrun --standalone --nnodes=1 --nproc-per-node=2 -m verl.trainer.sft_trainer "
                      "data.train_files=/tmp/x.parquet model.path=Qwen/Qwen2.5-0.5B-Instruct "
                      "trainer.total_epochs=0\n", encoding="utf-8")
    hits = [f for f in check(str(script)).findings if f.problem.rule == "VI439"]
    assert [h.problem.keys[0] for h in hits] == ["trainer.total_epochs"]
    script.write_text(script.read_text(encoding="utf-8").replace("total_epochs=0", "total_epochs=2"), encoding="utf-8")
    assert not [f for f in check(str(script)).findings if f.problem.rule == "VI439"]
