"""Bounded reading of data files: lines of a JSONL file without holding more than one line (itself capped)
in memory, and a count of non-blank lines that stops early. Standard library only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

CHUNK = 1 << 20
MAX_LINE_BYTES = 64 << 20  # a JSONL row longer than this is reported, never held


class LineTooLong(Exception):
    pass


def bounded_lines(fh: BinaryIO, max_line: int = MAX_LINE_BYTES) -> Iterator[bytes | LineTooLong]:
    """The lines of a binary file (without the newline); a line longer than `max_line` bytes yields a
    LineTooLong in its place and is skipped without being kept."""
    buf = bytearray()
    skipping = False
    while True:
        chunk = fh.read(CHUNK)
        if not chunk:
            break
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not skipping:
                    buf += chunk[start:]
                    if len(buf) > max_line:
                        buf.clear()
                        skipping = True
                break
            if skipping or len(buf) + nl - start > max_line:
                yield LineTooLong(f"a line longer than {max_line >> 20} MiB" if max_line >= 1 << 20
                                  else f"a line longer than {max_line} bytes")
                skipping = False
                buf.clear()
            else:
                buf += chunk[start:nl]
                yield bytes(buf)
                buf.clear()
            start = nl + 1
    if skipping:
        yield LineTooLong(f"a line longer than {max_line >> 20} MiB")
    elif buf:
        yield bytes(buf)


def count_rows(fh: BinaryIO, enough: int, max_bytes: int = 256 << 20) -> int | None:
    """Non-blank lines, counting up to `enough`; None when `max_bytes` were read without reaching it
    (a file of few, huge lines: not worth reading whole to count)."""
    rows = 0
    content = False  # the current line has a non-blank byte
    read = 0
    while True:
        chunk = fh.read(CHUNK)
        if not chunk:
            return rows + content
        read += len(chunk)
        for part_index, part in enumerate(chunk.split(b"\n")):
            if part_index:  # a newline ended the previous line
                rows += content
                content = False
                if rows >= enough:
                    return rows
            content = content or bool(part.strip())
        if read >= max_bytes:
            return None


def count_file_rows(path: str, enough: int) -> int | None:
    """Rows of a local data file without reading it whole: parquet from its footer, JSONL (and CSV, less its
    header) by streamed lines up to `enough`; None for other formats or an unreadable file."""
    lower = str(path).lower()
    try:
        if lower.endswith(".parquet"):
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(path).metadata.num_rows)
        if lower.endswith((".jsonl", ".csv")):
            with open(path, "rb") as fh:
                rows = count_rows(fh, enough + 1)
            return None if rows is None else rows - (1 if lower.endswith(".csv") and rows else 0)
    except Exception:  # noqa: BLE001 - unreadable files are validate-dataset's business
        return None
    return None
