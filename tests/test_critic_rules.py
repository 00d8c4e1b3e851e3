"""VI782-VI784: critic warmup without a critic (R22-05), the per-token discount of an outcome reward (R22-03, verl#479)
and a critic whose vocabulary does not cover the actor's ids (R22-02, verl#1778).

The oracles are verl's own code: need_critic (trainer/ppo/utils.py:96-107) and the trainers' guards of the actor
update, parsed from verl's files and evaluated step by step; compute_gae_advantage_return and REINFORCE++'s advantage
(trainer/ppo/core_algos.py) on a CPU batch with one terminal reward; for the vocabulary, verl's trainer code that
hands the rollout batch to the critic, and torch's embedding lookup in a tiny AutoModelForTokenClassification.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from wizard.check.lint import check
from wizard.check.rules.critic import FADED, first_token_factors

BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4", "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.logger=[console]", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
GRPO = ["algorithm.adv_estimator=grpo", *BASE]
PPO = ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-1.5B-Instruct", *BASE]


def _hits(rule: str, overrides: list[str]):
    return [f for f in check(None, overrides).findings if f.problem.rule == rule]


# ---------------------------------------------------------------- VI782: critic_warmup without a critic

TRAINERS = ("trainer/ppo/v1/trainer_base.py", "trainer/ppo/ray_trainer.py", "experimental/separation/ray_trainer.py")


def _actor_guards(path: Path) -> list[tuple[ast.expr, bool]]:
    """(test, update-when) of each `if` in verl's file that calls self._update_actor in its body (True) or else-branch."""
    def calls_update(nodes: list[ast.stmt]) -> bool:
        return any(isinstance(n, ast.Attribute) and n.attr == "_update_actor" for s in nodes for n in ast.walk(s))

    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and "critic_warmup" in ast.unparse(node.test):
            if calls_update(node.body):
                out.append((node.test, True))
            elif calls_update(node.orelse):
                out.append((node.test, False))
    return out


def _trained_steps(test: ast.expr, when: bool, warmup: int, steps: int) -> list[int]:
    code = compile(ast.Expression(test), "<verl guard>", "eval")
    out = []
    for step in range(1, steps + 1):  # global_steps is 1 at the first step (trainer_base.py:453-454)
        me = SimpleNamespace(config=SimpleNamespace(trainer=SimpleNamespace(critic_warmup=warmup)), global_steps=step)
        if bool(eval(code, {}, {"self": me})) == when:  # noqa: S307 - verl's own condition, parsed from its file
            out.append(step)
    return out


@pytest.mark.slow
@pytest.mark.verl
def test_verl_builds_no_critic_for_grpo_and_still_holds_the_actor_back():
    import warnings
    from pathlib import Path as P

    import verl
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert need_critic(OmegaConf.create({"critic": {"enable": None}, "algorithm": {"adv_estimator": "grpo"}})) is False
    assert need_critic(OmegaConf.create({"critic": {"enable": None}, "algorithm": {"adv_estimator": "gae"}})) is True
    root = P(verl.__file__).parent
    assert "self.global_steps += 1" in (root / TRAINERS[0]).read_text(encoding="utf-8").split("# we start from step 1")[1][:80]
    for rel in TRAINERS:
        guards = _actor_guards(root / rel)
        assert guards, rel
        for test, when in guards:
            assert "use_critic" not in ast.unparse(test)  # the guard does not ask whether a critic exists
            assert _trained_steps(test, when, 10, 32) == list(range(10, 33))
            assert _trained_steps(test, when, 40, 32) == []  # warmup past the run: the actor never trains
            assert _trained_steps(test, when, 1, 32) == _trained_steps(test, when, 0, 32) == list(range(1, 33))
    # the rule names what verl's guard skips
    [hit] = _hits("VI782", [*GRPO, "trainer.critic_warmup=10"])
    lost = [s for s in range(1, 33) if s not in _trained_steps(*_actor_guards(root / TRAINERS[0])[0], 10, 32)]
    assert f"steps {lost[0]}-{lost[-1]}" in hit.problem.message


def test_check_warns_on_warmup_without_a_critic():
    [hit] = _hits("VI782", [*GRPO, "trainer.critic_warmup=10"])
    assert hit.problem.severity == "warning" and "steps 1-9" in hit.problem.message
    assert hit.fix.set == {"trainer.critic_warmup": 0}
    [never] = _hits("VI782", [*GRPO, "trainer.critic_warmup=10", "trainer.total_training_steps=5"])
    assert never.problem.severity == "error" and "never trains" in never.problem.message
    # VI841 still lists the critic.* keys, VI782 the warmup: one finding each, no duplicate
    both = check(None, [*GRPO, "trainer.critic_warmup=10", "critic.optim.lr=1e-5"]).findings
    assert {f.problem.rule for f in both} >= {"VI782", "VI841"}
    assert not any("trainer.critic_warmup" in f.problem.keys for f in both if f.problem.rule == "VI841")


