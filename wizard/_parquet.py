"""Bounded decoding of parquet files: every row/column reader (validate-dataset, the planner's prompt counter)
reads parquet through `batches()`, which caps the decoded bytes per batch and per value, so a decompression bomb
(a small file of highly compressible strings) is one clean error instead of gigabytes of memory.

How the caps hold while reading, not after:
- before any data page is decoded, the footer's uncompressed sizes are read: a column chunk whose average value
  is over VALUE_BYTES is refused (at least one value of it is), and the batch size of each row group is chosen
  so that its decoded batch stays under BATCH_BYTES (a dictionary-encoded chunk of VALUE_BYTES or more is read a
  row at a time, since one dictionary entry may be the whole chunk and repeat in every row);
- after each batch is decoded (still in Arrow buffers, before any Python object is made) its buffer size and its
  longest value are checked against the same caps.
pyarrow is imported inside the functions (a heavy import).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

BATCH_BYTES = 256 << 20  # decoded bytes of one batch
VALUE_BYTES = 32 << 20  # decoded bytes of one value (a prompt, an answer, an image)


class DecodeCapExceeded(ValueError):
    """A parquet file decodes past a cap; the message names the file, the column and the cap."""


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.0f} MiB"


def _row_group_batch_rows(path: str, md: Any, rg: int, batch_rows: int, columns: Optional[set[str]]) -> int:
    group = md.row_group(rg)
    rows = max(1, group.num_rows)
    per_row = 0.0
    for c in range(group.num_columns):
        chunk = group.column(c)
        name = chunk.path_in_schema.split(".")[0]
        if columns is not None and name not in columns:
            continue
        size = max(0, chunk.total_uncompressed_size)
        if size / rows > VALUE_BYTES:
            raise DecodeCapExceeded(
                f"{path}: column {name!r} decodes to {_mib(size)} in {rows} row(s) of row group {rg}, over the "
                f"{_mib(VALUE_BYTES)} cap per value (a decompression bomb, or values no prompt or answer needs)")
        if chunk.has_dictionary_page and size >= VALUE_BYTES:
            return 1  # one dictionary entry may be the whole chunk, repeated in every row: decode a row at a time
        per_row += size / rows
    if per_row <= 0:
        return batch_rows
    return int(max(1, min(batch_rows, BATCH_BYTES // per_row)))


def _longest_value(column: Any) -> int:
    """The longest string/binary value anywhere in an Arrow array (nested lists and structs included)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = column.type
    if pa.types.is_dictionary(t):
        return _longest_value(column.dictionary)
    if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        if len(column) == 0:
            return 0
        longest = pc.max(pc.binary_length(column)).as_py()
        return int(longest or 0)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _longest_value(column.flatten())
    if pa.types.is_struct(t):
        return max((_longest_value(column.field(i)) for i in range(t.num_fields)), default=0)
    return 0


def check_batch(path: str, batch: Any, sliced: bool = False) -> None:
    """Refuse a decoded batch over the caps before any Python object is made of it (`sliced`: a zero-copy slice of
    a larger batch, measured by the bytes its rows span rather than the whole buffers it shares)."""
    size = batch.nbytes if sliced or not hasattr(batch, "get_total_buffer_size") else batch.get_total_buffer_size()
    if size > BATCH_BYTES:
        raise DecodeCapExceeded(f"{path}: a batch of {batch.num_rows} row(s) decodes to {_mib(size)}, over the "
                                f"{_mib(BATCH_BYTES)} cap per batch (a decompression bomb?)")
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        longest = _longest_value(column)
        if longest > VALUE_BYTES:
            raise DecodeCapExceeded(f"{path}: column {name!r} holds a value of {_mib(longest)}, over the "
                                    f"{_mib(VALUE_BYTES)} cap per value (a decompression bomb?)")


def batches(path: str, batch_rows: int, columns: Optional[list[str]] = None) -> Iterator[Any]:
    """The file's Arrow record batches, each within BATCH_BYTES and every value within VALUE_BYTES; raises
    DecodeCapExceeded (a ValueError) at the first cap, before decoding past it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())  # gives freed batches back to the OS
    try:
        pf = pq.ParquetFile(path, pre_buffer=False)
        md = pf.metadata
        wanted = set(columns) if columns is not None else None
        plans = [_row_group_batch_rows(path, md, rg, batch_rows, wanted) for rg in range(md.num_row_groups)]
        for rg, rows in enumerate(plans):
            for batch in pf.iter_batches(batch_size=rows, row_groups=[rg], columns=columns, use_threads=False):
                check_batch(path, batch)
                yield batch
    finally:
        pa.set_memory_pool(previous)


def rows(path: str, batch_rows: int = 1024, columns: Optional[list[str]] = None) -> Iterator[dict[str, Any]]:
    """The file's rows as dicts, batch by batch within the caps."""
    for batch in batches(path, batch_rows, columns):
        yield from batch.to_pylist()


