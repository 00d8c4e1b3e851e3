"""VI952: the critic's tokenizer folder holds no tokenizer (wizard/check/rules/critic_tokenizer.py).

The oracle is verl 0.9.1's own config path: omega_conf_to_dataclass on verl's generated ppo_trainer.yaml builds the
critic's HFModelConfig, which loads its tokenizer from critic.model.tokenizer_path or else critic.model.path. On a
folder the test writes with a config.json and no tokenizer files that load either raises (transformers < 5) or gives
a tokenizer that encodes nothing (transformers 5); with a tokenizer in the folder (the control) verl's config holds
that tokenizer. Real case: verl PR#301 ("the worker will fail if the critic model path doesn't contain a tokenizer").
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from wizard.check.lint import check

A, R, M = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.model"


def _config(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForTokenClassification"], "model_type": "qwen2", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        "vocab_size": 3, "max_position_embeddings": 256, "num_labels": 1}), encoding="utf-8")


def _with_tokenizer(folder: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    _config(folder)
    tok = Tokenizer(models.WordLevel({"<unk>": 0, "a": 1, "b": 2}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<unk>",
                            eos_token="<unk>").save_pretrained(str(folder))
    return folder


def _without_tokenizer(folder: Path) -> Path:
    _config(folder)
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def _verls_critic_tokenizer(actor: Path, critic: Path, tokenizer_path: Path | None = None) -> Any:
    """The tokenizer verl's own CriticConfig holds for these folders (or the exception building it raises)."""
    import yaml
    from omegaconf import OmegaConf

    from verl.utils.config import omega_conf_to_dataclass

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    root = Path(list(spec.submodule_search_locations)[0])
    full = OmegaConf.create(yaml.safe_load((root / "trainer/config/_generated_ppo_trainer.yaml")
                                           .read_text(encoding="utf-8")))
    assert full.critic.model.tokenizer_path is None  # verl's default: the critic's own path
    full.actor_rollout_ref.model.path = str(actor)
    full.critic.model.path = str(critic)
    if tokenizer_path is not None:
        full.critic.model.tokenizer_path = str(tokenizer_path)
    full.critic.ppo_micro_batch_size_per_gpu = 4
    full.algorithm.adv_estimator = "gae"
    try:
        return omega_conf_to_dataclass(full.critic).model.tokenizer
    except Exception as exc:  # noqa: BLE001 - transformers < 5 raises here (PR#301)
        return exc


@pytest.mark.verl
def test_verl_loads_no_usable_tokenizer_from_a_critic_folder_without_one(tmp_path):
    actor = _with_tokenizer(tmp_path / "actor")
    broken = _verls_critic_tokenizer(actor, _without_tokenizer(tmp_path / "rm"))
    assert isinstance(broken, Exception) or (len(broken) <= 1 and broken("a b").input_ids == [])
    fixed = _verls_critic_tokenizer(actor, tmp_path / "rm", tokenizer_path=actor)  # the hint's fix
    assert len(fixed) == 3 and fixed("a b").input_ids == [1, 2]
    good = _verls_critic_tokenizer(actor, _with_tokenizer(tmp_path / "critic"))  # control
    assert len(good) == 3 and good("a b").input_ids == [1, 2]


def _hits(tmp_path: Path, critic: Path | str, extra: tuple[str, ...] = ()) -> list[Any]:
    overrides = [f"{M}.path=Qwen/Qwen2.5-1.5B-Instruct", f"{R}.name=vllm", "trainer.logger=[console]",
                 "algorithm.adv_estimator=gae", "data.train_batch_size=256", f"{A}.ppo_mini_batch_size=64",
                 f"{A}.ppo_micro_batch_size_per_gpu=4", "critic.ppo_micro_batch_size_per_gpu=4",
                 "trainer.nnodes=1", "trainer.n_gpus_per_node=8", f"critic.model.path={critic}", *extra]
    return [f for f in check(None, overrides, defaults="snapshot").findings if f.problem.rule == "VI952"]


def test_a_critic_checkpoint_without_tokenizer_is_flagged_with_the_actors_tokenizer_as_fix(tmp_path):
    folder = _without_tokenizer(tmp_path / "rm")
    [hit] = _hits(tmp_path, folder)
    assert hit.problem.severity == "warning" and str(folder) in hit.problem.message
    assert "critic.model.tokenizer_path is unset" in hit.problem.message
    assert "critic.model.tokenizer_path to the actor's tokenizer (Qwen/Qwen2.5-1.5B-Instruct)" in hit.problem.hint


def test_a_tokenizer_path_without_tokenizer_is_flagged_too(tmp_path):
    critic = _with_tokenizer(tmp_path / "critic")
    [hit] = _hits(tmp_path, critic, (f"critic.model.tokenizer_path={_without_tokenizer(tmp_path / 'empty')}",))
    assert hit.problem.keys[0] == "critic.model.tokenizer_path"


def test_controls_stay_clean(tmp_path):
    assert not _hits(tmp_path, _with_tokenizer(tmp_path / "critic"))  # a folder with its tokenizer
    rm = _without_tokenizer(tmp_path / "rm")
    assert not _hits(tmp_path, rm, (f"critic.model.tokenizer_path={_with_tokenizer(tmp_path / 'tok')}",))
    assert not _hits(tmp_path, "some-org/some-critic-not-on-this-machine")  # nothing to read here
    assert not _hits(tmp_path, rm, ("algorithm.adv_estimator=grpo", f"{R}.n=4"))  # no critic is built
