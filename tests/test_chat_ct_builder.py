"""VI450 (rules/chat_ct_builder.py): config.json's model_type picks verl's Continuous Token builder, which needs boundary
tokens the run's tokenizer lacks. The real case (verl PR#7640): a glm4_moe checkpoint whose tokenizer speaks ChatML has
no <|observation|>, and verl 0.9.1's GLM builder raises in every agent loop. The oracle is verl's own
create_continuous_token_builder, called on CPU with the same tokenizer and model_type the check reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wizard.check.lint import check

pytestmark = [pytest.mark.verl]
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def _model(path: Path, model_type: str, extra_tokens: tuple[str, ...] = (), unk: bool = False) -> Path:
    """A byte-level tokenizer (every text round-trips) with ChatML markers, and a tiny config of `model_type`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import AddedToken, AutoConfig, PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(ByteLevel.alphabet()))}
    if unk:
        vocab["<unk>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>" if unk else None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"], **({"unk_token": "<unk>"} if unk else {}))
    fast.add_tokens([AddedToken(t, special=True, normalized=False) for t in extra_tokens])
    fast.chat_template = CHATML
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    cfg_file = path / "tokenizer_config.json"
    cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"  # not the model_type's own class: keep this byte-level vocab
    cfg_file.write_text(json.dumps(cfg), encoding="utf-8")
    AutoConfig.for_model(model_type, vocab_size=len(fast) + 8, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16).save_pretrained(str(path))
    return path


def _findings(tmp_path: Path, model: Path) -> list:
    script = tmp_path / "grpo.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n    " + " \\\n    ".join(
        ["algorithm.adv_estimator=grpo", f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.rollout.n=4",
         "trainer.n_gpus_per_node=8", "trainer.nnodes=1"]) + "\n", encoding="utf-8")
    return [f.problem for f in check(str(script)).findings if f.problem.rule == "VI450"]


def _verl_builds(model: Path, model_type: str) -> str:
    """verl's own verdict: '' when its builder constructs with this tokenizer, else the error it raises."""
    from transformers import AutoTokenizer
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    try:
        create_continuous_token_builder(AutoTokenizer.from_pretrained(str(model)), hf_model_type=model_type)
    except ValueError as exc:
        return str(exc)
    return ""


def test_a_glm_checkpoint_with_a_chatml_tokenizer_is_an_error(tmp_path):
    model = _model(tmp_path / "glm", "glm4_moe")
    assert "required token '<|observation|>'" in _verl_builds(model, "glm4_moe")  # verl's builder refuses it
    hits = _findings(tmp_path, model)
    assert len(hits) == 1 and hits[0].severity == "error", hits
    assert "glm4_moe" in hits[0].message and "'<|observation|>'" in hits[0].message, hits[0].message
    assert "tokenizer_path" in hits[0].hint


def test_the_same_checkpoint_with_the_glm_tokens_stays_clean(tmp_path):
    model = _model(tmp_path / "glm", "glm4_moe", extra_tokens=("<|observation|>", "<|user|>"))
    assert _verl_builds(model, "glm4_moe") == ""  # verl builds its GLM builder with this tokenizer
    assert not _findings(tmp_path, model)


def test_a_qwen_checkpoint_with_its_chatml_tokenizer_stays_clean(tmp_path):
    model = _model(tmp_path / "qwen", "qwen3", extra_tokens=("<|im_end|>",))
    assert _verl_builds(model, "qwen3") == ""
    assert not _findings(tmp_path, model)


def test_an_unk_token_hides_the_missing_one_and_is_a_warning(tmp_path):
    """With an unk token, verl's require_token_id gets the unk id back and builds: turns split at a token never
    written. The class is the same; verl says nothing, so the check warns."""
    model = _model(tmp_path / "glm", "glm4_moe", unk=True)
    assert _verl_builds(model, "glm4_moe") == ""  # verl builds, silently
    hits = _findings(tmp_path, model)
    assert len(hits) == 1 and hits[0].severity == "warning" and "unk id" in hits[0].message, hits