# --- a `datasets` folder saved with Dataset.save_to_disk / DatasetDict.save_to_disk -----------------------------
# Layout (datasets' arrow_dataset.py save_to_disk): a Dataset folder holds state.json ("_data_files": the arrow
# files, in order), dataset_info.json and data-0000N-of-0000M.arrow files in Arrow's IPC *stream* format; a
# DatasetDict folder holds dataset_dict.json ({"splits": [...]}) and one such folder per split. Read here with
# pyarrow alone (the `datasets` library need not be installed), memory-mapped, one record batch at a time, each
# batch checked against the caps above before any Python object is made of it.

SAVED_MARKERS = ("state.json", "dataset_info.json")
MAX_META_BYTES = 1 << 20  # state.json / dataset_dict.json are a few hundred bytes


def saved_dataset(path: str) -> bool:
    """A folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""
    import os

    return os.path.isdir(path) and (all(os.path.isfile(os.path.join(path, m)) for m in SAVED_MARKERS)
                                    or os.path.isfile(os.path.join(path, "dataset_dict.json")))


def _meta(path: str) -> Any:
    import json
    import os

    if os.path.getsize(path) > MAX_META_BYTES:
        raise ValueError(f"{path} is larger than {MAX_META_BYTES >> 20} MiB: not a datasets metadata file")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def saved_splits(path: str) -> list[str]:
    """The splits of a DatasetDict folder, in its dataset_dict.json's order ([] for a Dataset folder)."""
    import os

    marker = os.path.join(path, "dataset_dict.json")
    if not os.path.isfile(marker):
        return []
    splits = _meta(marker).get("splits")
    if not isinstance(splits, list) or not all(isinstance(s, str) and s and "/" not in s and ".." not in s
                                               for s in splits):
        raise ValueError(f"{marker}: 'splits' is not a list of split names")
    return splits


def training_split(path: str) -> tuple[str, str]:
    """(the folder of the rows a run trains on, its split name): a Dataset folder itself (split ""), or a
    DatasetDict's "train" split (else its only split; several splits and no "train" is refused, naming them)."""
    import os

    splits = saved_splits(path)
    if not splits:
        return path, ""
    split = "train" if "train" in splits else splits[0] if len(splits) == 1 else None
    if split is None:
        raise ValueError(f"{path} is a DatasetDict with splits {', '.join(splits)} and no 'train': save the "
                         "training split on its own (dataset_dict['<split>'].save_to_disk(...))")
    return os.path.join(path, split), split


def arrow_files(folder: str) -> list[str]:
    """The arrow files of a Dataset folder, as its state.json lists them."""
    import os

    files = _meta(os.path.join(folder, "state.json")).get("_data_files")
    names = [f.get("filename") for f in files] if isinstance(files, list) and all(isinstance(f, dict) for f in files) else None
    if not names or not all(isinstance(n, str) and n and os.path.basename(n) == n for n in names):
        raise ValueError(f"{os.path.join(folder, 'state.json')}: '_data_files' does not name the arrow files")
    return [os.path.join(folder, n) for n in names]


def saved_schema_names(path: str) -> list[str]:
    """The columns of a saved folder's training split (from its first arrow file's schema; no rows read)."""
    import pyarrow as pa

    files = arrow_files(training_split(path)[0])
    with pa.memory_map(files[0]) as source:
        return list(pa.ipc.open_stream(source).schema.names)


def saved_num_rows(path: str) -> int:
    """Rows of a saved folder's training split (the record batches' lengths; memory-mapped, no value decoded)."""
    import pyarrow as pa

    total = 0
    for name in arrow_files(training_split(path)[0]):
        with pa.memory_map(name) as source:
            total += sum(batch.num_rows for batch in pa.ipc.open_stream(source))
    return total


def saved_batches(path: str, batch_rows: int) -> Iterator[Any]:
    """A saved folder's training split as record batches of at most `batch_rows` rows, each within the caps."""
    import pyarrow as pa

    for name in arrow_files(training_split(path)[0]):
        with pa.memory_map(name) as source:
            for stored in pa.ipc.open_stream(source):  # zero-copy: the batch's buffers are the mapped file
                for start in range(0, stored.num_rows, max(1, batch_rows)):
                    batch = stored.slice(start, batch_rows)
                    check_batch(name, batch, sliced=True)
                    yield batch


def any_batches(path: str, batch_rows: int, columns: Optional[list[str]] = None) -> Iterator[Any]:
    """`batches` of a parquet file, or `saved_batches` of a saved `datasets` folder (its columns all read)."""
    if saved_dataset(path):
        for batch in saved_batches(path, batch_rows):
            yield batch if columns is None else batch.select([c for c in columns if c in batch.schema.names])
    else:
        yield from batches(path, batch_rows, columns)