@pytest.mark.parametrize("overrides", [
    [*GRPO, "trainer.critic_warmup=0"],
    [*GRPO, "trainer.critic_warmup=1"],  # step 1 already trains (1 <= global_steps)
    [*PPO, "trainer.critic_warmup=10"],  # a critic to warm up: the intended use
    [*GRPO, "critic.enable=True", "trainer.critic_warmup=10"],  # VI841's case (critic unused), the warmup is real
])
def test_check_is_silent_on_a_warmup_with_a_critic_or_none(overrides):
    assert not _hits("VI782", overrides)


# ---------------------------------------------------------------- VI783: per-token discount

def _terminal(length: int):
    import torch

    rewards = torch.zeros(1, length)
    rewards[0, -1] = 1.0
    return rewards, torch.ones(1, length)


@pytest.mark.verl
@pytest.mark.parametrize("gamma,lam,length", [(0.99, 0.95, 512), (1.0, 0.95, 256), (0.99, 1.0, 700), (1.0, 1.0, 2048)])
def test_verls_gae_scales_the_first_token_as_the_rule_computes(gamma, lam, length):
    import torch
    from verl.trainer.ppo.core_algos import compute_gae_advantage_return, compute_reinforce_plus_plus_outcome_advantage

    rewards, mask = _terminal(length)
    ret, gae = first_token_factors(gamma, lam, length)
    # an untrained critic (values 0): the return (value target) at token 0 is the raw advantage, (gamma*lam)^(L-1)
    _, returns = compute_gae_advantage_return(rewards, torch.zeros(1, length), mask, gamma, lam)
    assert float(returns[0, 0]) == pytest.approx(gae, rel=1e-3, abs=1e-30)
    # a converged critic (V_t = gamma^(L-1-t)): its target at token 0 is gamma^(L-1)
    exact = torch.tensor([[gamma ** (length - 1 - t) for t in range(length)]])
    _, returns = compute_gae_advantage_return(rewards, exact, mask, gamma, lam)
    assert float(returns[0, 0]) == pytest.approx(ret, rel=1e-3, abs=1e-30)
    _, rpp = compute_reinforce_plus_plus_outcome_advantage(rewards, mask, config=SimpleNamespace(gamma=gamma))
    assert float(rpp[0, 0]) == pytest.approx(ret, rel=1e-3, abs=1e-30)


def test_check_warns_when_the_reward_fades_before_the_first_token():
    [hit] = _hits("VI783", [*PPO, "algorithm.gamma=0.99", "algorithm.lam=0.95", "data.max_response_length=4096"])
    assert hit.problem.severity == "warning"
    assert "0.99·0.95" in hit.problem.message and "4095" in hit.problem.message
    assert f"{first_token_factors(0.99, 0.95, 4096)[1]:.2g}" in hit.problem.message
    assert "gamma=1.0" in hit.problem.hint and "lam=1.0" in hit.problem.hint
    # at gamma 0.99 no lam can keep FADED over 4095 tokens (0.99^4095 alone is 1e-18): the hint says to raise gamma
    assert "raise gamma too" in hit.problem.hint
    # where some lam can, the bound the hint gives keeps the factor at FADED with the run's own gamma, and less does not
    [near] = _hits("VI783", [*PPO, "algorithm.gamma=0.9999", "algorithm.lam=0.9", "data.max_response_length=4096"])
    lam = float(re.search(r"lam ≥ ([0-9.]+)", near.problem.hint).group(1))
    assert first_token_factors(0.9999, lam + 1e-4, 4096)[1] >= FADED
    assert first_token_factors(0.9999, lam - 1e-3, 4096)[1] < FADED
    [rpp] = _hits("VI783", [*GRPO, "algorithm.adv_estimator=reinforce_plus_plus", "algorithm.gamma=0.99",
                            "data.max_response_length=1024"])
    assert "REINFORCE++" in rpp.problem.message


@pytest.mark.parametrize("overrides", [
    [*PPO, "data.max_response_length=4096"],  # verl's defaults, 1.0 and 1.0
    [*PPO, "algorithm.gamma=0.999", "data.max_response_length=1024"],  # 0.999^1023 = 0.36
    [*PPO, "algorithm.lam=0.99", "data.max_response_length=256"],  # 0.99^255 = 0.077
    [*GRPO, "algorithm.gamma=0.99", "data.max_response_length=4096"],  # grpo reads no gamma
])
def test_check_is_silent_where_the_reward_reaches_the_start(overrides):
    assert not _hits("VI783", overrides)


# ---------------------------------------------------------------- VI784: critic vocabulary

