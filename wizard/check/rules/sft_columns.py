"""VI681 (error): SFT data without the column data.messages_key names (paths under site-packages/verl, 0.9.1).

Without data.custom_cls.path both SFT trainers build verl's MultiTurnSFTDataset (trainer/sft_trainer.py:468-484),
which reads every train and val file with pd.read_parquet and takes `self.dataframe[self.messages_key]`
(utils/dataset/multiturn_sft_dataset.py:144-165; messages_key defaults to 'messages', :103, as
trainer/config/sft_trainer_engine.yaml:26 does). A file without that column raises KeyError on every rank in
_build_dataset, after torchrun has started the ranks and initialised the process group (sft_trainer.py:55-62), with
no word of which key or file (real case R46-03, verl#1934 and verl#600: the gsm8k quickstart's
examples/data_preprocess/gsm8k.py writes the RL format, prompt / reward_model / extra_info, which has no assistant
turn at all; verl's examples/data_preprocess/gsm8k_multiturn_sft.py writes 'messages'). The columns come from each
local parquet file's footer (pyarrow read_schema): nothing is decoded. The test proves the KeyError with verl's own
MultiTurnSFTDataset constructor on CPU (the column lookup comes before any tokenizer call) and shows a messages file
passing it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wizard.check.rules.context import Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER

KEY, CUSTOM = "data.messages_key", "data.custom_cls.path"
FILES = ("data.train_files", "data.val_files")
# columns that hold RL-format rows (examples/data_preprocess/gsm8k.py): a prompt and a scorer, no assistant answer
RL_COLUMNS = {"prompt", "reward_model"}


def parquet_schema(c: Ctx, path: Any) -> Any:
    """The pyarrow schema of a local .parquet data file the config names (its footer only), or None: a placeholder,
    a remote or missing path, another format, or an unreadable footer (files.py's finding, not a column rule's)."""
    if not isinstance(path, str) or PLACEHOLDER in path:
        return None
    local = local_path(c, path)
    if local is None or not local.is_file() or local.suffix != ".parquet":
        return None
    try:
        import pyarrow.parquet as pq

        return pq.read_schema(str(local))
    except Exception:  # noqa: BLE001 - an unreadable footer is files.py's finding, not this rule's
        return None


def _columns(c: Ctx, path: Any) -> list[str] | None:
    schema = parquet_schema(c, path)
    return None if schema is None else list(schema.names)


def _hint(key: str, columns: list[str]) -> str:
    chat = next((col for col in ("messages", "conversations", "conversation", "chat") if col in columns), None)
    if chat:
        return f"set {KEY}={chat}"
    if RL_COLUMNS <= set(columns):
        return ("this is RL-format data (a prompt and a reward_model, no assistant answer): write SFT rows with a "
                "'messages' list of user and assistant turns (verl's examples/data_preprocess/gsm8k_multiturn_sft.py "
                "does for gsm8k)")
    return f"set {KEY} to the column holding the chat messages, or write them under {key!r}"


def sft_data_files(c: Ctx) -> Iterator[tuple[str, Any]]:
    """(files key, path) of every training/validation file an SFT run's MultiTurnSFTDataset reads; none when the
    messages key or a custom dataset class is unknown, or a custom class (data.custom_cls.path) reads the files."""
    if c.unknown(KEY, CUSTOM) or c.v(CUSTOM):
        return
    for files_key in FILES:
        if c.unknown(files_key):
            continue
        value = c.v(files_key)
        for path in [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else []:
            yield files_key, path


def rule_sft_messages_column(c: Ctx, f: Facts) -> None:
    key = c.v(KEY) or "messages"
    for files_key, path in sft_data_files(c):
        columns = _columns(c, path)
        if columns is None or key in columns:
            continue
        shown = ", ".join(repr(col) for col in columns[:12]) + (", ..." if len(columns) > 12 else "")
        c.add("VI681", "error", (files_key, KEY),
              f"{path} has no column {KEY}={key!r} (its columns: {shown}): verl's MultiTurnSFTDataset takes "
              f"dataframe[{key!r}] (utils/dataset/multiturn_sft_dataset.py:165), a KeyError on every rank "
              "after torchrun has started them (trainer/sft_trainer.py:55-62)",
              _hint(key, columns))
        return  # one finding: the same fix serves every file
