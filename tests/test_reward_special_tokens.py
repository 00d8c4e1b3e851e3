"""VI911: the custom reward function looks for tags the model's tokenizer marks special (real case verl#1724: <think>,
</think> added as special tokens during SFT; the format reward never sees them and is 0 for every response).

The oracle is verl's own reward path: trainer/ppo/reward.py's load_reward_manager builds the 'naive' manager with the
reward file's function, and its run_single decodes the response ids (skip_special_tokens=True, naive.py:55) and
scores them. With the tags special the function scores 0; with the same tags as ordinary added tokens it scores 1.
verl's registry of reward managers is read to hold check's table of their decode lines to verl's source.
"""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path

import pytest
from conftest import run_cli

from wizard.check.lint import check

M = "actor_rollout_ref.model"
TAGS = ("<think>", "</think>")
RESPONSE = "<think>hi</think>4<|im_end|>"

REWARD = '''\
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if "<think>" in solution_str and "</think>" in solution_str:
        return 1.0 if solution_str.split("</think>")[-1].strip() == ground_truth else 0.5
    return 0.0
'''
# the tags only in a comment and a docstring: the function does not look for them
COMMENT_ONLY = '''\
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """The answer after the reasoning (the model writes <think>...</think> first)."""
    # the tags <think> and </think> are special tokens: verl has removed them already
    return 1.0 if solution_str.strip().endswith(ground_truth) else 0.0
'''
# the eos removed (harmless: without it the text is unchanged) / looked for (never there)
EOS_REMOVED = '''\
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    answer = solution_str.replace("<|im_end|>", "").split("<|im_end|>")[0]
    return 1.0 if answer.strip().endswith(ground_truth) else 0.0
'''
EOS_LOOKED_FOR = '''\
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    finished = solution_str.endswith("<|im_end|>")
    return 1.0 if finished and ground_truth in solution_str else 0.0
'''


def _tokenizer(path: Path, special: bool) -> Path:
    """A byte-level BPE with no merges (every text round-trips), Qwen's <|im_end|> / <|endoftext|> as eos / pad, and
    <think>, </think> added as special tokens (as an SFT run that registered them did) or as ordinary added ones."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import AddedToken, PreTrainedTokenizerFast

    alphabet = ByteLevel.alphabet()
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(alphabet))}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.add_tokens([AddedToken(t, special=special, normalized=False) for t in TAGS], special_tokens=special)
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokenizers")
    return {"special": _tokenizer(root / "special", True), "plain": _tokenizer(root / "plain", False)}


def _file(tmp_path: Path, text: str, name: str = "reward.py") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _verl_score(model: Path, reward: Path, response: str = RESPONSE, ground_truth: str = "4") -> tuple[str, float]:
    """(the text verl's naive reward manager decodes, the score it gets from the reward file's function) for one
    response: verl's own load_reward_manager and run_single."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    tok = AutoTokenizer.from_pretrained(str(model))
    config = OmegaConf.create({"reward": {"custom_reward_function": {"path": str(reward), "name": "compute_score"},
                                          "reward_manager": {"source": "register", "name": "naive"}}})
    manager = load_reward_manager(config, tok)
    prompt = tok("What is 2+2?", return_tensors="pt")["input_ids"]
    ids = tok(response, return_tensors="pt")["input_ids"]
    data = DataProto.from_dict(
        tensors={"prompts": prompt, "responses": ids,
                 "attention_mask": torch.ones(1, prompt.shape[1] + ids.shape[1], dtype=torch.long)},
        non_tensors={"data_source": np.array(["math"], dtype=object),
                     "reward_model": np.array([{"ground_truth": ground_truth}], dtype=object),
                     "extra_info": np.array([{}], dtype=object)})
    out = manager.loop.run_until_complete(manager.run_single(data))
    return tok.decode(ids[0], skip_special_tokens=True), out["reward_score"]


def _vi911(model: Path, reward: Path, *extra: str) -> list:
    report = check(None, [f"{M}.path={model}", f"reward.custom_reward_function.path={reward}",
                          "actor_rollout_ref.rollout.name=vllm", *extra])
    return [f.problem for f in report.findings if f.problem.rule == "VI911"]


@pytest.mark.verl
def test_verl_never_shows_the_function_special_tags_and_check_says_so(tmp_path, models):
    reward = _file(tmp_path, REWARD)
    text, score = _verl_score(models["special"], reward)
    assert text == "hi4" and score == 0.0  # the tags (and the eos) are gone: the format reward is 0
    [hit] = _vi911(models["special"], reward)
    # line 3's split("</think>")[-1] is the whole text without the tag: only line 2's tests are named
    assert hit.severity == "warning" and "'<think>' (line 2)" in hit.message and "'</think>' (line 2)" in hit.message
    assert "skip_special_tokens=True" in hit.message and "reward_manager/naive.py:55" in hit.message
    assert '"special": false' in hit.hint and "<|im_end|>" not in hit.message
    # control: the same tags as ordinary added tokens reach the function, and check has nothing to say
    text, score = _verl_score(models["plain"], reward)
    assert text == "<think>hi</think>4" and score == 1.0
    assert not _vi911(models["plain"], reward)


