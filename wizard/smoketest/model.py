"""The smoke run's policy: a tiny causal LM of the bundle model's own architecture, built locally.

No download ever happens. The architecture comes from the bundle's model (a local folder's
config.json, the shipped catalogue, or a generic shape for a bare size: Qwen2-like, or Qwen3-MoE-like
when the name states an active size); the dimensions are shrunk to a few layers and a small hidden size. The
tokenizer is the model's own when it is on this machine (a local folder, or the Hugging Face cache), else a
byte-level BPE tokenizer trained on the bundle's own rows (it round-trips every character, so scorers see
exactly what was sampled).

A randomly initialised model never writes a correct answer, and a reward that is always 0 would
hide every reward bug. So the policy is first fitted for a few seconds on the rows it will be
asked: for each prompt, one response giving the ground truth and one giving a wrong answer, both
in the format the prompt asks for (`#### 7`, `\\boxed{7}`, `Answer: 7`). Sampling then yields
right and wrong answers, and the real scorer (never bypassed) is what tells them apart.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Shrunk dimensions: small enough that a full rollout/update cycle takes a second on one CPU core.
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, head_dim=16)
# For a real main_ppo step on a GPU (the prepared `--engine verl` run): head_dim 64, which every attention kernel
# of the rollout engines supports; still a few million parameters.
TINY_GPU = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, head_dim=64)
# model_type -> extra config for the shrunk model (mixture-of-experts keeps a few small experts)
_ARCH_EXTRA: dict[str, dict[str, Any]] = {
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, decoder_sparse_step=1,
                      mlp_only_layers=[]),
    "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64),
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
}
_FALLBACK_ARCH = "llama"


@dataclass
class TinyModelInfo:
    """What stands in for the bundle's model, and why."""

    path: str
    arch: str
    arch_source: str
    model_class: str = ""
    parameters: int = 0
    tokenizer: str = ""  # where the tokenizer came from
    vocab: int = 0
    warmup: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ---------------------------------------------------------------------------------------------
# architecture


def model_arch(model_path: str, answers_model: Optional[str] = None, params_b: Optional[float] = None) -> tuple[str, str]:
    """(transformers model_type, where it was read) for the bundle's model; never downloads."""
    local = os.path.expanduser(model_path)
    if os.path.isfile(os.path.join(local, "config.json")):
        import json

        try:
            with open(os.path.join(local, "config.json"), encoding="utf-8") as fh:
                model_type = json.load(fh).get("model_type")
            if model_type:
                return str(model_type), f"config.json of {model_path}"
        except (OSError, ValueError):
            pass
    from wizard.planner.shapes import resolve_shape

    name = answers_model or model_path
    try:
        shape = resolve_shape(name, params_b)
    except Exception:  # noqa: BLE001 - a shape we cannot read is not the smoke run's failure
        shape = None
    if shape is not None:
        where = {"catalogue": f"verl-init's catalogue entry for {shape.name}", "local": f"config.json of {name}",
                 "answer": f"a generic {shape.arch} shape for model_params_b",
                 "name": f"a generic {shape.arch} shape for the sizes in its name"}
        return shape.arch, where.get(shape.source, shape.source)
    return _FALLBACK_ARCH, f"{name!r} is neither local nor in the catalogue: a {_FALLBACK_ARCH} stand-in"


def tiny_config(arch: str, tokenizer: Any, *, kv_heads: int = 2, tied: bool = True, max_positions: int = 4096,
                dims: Optional[dict[str, int]] = None) -> Any:
    """A shrunk transformers config of architecture `arch` (falls back to llama if transformers lacks it)."""
    from transformers import AutoConfig

    vocab = len(tokenizer)
    kw: dict[str, Any] = dict(dims or TINY, vocab_size=vocab, num_key_value_heads=kv_heads, max_position_embeddings=max_positions,
                              tie_word_embeddings=tied, eos_token_id=tokenizer.eos_token_id,
                              pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id)
    kw.update(_ARCH_EXTRA.get(arch, {}))
    try:
        return AutoConfig.for_model(arch, **kw)
    except (ValueError, KeyError):
        kw = {k: v for k, v in kw.items() if k not in _ARCH_EXTRA.get(arch, {})}
        return AutoConfig.for_model(_FALLBACK_ARCH, **kw)


# ---------------------------------------------------------------------------------------------
# tokenizer


def _has_tokenizer_files(folder: str) -> bool:
    return any(os.path.isfile(os.path.join(folder, f)) for f in ("tokenizer.json", "tokenizer_config.json",
                                                                    "tokenizer.model", "vocab.json"))


def find_local_tokenizer(model_path: str) -> tuple[Any, str]:
    """The model's own tokenizer if it is on this machine: (tokenizer, description) or (None, reason)."""
    from transformers import AutoTokenizer

    local = os.path.expanduser(model_path)
    if os.path.isdir(local):
        if not _has_tokenizer_files(local):
            return None, f"{model_path} has no tokenizer files"
        try:
            return AutoTokenizer.from_pretrained(local), f"the model's own tokenizer ({model_path})"
        except Exception as exc:  # noqa: BLE001
            return None, f"{model_path}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    if local.startswith(("/", ".", "~")):
        return None, f"{model_path} does not exist here"
    try:  # a hub id: only the local Hugging Face cache, never the network
        return (AutoTokenizer.from_pretrained(model_path, local_files_only=True),
                f"the model's own tokenizer ({model_path}, from the local Hugging Face cache)")
    except Exception:  # noqa: BLE001
        return None, f"{model_path} is not in the local Hugging Face cache"


