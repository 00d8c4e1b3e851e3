"""VI776 (a policy-loss key the chosen loss mode never reads, verl#2216), VI777 (a KL loss whose expected gradient is
zero, verl PR#2953) and VI778 (entropy chunking on a path of the FSDP engine that never reads it, verl PR#7582).

The oracles are verl's own code: its registered policy-loss functions run on a CPU batch with two values of each key
(the loss changes exactly for the keys the table says a mode reads), its kl_penalty under autograd (the tables are
regenerated from the installed verl and compared), and the FSDP engine's prepare_model_outputs source.
"""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check
from wizard.check.rules import losses

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "wizard" / "check" / "data"
A = "actor_rollout_ref.actor"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=256", "actor_rollout_ref.rollout.n=8",
        f"{A}.ppo_mini_batch_size=32", f"{A}.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]

# two values of each key, far enough apart that any function reading the key gives another loss on BATCH below
PAIRS = {"clip_ratio": (0.05, 0.6), "clip_ratio_low": (0.05, 0.6), "clip_ratio_high": (0.05, 0.6),
         "clip_ratio_c": (1.2, 10.0), "tau_pos": (1.0, 6.0), "tau_neg": (1.05, 8.0),
         "policy_loss.clip_cov_ratio": (0.0002, 0.5), "policy_loss.clip_cov_lb": (-5.0, 1.0),
         "policy_loss.clip_cov_ub": (5.0, 1.2), "policy_loss.kl_cov_ratio": (0.0002, 0.5),
         "policy_loss.ppo_kl_coef": (0.1, 5.0), "policy_loss.dro_beta": (0.1, 2.0)}


def _hits(rule: str, *extra: str):
    return [f.problem for f in check(None, [*BASE, *extra]).findings if f.problem.rule == rule]


# --- VI776: the table, and verl's loss functions as its oracle ---------------------------------------------------------

@pytest.mark.verl
def test_regenerating_the_policy_loss_table_gives_the_committed_one():
    assert regenerated("verl_policy_loss_reads") == (DATA / "verl_policy_loss_reads.json").read_text(encoding="utf-8")


def test_the_table_holds_verls_reads():
    modes = losses.policy_loss_reads()["modes"]
    assert set(modes["kl_cov"]["reads"]) == {"policy_loss.kl_cov_ratio", "policy_loss.ppo_kl_coef"}
    assert set(modes["vanilla"]["reads"]) == {"clip_ratio", "clip_ratio_low", "clip_ratio_high", "clip_ratio_c"}
    assert modes["gpg"]["reads"] == {}
    # bypass_mode reads through compute_policy_loss_vanilla (a helper it calls with the config)
    assert set(modes["bypass_mode"]["reads"]) == set(modes["vanilla"]["reads"])
    assert "policy_loss.rollout_correction.rollout_is" in modes["bypass_mode"]["runtime"]  # copied from algorithm.*


@pytest.fixture(scope="module")
def verl_loss():
    torch = pytest.importorskip("torch")
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config.actor import FSDPActorConfig, PolicyLossConfig

    torch.manual_seed(0)
    b, t = 16, 32
    log_prob = torch.randn(b, t) - 2
    old = log_prob + torch.randn(b, t) * 0.5  # off-policy: ratios far from 1
    adv = torch.randn(b, 1).expand(b, t).contiguous()
    mask = torch.ones(b, t)

    def loss(mode: str, key: str, value: float) -> float:
        actor = {"clip_ratio_low": None, "clip_ratio_high": None} if key == "clip_ratio" else {}
        policy = {"loss_mode": mode, "dro_beta": 0.5}
        if key.startswith("policy_loss."):
            policy[key.split(".", 1)[1]] = value
        else:
            actor[key] = value
        cfg = FSDPActorConfig(strategy="fsdp", rollout_n=8, ppo_micro_batch_size_per_gpu=1,
                              policy_loss=PolicyLossConfig(**policy), **actor)
        torch.manual_seed(1)  # clip_cov picks its tokens with randperm
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got, _ = get_policy_loss_fn(mode)(old_log_prob=old.clone(), log_prob=log_prob.clone(), advantages=adv,
                                              response_mask=mask, loss_agg_mode="token-mean", config=cfg)
        return got.item()

    return loss


@pytest.mark.verl
@pytest.mark.parametrize("mode", ["vanilla", "kl_cov", "clip_cov", "gpg", "gspo", "sapo", "dro", "bypass_mode"])
def test_verls_loss_changes_exactly_with_the_keys_the_table_says_it_reads(verl_loss, mode):
    table = losses.policy_loss_reads()
    claims = set(table["modes"][mode]["reads"])
    changed = {key for key in table["keys"] if verl_loss(mode, key, PAIRS[key][0]) != verl_loss(mode, key, PAIRS[key][1])}
    assert changed == claims


