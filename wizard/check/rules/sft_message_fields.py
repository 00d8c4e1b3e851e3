"""VI739 (warning): SFT messages that carry a per-message loss-mask field verl 0.9.1 never reads (paths under
site-packages/verl).

Without data.custom_cls.path both SFT trainers build verl's MultiTurnSFTDataset (trainer/sft_trainer.py:468-484). Its
_process_single_message sets each message's loss mask from the role alone: ones for an assistant message (less the
generation prompt), zeros for every other role (utils/dataset/multiturn_sft_dataset.py:234-240); no other message key
takes part. A message field meant to switch a turn's loss off (`loss_mask: 0`, `trainable: false`, the forms verl
PR#5472 proposed, open and unmerged) is therefore dropped without a word, and every assistant turn is trained,
those the user meant to mask included (real case R88-01, verl#5316: agent trajectories whose wrong intermediate steps
were to be left out). The field names come from the local parquet's footer (pyarrow read_schema: the struct fields of
the data.messages_key list column), nothing is decoded. Which message keys verl reads, and which the loss mask comes
from, is wizard/check/data/verl_sft_message_keys.json, written from verl's source by scripts/verl_sft_message_keys.py
(ast; tests regenerate and compare): ('content', 'role') read, the loss mask from 'role' alone. The test proves the loss mask with verl's own
MultiTurnSFTDataset on a tiny local tokenizer (a `loss_mask: 0` assistant turn is still trained) and shows a plain
messages file staying clean.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from wizard.check.rules.context import Ctx, Facts
from wizard.check.rules.sft_columns import KEY, parquet_schema, sft_data_files

# per-message fields that mean "train on this turn or not" in other trainers' formats (and verl PR#5472's two
# spellings); MultiTurnSFTDataset reads none of them (multiturn_sft_dataset.py:234-240 uses message["role"] only)
MASK_FIELDS = ("loss_mask", "trainable", "train", "loss_weight", "weight", "mask", "loss")


@lru_cache(maxsize=1)
def verl_message_keys() -> frozenset[str]:
    """The message keys verl's MultiTurnSFTDataset reads (scripts/verl_sft_message_keys.py)."""
    text = resources.files("wizard.check").joinpath("data/verl_sft_message_keys.json").read_text(encoding="utf-8")
    return frozenset(json.loads(text)["read"])


def _message_fields(c: Ctx, path: Any, key: str) -> list[str] | None:
    schema = parquet_schema(c, path)
    if schema is None or key not in schema.names:
        return None  # no local parquet footer, or VI681's finding
    import pyarrow as pa

    kind = schema.field(key).type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not pa.types.is_struct(kind.value_type):
        return None
    return [kind.value_type.field(i).name for i in range(kind.value_type.num_fields)]


def rule_sft_message_mask_fields(c: Ctx, f: Facts) -> None:
    key = c.v(KEY) or "messages"
    for files_key, path in sft_data_files(c):  # none with a custom dataset class: it builds its own loss mask
        fields = _message_fields(c, path, key)
        found = [n for n in fields or () if n.lower() in MASK_FIELDS and n not in verl_message_keys()]
        if not found:
            continue
        c.add("VI739", "warning", (files_key, KEY),
              f"{path}: the messages in {KEY}={key!r} carry {', '.join(repr(n) for n in found)}, which verl's "
              "MultiTurnSFTDataset never reads: it trains every assistant message and masks every other role "
              "(utils/dataset/multiturn_sft_dataset.py:234-240), so the turns you marked as not-to-train are "
              "learned anyway",
              "drop the turns to skip from the data (or split each conversation at them), or set "
              "data.custom_cls.path/name to a dataset subclass that honours the field")
        return  # one finding: the same fix serves every file
