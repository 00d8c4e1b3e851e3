"""`check` VI641: a parquet data file whose Hugging Face feature metadata the installed `datasets` cannot decode
(real case verl#2723: files written by datasets>=4, whose list columns are typed 'List', read where datasets<4 is
installed: "ValueError: Feature type 'List' not found"). verl 0.9.1 reads a .parquet with
datasets.load_dataset("parquet") (utils/dataset/rl_dataset.py:171-172), which decodes that metadata.

The fault is the class, planted as a feature type the installed datasets lacks (this venv has datasets>=4, so the
real 'List' decodes here). The oracle is verl's own reader, RLHFDataset._read_files_and_tokenize, run on each file:
it raises on the planted file and loads the control, a file the installed datasets wrote itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from test_data_content import _check, row


def _write(path: Path, rows: list[dict], retype: str | None = None) -> Path:
    """rows written by the installed datasets (its own metadata); `retype`: the prompt column's _type replaced."""
    import datasets
    import pyarrow.parquet as pq

    datasets.Dataset.from_list(rows).to_parquet(str(path))
    if retype:
        table = pq.read_table(path)
        meta = dict(table.schema.metadata)
        info = json.loads(meta[b"huggingface"])
        info["info"]["features"]["prompt"]["_type"] = retype
        meta[b"huggingface"] = json.dumps(info).encode()
        pq.write_table(table.replace_schema_metadata(meta), path)
    return path


def _verl_reads(path: Path) -> bool:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    me = SimpleNamespace(data_files=[str(path)], max_samples=-1, shuffle=False, seed=None,
                         maybe_filter_out_long_prompts=lambda frame: frame)
    try:
        RLHFDataset._read_files_and_tokenize(me)
    except ValueError as exc:
        assert "Feature type" in str(exc)
        return False
    return len(me.dataframe) == 3


@pytest.mark.parametrize("retype", ["NotAFeatureTypeYet", "List2"])
def test_vi641_flags_metadata_verls_reader_refuses(tmp_path, retype):
    good = _write(tmp_path / "val.parquet", [row(i) for i in range(3)])
    bad = _write(tmp_path / "train.parquet", [row(i) for i in range(3)], retype=retype)
    assert not _verl_reads(bad) and _verl_reads(good)  # the oracle: verl's own reader
    hits = [f.problem for f in _check(bad, good).findings if f.problem.rule == "VI641"]
    assert len(hits) == 1 and hits[0].keys == ("data.train_files",), [h.message for h in hits]
    assert repr(retype) in hits[0].message and "datasets" in hits[0].message


def test_vi641_stays_clean_on_files_the_installed_datasets_wrote(tmp_path):
    train = _write(tmp_path / "train.parquet", [row(i) for i in range(3)])
    plain = tmp_path / "val.parquet"  # no b"huggingface" metadata at all (pyarrow alone)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([row(i) for i in range(3)]), plain)
    assert _verl_reads(train) and _verl_reads(plain)
    assert "VI641" not in {f.problem.rule for f in _check(train, plain).findings}