@pytest.mark.verl
def test_kl_cov_ignores_the_clip_bounds_vanilla_applies(verl_loss):
    """The real case: on off-policy data kl_cov's loss is the same for clip 0.05 and 0.6; vanilla's is not."""
    for key in ("clip_ratio_low", "clip_ratio_high", "clip_ratio_c"):
        assert verl_loss("kl_cov", key, PAIRS[key][0]) == verl_loss("kl_cov", key, PAIRS[key][1])
        assert verl_loss("vanilla", key, PAIRS[key][0]) != verl_loss("vanilla", key, PAIRS[key][1])


def test_vi776_fires_on_kl_cov_with_clip_bounds():
    [hit] = _hits("VI776", f"{A}.policy_loss.loss_mode=kl_cov", f"{A}.clip_ratio_low=0.2", f"{A}.clip_ratio_high=0.2")
    assert hit.keys == (f"{A}.policy_loss.loss_mode", f"{A}.clip_ratio_high", f"{A}.clip_ratio_low")
    assert "kl_cov" in hit.message and "policy_loss.kl_cov_ratio, policy_loss.ppo_kl_coef" in hit.message
    assert "core_algos.py:1849-1925" in hit.message and "8 optimizer steps" in hit.message


def test_vi776_names_other_modes_and_keys():
    [hit] = _hits("VI776", f"{A}.policy_loss.loss_mode=gspo", f"{A}.clip_ratio_c=10.0")  # verl's Ascend GSPO example
    assert hit.keys[1:] == (f"{A}.clip_ratio_c",) and "unclipped" not in hit.message  # gspo clips with low/high
    [hit] = _hits("VI776", f"{A}.tau_pos=2.0")  # SAPO's temperature on vanilla PPO
    assert "vanilla" in hit.message and hit.keys[1:] == (f"{A}.tau_pos",)


@pytest.mark.slow
def test_vi776_is_silent_on_keys_the_mode_reads():
    assert not _hits("VI776", f"{A}.clip_ratio_low=0.2", f"{A}.clip_ratio_high=0.28", f"{A}.clip_ratio_c=3.0")
    assert not _hits("VI776", f"{A}.policy_loss.loss_mode=kl_cov", f"{A}.policy_loss.kl_cov_ratio=0.002")
    assert not _hits("VI776", f"{A}.policy_loss.loss_mode=sapo", f"{A}.tau_pos=1.0", f"{A}.tau_neg=1.05")
    assert not _hits("VI776", f"{A}.policy_loss.loss_mode=kl_cov")  # nothing set beside it
    assert not _hits("VI776", f"{A}.policy_loss.loss_mode=my_loss", f"{A}.clip_ratio_low=0.2")  # not verl's mode


def test_vi868_leaves_a_key_the_mode_never_reads_to_vi776():
    one_step = ["data.train_batch_size=32"]
    assert "VI868" in check(None, [*BASE, *one_step, f"{A}.clip_ratio_low=0.2"]).ids()
    ids = check(None, [*BASE, *one_step, f"{A}.policy_loss.loss_mode=kl_cov", f"{A}.clip_ratio_low=0.2"]).ids()
    assert "VI868" not in ids and "VI776" in ids


# --- VI777: the KL estimators' expected gradients ---------------------------------------------------------------------

@pytest.mark.verl
def test_regenerating_the_kl_gradient_table_gives_the_committed_one():
    assert regenerated("verl_kl_gradients") == (DATA / "verl_kl_gradients.json").read_text(encoding="utf-8")


@pytest.mark.verl
def test_k1s_sampled_gradient_averages_to_zero_and_k1_plus_to_kls():
    """Sampling from the policy (not the exact expectation the table uses): the mean gradient of verl's k1 estimate
    over 200k sampled tokens is noise around 0, k1+'s is the gradient of KL(pi || ref)."""
    torch = pytest.importorskip("torch")
    from verl.trainer.ppo.core_algos import kl_penalty

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(20, generator=g, dtype=torch.float64).requires_grad_(True)
    ref = torch.log_softmax(torch.randn(20, generator=g, dtype=torch.float64), -1)
    logp = torch.log_softmax(logits, -1)
    true = torch.autograd.grad((logp.exp() * (logp - ref)).sum(), logits)[0]
    tokens = torch.multinomial(logp.exp().detach(), 200_000, replacement=True, generator=g)
    for kind, target in (("k1", torch.zeros_like(true)), ("k1+", true)):
        logp = torch.log_softmax(logits, -1)
        got = torch.autograd.grad(kl_penalty(logp[tokens], ref[tokens], kind).mean(), logits)[0]
        assert (got - target).norm() < 0.1 * true.norm(), kind


