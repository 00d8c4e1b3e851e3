"""VI641: a parquet data file whose Hugging Face feature metadata the installed `datasets` cannot decode.

verl 0.9.1 reads a .parquet data file with `datasets.load_dataset("parquet", data_files=...)`
(utils/dataset/rl_dataset.py:171-172; the SFT trainer's MultiTurnSFTDataset uses pandas.read_parquet instead,
multiturn_sft_dataset.py:147, which does not decode this metadata: a PPO-family rule), and the `datasets`
parquet builder turns the file's schema metadata (the b"huggingface" key every `Dataset.to_parquet` writes) into
`Features` with `Features.from_arrow_schema` -> `generate_from_dict` (datasets/packaged_modules/parquet/
parquet.py:127 in datasets 5.2; datasets/features/features.py), which raises `ValueError: Feature type 'X' not
found` for a `_type` it does not know.
verl 0.9.1 asks for `datasets` with no version bound (its METADATA: `Requires-Dist: datasets`), so the file's writer
and the run's reader can differ: a file written by datasets>=4 names its list columns `List`, which datasets<4 lacks
(verl#2723). The stop comes in the TaskRunner, after Ray and the cluster are up.

The oracle is the installed `datasets` itself: the rule calls `datasets.Features.from_dict` on the file's metadata,
which is what the parquet builder calls; no table of versions is kept here. The check runs where verl-init runs:
when verl runs in another environment, its `datasets` decides (the finding says which version was asked).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from wizard.check.rules.context import Ctx, Facts, local_data_files

META_CAP = 4 << 20  # bytes of b"huggingface" metadata decoded at most (a real one is a few KiB)


def _features_meta(path: Path) -> dict[str, Any] | None:
    """The file's `datasets` feature dict, or None (no such metadata, or not one verl-init can read within bounds)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except Exception:  # noqa: BLE001 - an unreadable footer is other rules' business (verl's loader says it)
        return None
    raw = meta.get(b"huggingface")
    if not raw or len(raw) > META_CAP:
        return None
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    features = info.get("info", {}).get("features") if isinstance(info, dict) else None
    return features if isinstance(features, dict) else None


def undecodable(path: Path) -> str | None:
    """The installed `datasets`' error for the file's feature metadata, or None when it decodes (or there is none)."""
    features = _features_meta(path)
    if features is None:
        return None
    try:
        import datasets
    except ImportError:
        return None
    try:
        datasets.Features.from_dict(features)
    except Exception as exc:  # noqa: BLE001 - whatever datasets raises here, load_dataset raises too
        return f"{type(exc).__name__}: {str(exc).split('. Available', 1)[0][:160]}"
    return None


def rule_parquet_features(c: Ctx, f: Facts) -> None:
    for key, path, local in local_data_files(c, (".parquet",)):
        error = undecodable(local)
        if error is None:
            continue
        import datasets  # undecodable() found it importable: the version that decoded, not the dist record

        have = getattr(datasets, "__version__", "?")
        named = re.search(r"Feature type '([^']+)'", error)
        what = f"feature type {named.group(1)!r}" if named else "feature metadata"
        c.add("VI641", "error", (key,),
              f"{path} carries {what} that the installed datasets {have} cannot decode ({error}); verl "
              "reads it with datasets.load_dataset('parquet') (utils/dataset/rl_dataset.py:171-172), which "
              "raises this in the TaskRunner once the cluster is up (a file written by datasets>=4 names lists "
              "'List', which datasets<4 lacks: verl#2723)",
              "install the datasets version that wrote the file where verl runs (e.g. pip install "
              "'datasets>=4'), or rewrite the file with the installed datasets (load it with "
              "pyarrow.parquet.read_table and write it back without its b'huggingface' schema metadata)")
