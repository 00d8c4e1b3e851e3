"""A tiny causal LM and tokenizer built locally (no hub access): for offline validation of the
steps where verl loads a model's config and tokenizer, and for the CPU smoke run."""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]


def build_tokenizer(path: str | Path) -> None:
    """A word-level tokenizer over digits, letters, common words and chat markers, saved to `path`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [str(i) for i in range(10)] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    words += [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    words += list("+-*/=().,:;?!#$%'\"\n") + ["system", "user", "assistant", "the", "answer", "is", "####"]
    vocab = {tok: i for i, tok in enumerate(SPECIAL + sorted(set(words)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(pattern=t, behavior="isolated") for t in SPECIAL[:3]]
        + [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits(individual_digits=True),
           pre_tokenizers.Punctuation()]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<|endoftext|>",
        bos_token=None, additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(path))


def build_tiny_model(path: str | Path, *, weights: bool = False, max_position_embeddings: int = 4096) -> Path:
    """Qwen2-architecture config (2 layers, hidden 64) + tokenizer in `path`; random weights if asked."""
    from transformers import Qwen2Config

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(str(out)))
    config = Qwen2Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=max_position_embeddings, tie_word_embeddings=True,
        architectures=["Qwen2ForCausalLM"], eos_token_id=2, pad_token_id=0, bos_token_id=None,
    )
    config.save_pretrained(str(out))
    if weights:
        import torch
        from transformers import Qwen2ForCausalLM

        torch.manual_seed(0)
        Qwen2ForCausalLM(config).save_pretrained(str(out))
    return out
