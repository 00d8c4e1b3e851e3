"""VI791 (role-level grad_clip, verl PR#7923), VI792 (ppo_epochs replaying one mini-batch order, verl#3213), VI793
(kl_cov run strictly on-policy, PRIME-RL/Entropy-Mechanism-of-RL#1): cases R22-01, R22-04, R25-02.

The oracles are verl's own code on the CPU: an AST walk of verl's source for every reader of grad_clip, verl's FSDP
engine optimizer_step clipping with the composed optim config, verl's make_iterator over a batch across epochs, and
verl's registered kl_cov policy loss under autograd with log_prob = old_log_prob and with an off-policy batch.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.minibatches import mini_batches

A = "actor_rollout_ref.actor"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
        "data.train_batch_size=16", f"{A}.ppo_mini_batch_size=8", "actor_rollout_ref.rollout.n=4",
        f"{A}.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=1"]
GAE = ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-1.5B-Instruct"]


def _hits(rule: str, *extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule == rule]


def _compose(overrides: list[str]):
    import verl
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer/config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


# ---- VI791: grad_clip ------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.verl
def test_verl_reads_grad_clip_only_as_optim_alias():
    """Every `.grad_clip` attribute, getattr/get("grad_clip") and "grad_clip" string in verl's code: the only reads
    are optimizer.py's own alias (OptimizerConfig.grad_clip → clip_grad); the role-level fields are declarations."""
    import verl

    root = Path(verl.__file__).parent
    reads: list[str] = []
    for path in root.rglob("*.py"):
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "grad_clip":
                reads.append(f"{rel}:{node.lineno}")
            elif isinstance(node, ast.Constant) and node.value == "grad_clip":
                reads.append(f"{rel}:{node.lineno}")
    assert reads and all(r.startswith("workers/config/optimizer.py:") for r in reads), reads


@pytest.mark.slow
@pytest.mark.verl
def test_verl_engine_clips_with_optim_clip_grad_not_grad_clip():
    import types

    import torch
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    from wizard.check.rules.gradclip import VERL_CLIP_DEFAULT

    cfg = _compose([f"{A}.grad_clip=0.2", "critic.grad_clip=0.2"])
    assert cfg.actor_rollout_ref.actor.grad_clip == 0.2 and cfg.critic.grad_clip == 0.2
    for optim_cfg in (cfg.actor_rollout_ref.actor.optim, cfg.critic.optim):
        optim = omega_conf_to_dataclass(optim_cfg)
        assert optim.clip_grad == VERL_CLIP_DEFAULT
        module = torch.nn.Linear(4, 4)
        for p in module.parameters():
            p.grad = torch.full_like(p, 10.0)
        stub = types.SimpleNamespace(optimizer_config=optim, module=module, _qat_enabled=False,
                                     optimizer=torch.optim.SGD(module.parameters(), lr=0.0))
        before = FSDPEngine.optimizer_step(stub)
        after = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in module.parameters()])).item()
        assert before > 1.0 and after == pytest.approx(VERL_CLIP_DEFAULT, rel=1e-4)  # 1.0, not 0.2


@pytest.mark.slow
def test_check_warns_on_role_grad_clip_and_moves_it():
    [actor] = _hits("VI791", f"{A}.grad_clip=0.2")
    assert actor.problem.severity == "warning" and "max_norm=1.0, not 0.2" in actor.problem.message
    assert actor.fix.set == {f"{A}.optim.clip_grad": 0.2} and actor.fix.delete == [f"{A}.grad_clip"]
    both = _hits("VI791", *GAE, f"{A}.grad_clip=0.2", "critic.grad_clip=0.5")
    assert {h.problem.keys[0] for h in both} == {f"{A}.grad_clip", "critic.grad_clip"}
    [kept] = _hits("VI791", f"{A}.grad_clip=0.2", f"{A}.optim.clip_grad=0.5")
    assert kept.fix is None and "optim.clip_grad=0.5" in kept.problem.message


@pytest.mark.parametrize("extra", [
    (f"{A}.grad_clip=1.0",),  # what the engine clips at anyway (verl's own DAPO scripts)
    (f"{A}.grad_clip=0.2", f"{A}.optim.clip_grad=0.2"),  # the clip that applies is the one meant
    ("critic.grad_clip=0.2",),  # grpo: no critic is built
    (f"{A}.optim.clip_grad=0.2",),
])
def test_check_is_silent_when_the_clip_applied_is_the_one_meant(extra):
    assert not _hits("VI791", *extra)


# ---- VI792: ppo_epochs without shuffle ---------------------------------------------------------------------------

