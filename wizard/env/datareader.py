"""Reading data files for `validate-dataset` (wizard.env.datasets): row batches, the parquet schema, value
helpers (type names, short reprs, image signatures, prompt hashes) and the per-row hash store."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any, Optional

MAX_JSON_BYTES = 64 << 20
HIST_CAP = 1 << 20  # prompt lengths counted exactly up to here (a histogram of at most 8 MiB)
BUCKET_BITS = 6  # duplicate detection works on 1/64 of the hash values at a time


def _iter_batches(path: str, batch_rows: int) -> Iterator[tuple[list[Optional[dict[str, Any]]], list[tuple[int, str]]]]:
    """(rows, unreadable (index in batch, why)) batches; an unreadable row is None in rows.
    Parquet via pyarrow iter_batches, jsonl line by line."""
    lower = path.lower()
    if lower.endswith(".parquet") or os.path.isdir(path):  # a parquet file, or a save_to_disk folder's arrow files
        from wizard._parquet import any_batches

        # the decoded bytes are capped per batch and per value (a decompression bomb is one clean error)
        for batch in any_batches(path, batch_rows):
            yield batch.to_pylist(), []
    elif lower.endswith(".jsonl"):
        from wizard._io import LineTooLong, bounded_lines

        rows: list[Optional[dict[str, Any]]] = []
        bad: list[tuple[int, str]] = []
        with open(path, "rb") as fh:  # line by line, each line capped: a file without newlines is never held
            for line in bounded_lines(fh):
                if isinstance(line, LineTooLong):
                    bad.append((len(rows), str(line)))
                    rows.append(None)
                    continue
                if not line.strip():
                    continue
                try:
                    value = json.loads(line.decode("utf-8"))
                except ValueError as exc:
                    bad.append((len(rows), f"not valid JSON ({str(exc)[:200]})"))
                    value = None
                else:
                    if not isinstance(value, dict):
                        bad.append((len(rows), f"a JSON {type(value).__name__}, not an object"))
                        value = None
                rows.append(value)
                if len(rows) >= batch_rows:
                    yield rows, bad
                    rows, bad = [], []
        if rows or bad:
            yield rows, bad
    else:  # .json: one array (datasets' json loader also takes {"data": [...]}-style objects)
        size = os.path.getsize(path)
        if size > MAX_JSON_BYTES:
            raise ValueError(f"a .json file of {size >> 20} MiB is parsed whole; above {MAX_JSON_BYTES >> 20} MiB "
                             "write it as .jsonl or .parquet, which are read row by row")
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        if isinstance(doc, dict):
            lists = [v for v in doc.values() if isinstance(v, list)]
            doc = lists[0] if len(lists) == 1 else [doc]
        for start in range(0, len(doc), batch_rows):
            chunk = doc[start:start + batch_rows]
            yield ([r if isinstance(r, dict) else None for r in chunk],
                   [(i, f"a JSON {type(r).__name__}, not an object") for i, r in enumerate(chunk)
                    if not isinstance(r, dict)])


def _schema(path: str) -> Optional[dict[str, str]]:
    """Column -> type for parquet (from the footer, no data read) and a save_to_disk folder (its arrow schema);
    None for JSON (learned per row)."""
    if os.path.isdir(path):
        import pyarrow as pa

        from wizard._parquet import arrow_files, training_split

        with pa.memory_map(arrow_files(training_split(path)[0])[0]) as source:
            schema = pa.ipc.open_stream(source).schema
        return {name: str(schema.field(name).type) for name in schema.names}
    if path.lower().endswith(".parquet"):
        import pyarrow.parquet as pq

        schema = pq.ParquetFile(path).schema_arrow
        return {name: str(schema.field(name).type) for name in schema.names}
    return None


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        inner = {_type_name(v) for v in value[:3]}
        return f"list[{'|'.join(sorted(inner))}]" if inner else "list"
    if isinstance(value, dict):
        return "struct"
    return {str: "string", int: "int", float: "float", bool: "bool", type(None): "null"}.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM", b"II*\x00", b"MM\x00*")


def _image_problem(image: Any) -> Optional[str]:
    """Why one image entry is unusable by verl (None: usable): {"bytes": ...} that decodes (PIL, when installed;
    else a known image signature), or a non-empty path ({"path": ...} or a string)."""
    if isinstance(image, dict):
        data, path = image.get("bytes"), image.get("path")
    else:
        data, path = None, image
    if isinstance(data, (bytes, bytearray)) and data:
        try:
            from PIL import Image
        except ImportError:
            ok = bytes(data[:12]).startswith(IMAGE_MAGIC) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP")
            return None if ok else "has bytes with no known image signature"
        import io

        try:
            with Image.open(io.BytesIO(bytes(data))) as im:
                im.verify()
        except Exception as exc:  # noqa: BLE001 - PIL raises many kinds for bad data
            return f"does not decode ({type(exc).__name__})"
        return None
    if isinstance(path, str) and path.strip():
        return None
    return "is neither {bytes} nor a path"


def _is_chat(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m and "content" in m for m in value)


def _hash(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class _HashStore:
    """One uint64 per row in fixed blocks (each a separate allocation the OS gets back when freed): 8 bytes a
    row while reading, with no copy of the whole column ever made."""

    BLOCK = 1 << 20

    def __init__(self) -> None:
        self._blocks: list[Any] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def extend(self, values: Any) -> None:
        import numpy as np

        i = 0
        while i < len(values):
            at = self._n % self.BLOCK
            if at == 0:
                self._blocks.append(np.empty(self.BLOCK, dtype=np.uint64))
            take = min(self.BLOCK - at, len(values) - i)
            self._blocks[-1][at:at + take] = values[i:i + take]
            self._n += take
            i += take

    def blocks(self) -> Iterator[tuple[int, Any]]:
        """(first row, that block's filled part)."""
        for k, block in enumerate(self._blocks):
            start = k * self.BLOCK
            yield start, block[:max(0, min(self.BLOCK, self._n - start))]

    def take(self, rows: Any) -> Any:
        import numpy as np

        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(len(rows), dtype=np.uint64)
        which = rows // self.BLOCK
        for k in np.unique(which).tolist():
            sel = which == k
            out[sel] = self._blocks[k][rows[sel] % self.BLOCK]
        return out