def _tokenizer(folder: Path, words: list[str], special: list[str]) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<unk>", *words])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", additional_special_tokens=special)
    fast.save_pretrained(str(folder))


def _model(folder: Path, vocab: int, words: list[str] | None = None, special: tuple[str, ...] = ()) -> Path:
    """A model folder: a Llama config.json of `vocab` rows, and a tokenizer of `words` (+ special tokens) if given."""
    from transformers import LlamaConfig

    folder.mkdir(parents=True, exist_ok=True)
    LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                num_key_value_heads=2, architectures=["LlamaForCausalLM"]).save_pretrained(str(folder))
    if words is not None:
        _tokenizer(folder, words, list(special))
    return folder


WORDS = [f"w{i}" for i in range(60)]
CHAT = ("<|im_start|>", "<|im_end|>")


@pytest.fixture()
def actor(tmp_path: Path) -> Path:
    return _model(tmp_path / "actor", 64, WORDS, CHAT)  # 61 words + 2 chat tokens: ids 0-62, the chat ones last


def _ppo(actor: Path, critic: Path, *extra: str) -> list[str]:
    return ["algorithm.adv_estimator=gae", f"critic.model.path={critic}", *BASE[1:], f"actor_rollout_ref.model.path={actor}",
            *extra]


@pytest.mark.verl
def test_verl_feeds_the_actor_ids_to_the_critic_and_torch_rejects_those_past_its_table(actor, tmp_path):
    import torch
    import verl
    from transformers import AutoModelForTokenClassification, AutoTokenizer, LlamaConfig

    root = Path(verl.__file__).parent  # read, not imported: the trainers import the rollout servers' dependencies
    for rel in ("trainer/ppo/v1/trainer_base.py", "trainer/ppo/ray_trainer.py"):
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
        [fn] = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_compute_values"]
        src = ast.unparse(fn)
        assert "critic_wg.infer_batch(batch" in src and "tokeniz" not in src  # the batch as the actor wrote it
    tok = AutoTokenizer.from_pretrained(str(actor))
    ids = tok("<|im_start|> w1 w2 <|im_end|>")["input_ids"]
    assert max(ids) == len(tok) - 1 == 62
    # verl's critic: AutoModelForTokenClassification with num_labels=1 (utils/model.py:641-656, transformer_impl.py:293)
    for vocab, fails in ((50, True), (len(tok), False)):
        config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=4, num_key_value_heads=2, num_labels=1)
        critic = AutoModelForTokenClassification.from_config(config)
        batch = torch.tensor([ids])
        if fails:
            with pytest.raises(IndexError):
                critic(input_ids=batch)
        else:
            assert critic(input_ids=batch).logits.shape == (1, len(ids), 1)
    # the rule says the same of a critic of 50 rows
    [hit] = _hits("VI784", _ppo(actor, _model(tmp_path / "small", 50)))
    assert hit.problem.severity == "error" and "63 ids" in hit.problem.message and "<|im_end|>=62" in hit.problem.message


def test_check_errors_on_a_critic_vocabulary_below_the_actor_ids(actor, tmp_path):
    [hit] = _hits("VI784", _ppo(actor, _model(tmp_path / "rm", 50)))
    assert hit.problem.severity == "error" and hit.problem.keys[0] == "critic.model.path"
    assert "vocabulary of 50" in hit.problem.message and "13 of them" in hit.problem.message
    assert f"critic.model.path={actor}" in hit.problem.hint


def test_check_warns_on_the_same_size_with_other_tokens(actor, tmp_path):
    other = _model(tmp_path / "other", 64, list(reversed(WORDS)), CHAT)
    [hit] = _hits("VI784", _ppo(actor, other))
    assert hit.problem.severity == "warning" and "60 of the actor's 63 ids" in hit.problem.message


@pytest.mark.slow
def test_check_is_silent_where_the_critic_reads_the_actor_ids(actor, tmp_path):
    import shutil

    assert not _hits("VI784", _ppo(actor, actor))  # the usual PPO: critic from the policy
    twin = tmp_path / "twin"
    shutil.copytree(actor, twin)
    assert not _hits("VI784", _ppo(actor, twin))  # another folder, the same tokenizer
    assert not _hits("VI784", _ppo(actor, _model(tmp_path / "bigger", 128)))  # no tokenizer to compare: covered
    bigger = _model(tmp_path / "bigger2", 128, WORDS, (*CHAT, "<extra>"))  # one more token: the actor's ids agree
    assert json.loads((bigger / "config.json").read_text())["vocab_size"] == 128
    assert not _hits("VI784", _ppo(actor, bigger))
    assert not _hits("VI784", _ppo(actor, _model(tmp_path / "rm", 50), "critic.enable=False",
                                   "algorithm.adv_estimator=grpo"))  # no critic is built