def test_tags_in_a_comment_or_docstring_are_not_looked_for(tmp_path, models):
    assert not _vi911(models["special"], _file(tmp_path, COMMENT_ONLY))


@pytest.mark.slow
@pytest.mark.verl
def test_the_eos_removed_is_harmless_looked_for_is_reported(tmp_path, models):
    removed, looked_for = _file(tmp_path, EOS_REMOVED, "removed.py"), _file(tmp_path, EOS_LOOKED_FOR, "looked.py")
    assert _verl_score(models["plain"], removed)[1] == 1.0 and not _vi911(models["plain"], removed)
    assert _verl_score(models["plain"], looked_for)[1] == 0.0  # verl's decode removed the eos
    [hit] = _vi911(models["plain"], looked_for)
    assert "'<|im_end|>' (line 2)" in hit.message and "drop the check for '<|im_end|>'" in hit.hint
    assert '"special": false' not in hit.hint


def test_the_tokenizer_read_is_tokenizer_path_when_given(tmp_path, models):
    """verl's reward loop decodes with model.tokenizer_path when it is set (reward_loop.py:121-125)."""
    reward = _file(tmp_path, REWARD)
    assert _vi911(models["plain"], reward, f"{M}.tokenizer_path={models['special']}")
    assert not _vi911(models["special"], reward, f"{M}.tokenizer_path={models['plain']}")


@pytest.mark.slow
def test_each_registered_manager_is_named_and_a_manager_of_ones_own_is_not_judged(tmp_path, models):
    reward = _file(tmp_path, REWARD)
    [hit] = _vi911(models["special"], reward, "reward.reward_manager.name=dapo")
    assert "'dapo' reward manager" in hit.message and "reward_manager/dapo.py:65" in hit.message
    manager = _file(tmp_path, "class MyManager:\n    pass\n", "manager.py")
    assert not _vi911(models["special"], reward, "reward.reward_manager.source=importlib",
                      "reward.reward_manager.name=MyManager", f"reward.reward_manager.module.path={manager}")


@pytest.mark.verl
def test_every_manager_verl_registers_decodes_with_skip_special_tokens():
    """check's table against verl's registry (experimental/reward_loop/reward_manager/): the same names, and at each
    cited line the manager's decode of the response with skip_special_tokens=True."""
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

    from wizard.check.rules.reward_tokens import DECODES

    assert set(REWARD_MANAGER) == set(DECODES)
    for name, where in DECODES.items():
        file, line = where.split(":")
        source = Path(inspect.getsourcefile(REWARD_MANAGER[name]))
        assert source.name == file, (name, source)
        text = source.read_text(encoding="utf-8").splitlines()[int(line) - 1]
        assert "self.tokenizer.decode(valid_response_ids, skip_special_tokens=True)" in text, (name, text)


def test_a_launch_script_through_the_cli(tmp_path, models, cli_env):
    reward = _file(tmp_path, REWARD)
    script = tmp_path / "run.sh"
    script.write_text(textwrap.dedent(f"""\
        #!/usr/bin/env bash
        set -x
        MODEL={models['special']}
        python3 -m verl.trainer.main_ppo \\
            algorithm.adv_estimator=grpo \\
            data.train_batch_size=8 \\
            actor_rollout_ref.model.path=$MODEL \\
            actor_rollout_ref.actor.ppo_mini_batch_size=8 \\
            actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \\
            actor_rollout_ref.rollout.name=vllm \\
            actor_rollout_ref.rollout.n=4 \\
            actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \\
            reward.custom_reward_function.path={reward} \\
            reward.custom_reward_function.name=compute_score \\
            trainer.logger='["console"]' \\
            trainer.n_gpus_per_node=1 \\
            trainer.nnodes=1
        """), encoding="utf-8")
    r = run_cli(["check", str(script), "--json", "--defaults", "snapshot"], env=cli_env, cwd=tmp_path)
    hits = [f for f in json.loads(r.stdout)["findings"] if f["id"] == "VI911"]
    assert len(hits) == 1 and hits[0]["severity"] == "warning" and "'<think>'" in hits[0]["message"], r.stdout
    # the same script on the tokenizer with ordinary tags
    script.write_text(script.read_text(encoding="utf-8").replace(str(models["special"]), str(models["plain"])),
                      encoding="utf-8")
    r = run_cli(["check", str(script), "--json", "--defaults", "snapshot"], env=cli_env, cwd=tmp_path)
    assert not [f for f in json.loads(r.stdout)["findings"] if f["id"] == "VI911"], r.stdout