def test_the_kl_table_classes():
    types = losses.kl_gradients()
    assert types["kl"] == types["k1"] == "zero gradient"
    assert types["low_var_kl"] == types["k3"] == types["abs"] == "biased"
    assert {types[t] for t in ("k1+", "kl+", "k2", "mse", "low_var_kl+", "k3+")} == {"unbiased"}
    assert types["full"].startswith("raises: NotImplementedError")


def test_vi777_fires_on_k1_as_a_loss():
    for kind in ("kl", "k1"):
        [hit] = _hits("VI777", f"{A}.use_kl_loss=True", f"{A}.kl_loss_type={kind}", f"{A}.kl_loss_coef=0.01")
        assert hit.severity == "warning" and f"kl_loss_type={kind}" in hit.message and f"{kind}+" in hit.hint


@pytest.mark.slow
def test_vi777_is_silent_on_estimators_with_a_gradient_and_off_the_loss():
    for kind in ("low_var_kl", "k3", "k2", "mse", "abs", "k1+", "kl+", "low_var_kl+"):
        assert not _hits("VI777", f"{A}.use_kl_loss=True", f"{A}.kl_loss_type={kind}"), kind
    assert not _hits("VI777", f"{A}.use_kl_loss=True")  # verl's default low_var_kl
    assert not _hits("VI777", f"{A}.use_kl_loss=False", f"{A}.kl_loss_type=k1")
    assert not _hits("VI777", f"{A}.use_kl_loss=True", f"{A}.kl_loss_type=k1", f"{A}.kl_loss_coef=0")
    # k1 as a reward penalty is not differentiated: fine there
    assert not _hits("VI777", "algorithm.use_kl_in_reward=True", "algorithm.kl_penalty=kl")


# --- VI778: entropy chunking on the FSDP engine ----------------------------------------------------------------------

CHUNK = f"{A}.entropy_from_logits_with_chunking=True"


@pytest.mark.verl
def test_the_fsdp_engine_chunks_only_on_the_remove_padding_unfused_branch():
    """prepare_model_outputs' source: the chunk size is passed once, inside `if use_remove_padding:` and outside its
    `if use_fused_kernels:`; the padded branch's non-fused entropy is verl_F.entropy_from_logits."""
    import ast
    import textwrap

    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    fn = ast.parse(textwrap.dedent(inspect.getsource(FSDPEngineWithLMHead.prepare_model_outputs))).body[0]
    top = next(n for n in fn.body if isinstance(n, ast.If) and ast.unparse(n.test) == "use_remove_padding")
    rmpad, padded = ast.unparse(ast.Module(body=top.body, type_ignores=[])), ast.unparse(
        ast.Module(body=top.orelse, type_ignores=[]))
    assert "entropy_from_logits_chunk_size" in rmpad and "entropy_from_logits_chunk_size" not in padded
    assert "verl_F.entropy_from_logits(logits)" in padded and "entropy_from_logits_with_chunking" not in padded
    fused = next(n for n in top.body if isinstance(n, ast.If) and ast.unparse(n.test) == "use_fused_kernels")
    assert "chunk" not in ast.unparse(ast.Module(body=fused.body, type_ignores=[]))
    assert "output.entropy" in ast.unparse(ast.Module(body=fused.body, type_ignores=[]))


def test_vi778_fires_without_remove_padding_or_with_fused_kernels():
    [hit] = _hits("VI778", "actor_rollout_ref.model.use_remove_padding=False", CHUNK,
                  f"{A}.entropy_from_logits_chunk_size=1024")
    assert hit.keys == (f"{A}.entropy_from_logits_with_chunking", f"{A}.entropy_from_logits_chunk_size",
                        "actor_rollout_ref.model.use_remove_padding")
    assert "transformer_impl.py:1455, :1489-1491" in hit.message
    [hit] = _hits("VI778", "actor_rollout_ref.model.use_fused_kernels=True", CHUNK)
    assert "fused kernel" in hit.message


def test_vi778_is_silent_where_the_flag_is_read():
    assert not _hits("VI778", CHUNK)  # remove padding is verl's default (model/hf_model.yaml:40)
    assert not _hits("VI778", "actor_rollout_ref.model.use_remove_padding=False")  # flag not set
    # Megatron reads it on every path (engine/megatron/transformer_impl.py:1223-1229)
    assert not _hits("VI778", "model_engine=megatron", "actor_rollout_ref.model.use_remove_padding=False", CHUNK)


def test_vi778_does_not_duplicate_vi890():
    report = check(None, [*BASE, "actor_rollout_ref.model.use_remove_padding=False", CHUNK])
    assert "VI778" in report.ids()
    assert not [f for f in report.findings if f.problem.rule == "VI890" and
                "entropy_from_logits_with_chunking" in f.problem.keys[0]]


def test_the_tables_ship_as_package_data():
    for name in ("verl_policy_loss_reads.json", "verl_kl_gradients.json"):
        assert json.loads((DATA / name).read_text(encoding="utf-8"))