@pytest.mark.verl
def test_verl_replays_the_same_mini_batches_each_epoch_without_shuffle():
    import torch
    import verl.utils.tensordict_utils as tu
    from tensordict import TensorDict

    cfg = _compose([f"{A}.ppo_epochs=4", "algorithm.adv_estimator=gae"])
    assert cfg.actor_rollout_ref.actor.shuffle is False and cfg.critic.shuffle is False  # critic.yaml:55 follows
    assert cfg.critic.ppo_epochs == 4
    count = mini_batches(16, 4)
    td = TensorDict({"i": torch.arange(16)}, batch_size=[16])
    orders = {}
    for shuffle in (False, True):
        it = tu.make_iterator(td, mini_batch_size=4, epochs=4, seed=42, dataloader_kwargs={"shuffle": shuffle})
        batches = [tuple(mb["i"].tolist()) for mb in it]
        assert len(batches) == 4 * count
        orders[shuffle] = [batches[k * count:(k + 1) * count] for k in range(4)]
    assert all(epoch == orders[False][0] for epoch in orders[False])
    assert len({tuple(epoch) for epoch in orders[True]}) > 1


@pytest.mark.slow
def test_check_notes_replayed_epochs_for_actor_and_critic():
    [actor] = _hits("VI792", f"{A}.ppo_epochs=4")
    assert actor.problem.severity == "info" and "same 2 mini-batches" in actor.problem.message
    assert actor.fix.set == {f"{A}.shuffle": True}
    found = _hits("VI792", *GAE, f"{A}.ppo_epochs=4")
    assert {h.problem.keys[0] for h in found} == {f"{A}.ppo_epochs", "critic.ppo_epochs"}
    [critic] = _hits("VI792", *GAE, f"{A}.ppo_epochs=4", f"{A}.shuffle=True", "critic.shuffle=False")
    assert critic.fix.set == {"critic.shuffle": True}


@pytest.mark.parametrize("extra", [
    (f"{A}.ppo_epochs=4", f"{A}.shuffle=True"),
    (f"{A}.ppo_epochs=4", f"{A}.ppo_mini_batch_size=16"),  # one mini-batch: the order changes nothing
    (),  # one epoch: nothing is replayed
])
def test_check_is_silent_when_nothing_is_replayed_in_order(extra):
    assert not _hits("VI792", *extra)


# ---- VI793: kl_cov on-policy -----------------------------------------------------------------------------------

@pytest.mark.verl
def test_verl_kl_cov_penalty_is_inert_on_policy():
    import torch
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config.actor import FSDPActorConfig, PolicyLossConfig

    torch.manual_seed(0)
    cfg = FSDPActorConfig(strategy="fsdp", rollout_n=4, ppo_micro_batch_size_per_gpu=1,
                          policy_loss=PolicyLossConfig(loss_mode="kl_cov", kl_cov_ratio=0.2, ppo_kl_coef=1.0))
    logits = torch.randn(16, 32, requires_grad=True)
    adv = torch.randn(16, 1).expand(16, 32).contiguous()
    mask = torch.ones(16, 32)

    def grads(old_shift: float):
        lp = torch.nn.functional.logsigmoid(logits)
        old = lp.detach() + old_shift * torch.randn_like(lp)
        loss, metrics = get_policy_loss_fn("kl_cov")(old_log_prob=old, log_prob=lp, advantages=adv,
                                                     response_mask=mask, loss_agg_mode="token-mean", config=cfg)
        plain = (-adv * torch.exp(lp - old)).mean()  # unclipped -A·ratio, token-mean
        g_loss, = torch.autograd.grad(loss, logits, retain_graph=True)
        g_plain, = torch.autograd.grad(plain, logits)
        return (g_loss - g_plain).abs().max().item(), metrics["actor/ppo_kl"]

    on_diff, on_kl = grads(0.0)  # one step a batch: old_log_prob is log_prob
    off_diff, off_kl = grads(0.3)  # a later mini-batch: the policy has moved
    assert on_diff == 0.0 and on_kl == 0.0
    assert off_diff > 1e-3 and off_kl > 0.0


def test_check_warns_on_kl_cov_with_one_step_a_batch():
    on_policy = (f"{A}.policy_loss.loss_mode=kl_cov", f"{A}.ppo_mini_batch_size=16")
    [hit] = _hits("VI793", *on_policy)
    assert hit.problem.severity == "warning" and "unclipped" in hit.problem.message and hit.fix is None
    assert _hits("VI793", *on_policy, f"{A}.ppo_epochs=1")


@pytest.mark.parametrize("extra", [
    (f"{A}.policy_loss.loss_mode=kl_cov",),  # two mini-batches: the second is off-policy
    (f"{A}.policy_loss.loss_mode=kl_cov", f"{A}.ppo_mini_batch_size=16", f"{A}.ppo_epochs=2"),
    (f"{A}.policy_loss.loss_mode=kl_cov", f"{A}.ppo_mini_batch_size=16",
     "algorithm.rollout_correction.bypass_mode=True", "actor_rollout_ref.rollout.calculate_log_probs=True"),
    (f"{A}.ppo_mini_batch_size=16",),  # vanilla on-policy: standard GRPO
])
def test_check_is_silent_when_kl_cov_has_an_off_policy_step(extra):
    assert not _hits("VI793", *extra)