def build_bpe_tokenizer(texts: Sequence[str], out: str | os.PathLike[str], vocab_size: int = 1024) -> Any:
    """A byte-level BPE tokenizer trained on `texts` (lossless: decode(encode(s)) == s), with chat markers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(texts) + ["system user assistant tool\n", "#### \\boxed{} Answer: 0123456789"], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(out))


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """The prompt tokens as verl's agent loop builds them: the chat template with a generation prompt."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return [int(i) for i in ids]


# ---------------------------------------------------------------------------------------------
# answers in the format the prompt asks for


def answer_style(prompt_text: str, fallback: str = "number") -> str:
    """The answer format a prompt asks for: number (`####`), boxed (`\\boxed{}`) or text (`Answer:`)."""
    if "####" in prompt_text:
        return "number"
    if "boxed" in prompt_text:
        return "boxed"
    if re.search(r"answer\s*:", prompt_text, flags=re.IGNORECASE):
        return "text"
    return fallback if fallback in ("number", "boxed", "text") else "number"


def response_text(style: str, answer: str) -> str:
    if style == "boxed":
        return f"\\boxed{{{answer}}}"
    if style == "text":
        return f"Answer: {answer}"
    return f"#### {answer}"


def wrong_answer(truth: str, style: str) -> str:
    """An answer that no sane scorer accepts for `truth`."""
    t = truth.strip()
    if re.fullmatch(r"-?\d+", t.replace(",", "")):
        return str(int(t.replace(",", "")) + 1)
    if style == "text":
        return "none" if t.lower() != "none" else "unknown"
    return "0" if t not in ("0", "0.0") else "1"


# ---------------------------------------------------------------------------------------------
# build + warm-up


def build_tiny_policy(out: str | os.PathLike[str], *, arch: str, arch_source: str, tokenizer: Any,
                      tokenizer_source: str, examples: Sequence[tuple[list[int], str, str]],
                      kv_heads: int = 2, tied: bool = True, max_positions: int = 4096, seed: int = 0,
                      max_steps: int = 200, lr: float = 3e-3, target_loss: float = 0.3,
                      dims: Optional[dict[str, int]] = None) -> TinyModelInfo:
    """Build the tiny policy in `out` (config, weights, tokenizer) and fit it on `examples`.

    `examples`: (prompt token ids, right response text, wrong response text). The fit is a plain
    supervised pass on the response tokens (each prompt once with each response); it stops when
    the loss is near the coin flip's (`target_loss`) or has settled. The model is saved in float32 with its tokenizer."""
    import time

    import torch
    from transformers import AutoModelForCausalLM

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = tiny_config(arch, tokenizer, kv_heads=kv_heads, tied=tied, max_positions=max_positions, dims=dims)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.to(torch.float32)
    info = TinyModelInfo(path=str(out), arch=str(config.model_type), arch_source=arch_source,
                         model_class=type(model).__name__, parameters=sum(p.numel() for p in model.parameters()),
                         tokenizer=tokenizer_source, vocab=len(tokenizer))
    if config.model_type != arch:
        info.arch_source += f"; transformers has no {arch!r}: {config.model_type} stands in"

    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    seqs: list[tuple[list[int], list[int]]] = []
    for ids, right, wrong in examples:
        for text in (right, wrong):
            resp = tokenizer(text, add_special_tokens=False)["input_ids"] + [eos]
            seqs.append((list(ids), [int(t) for t in resp]))
    started = time.perf_counter()
    losses: list[float] = []
    if seqs:
        width = max(len(p) + len(r) for p, r in seqs)
        n = len(seqs)
        inp = torch.full((n, width), pad, dtype=torch.long)
        lab = torch.full((n, width), -100, dtype=torch.long)
        att = torch.zeros((n, width), dtype=torch.long)
        for i, (p, r) in enumerate(seqs):  # left-padded, as prompts are at rollout time
            s = p + r
            inp[i, width - len(s):] = torch.tensor(s)
            att[i, width - len(s):] = 1
            lab[i, width - len(r):] = torch.tensor(r)
        pos = (att.cumsum(-1) - 1).clamp(min=0)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        model.train()
        for _ in range(max_steps):
            loss = model(input_ids=inp, attention_mask=att, position_ids=pos, labels=lab, use_cache=False).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            if losses[-1] <= target_loss or (len(losses) >= 80 and abs(losses[-20] - losses[-1]) < 0.01 * losses[-1]):
                break
    model.eval()
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    info.warmup = {
        "examples": len(seqs), "steps": len(losses), "seconds": round(time.perf_counter() - started, 2),
        "loss_first": round(losses[0], 4) if losses else None, "loss_last": round(losses[-1], 4) if losses else None,
        "why": "a random model never answers correctly; fitted on one right and one wrong answer per prompt "
               "so that sampled rewards vary and the real scorer decides which is which",
    }
    return info
