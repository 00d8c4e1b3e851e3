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
    """Rows of a local data file without reading it whole: parquet from its footer, a saved `datasets` folder from
    its record batches' lengths, JSONL (and CSV, less its
    header) by streamed lines up to `enough`; None for other formats or an unreadable file."""
    lower = str(path).lower()
    try:
        from wizard._parquet import saved_dataset, saved_num_rows

        if saved_dataset(str(path)):  # a `datasets` folder saved with save_to_disk: its training split
            return saved_num_rows(str(path))
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


# --- user files: bounded in bytes, read only when they are regular files ------------------------------------

MAX_USER_FILE_BYTES = 16 << 20  # an answers file, a verl YAML, an --override file, a tool config
MAX_YAML_NODES = 1_000_000  # values a YAML document holds once its aliases are expanded
MAX_NESTING = 200  # YAML or JSON nested deeper than this is not a config


class UnsafeInput(ValueError):
    """A user file this reader refuses (a special file, too large, an alias bomb, a duplicate key, too deep):
    the message says which and is one line."""


def read_user_file(path: str, max_bytes: int = MAX_USER_FILE_BYTES) -> bytes:
    """The bytes of a regular file, at most `max_bytes` (counted while reading, not taken from st_size).
    A FIFO, a device (/dev/zero) or a socket is refused without blocking: opened non-blocking, then checked."""
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", path)
        if not stat.S_ISREG(mode):
            raise UnsafeInput(f"{path} is not a regular file (a FIFO, device or socket): give a file")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(CHUNK, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise UnsafeInput(f"{path} is larger than {max_bytes >> 20} MiB: not a config file")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check_depth(node: object, limit: int) -> None:
    """YAML nodes nested at most `limit` deep (iterative: a deep document cannot overflow the stack here)."""
    stack = [(node, 0)]
    seen: set[int] = set()
    while stack:
        cur, depth = stack.pop()
        if depth > limit:
            raise UnsafeInput(f"nested too deeply (more than {limit} levels): not a config")
        value = getattr(cur, "value", None)
        if isinstance(value, list) and id(cur) not in seen:
            seen.add(id(cur))
            for item in value:
                for child in (item if isinstance(item, tuple) else (item,)):
                    stack.append((child, depth + 1))


def _expanded_size(node: object, limit: int) -> int:
    """How many values the node graph holds with every alias expanded (aliases share nodes: counted without
    expanding, memoised per node)."""
    sizes: dict[int, int] = {}
    order: list[object] = []
    stack = [node]
    while stack:  # post-order without recursion
        cur = stack.pop()
        if id(cur) in sizes:
            continue
        sizes[id(cur)] = -1
        order.append(cur)
        value = getattr(cur, "value", None)
        if isinstance(value, list):
            for item in value:
                stack.extend(item if isinstance(item, tuple) else (item,))
    for cur in reversed(order):
        value = getattr(cur, "value", None)
        total = 1
        if isinstance(value, list):
            for item in value:
                for child in (item if isinstance(item, tuple) else (item,)):
                    total += max(sizes.get(id(child), 1), 1)
                    if total > limit:
                        raise UnsafeInput(f"its aliases expand to more than {limit} values (a YAML bomb, not a config)")
        sizes[id(cur)] = total
    return sizes[id(node)]


def safe_yaml(text: str, *, max_nodes: int = MAX_YAML_NODES, max_depth: int = MAX_NESTING,
              unique_keys: bool = True) -> object:
    """YAML as yaml.safe_load reads it, bounded before anything is built: the document's nesting, the values its
    aliases expand to, and (unique_keys) no key given twice in one mapping (YAML says keys are unique; PyYAML
    would keep the last silently). Raises UnsafeInput (one line) or yaml.YAMLError."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
            if unique_keys and isinstance(node, yaml.MappingNode):
                seen: dict[object, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        hash(key)
                    except TypeError:
                        continue
                    if key in seen:
                        raise UnsafeInput(f"key {key!r} is given twice (lines {seen[key] + 1} and "
                                          f"{key_node.start_mark.line + 1}): keep one")
                    seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep=deep)

    loader = Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise UnsafeInput("nested too deeply (deeper than Python can read): not a config") from None
        if node is None:
            return None
        _check_depth(node, max_depth)
        _expanded_size(node, max_nodes)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def safe_json(text: str | bytes, *, max_depth: int = MAX_NESTING) -> object:
    """json.loads, with a document nested deeper than `max_depth` (or than Python's stack) refused as UnsafeInput."""
    import json

    try:
        doc = json.loads(text)
    except RecursionError:
        raise UnsafeInput("JSON nested too deeply (deeper than Python can read)") from None
    stack = [(doc, 0)]
    while stack:
        cur, depth = stack.pop()
        if depth > max_depth:
            raise UnsafeInput(f"JSON nested too deeply (more than {max_depth} levels)")
        if isinstance(cur, dict):
            stack.extend((v, depth + 1) for v in cur.values())
        elif isinstance(cur, list):
            stack.extend((v, depth + 1) for v in cur)
    return doc
