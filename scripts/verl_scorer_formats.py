#!/usr/bin/env python3
"""Which answer formats each of verl's built-in scorers accepts, and what it returns: writes
wizard/check/data/verl_scorer_formats.json, read by check's VI766 and VI922.

    python scripts/verl_scorer_formats.py           # regenerate the table by running the installed verl's scorers
    python scripts/verl_scorer_formats.py --check   # exit 1 when the committed table differs

For every data_source verl 0.9.1's default_compute_score dispatches on (utils/reward_score/__init__.py:44-104, plus
"aime24" for its startswith("aime") branch), the scorer is run on the same correct answer ("72") written in each
format of FORMATS; a format is "accepted" when the score is the scorer's best (1.0, or a dict's "score" 1.0). The
table also records what the scorer returns (a float, or a dict and its keys) and the keys verl's reward-loop managers
then put in reward_extra_info (experimental/reward_loop/reward_manager/naive.py:86-95: a dict's own keys, or "acc" for
a number). A scorer that cannot run here (a missing optional package: geo3k needs mathruler) is recorded as such with
no formats and no return type, and the rules are silent on it. Code scorers (prime_code) are run once on a program
that prints the answer, for the return type only.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_scorer_formats.json"
SOURCE = "verl/utils/reward_score/__init__.py"

ANSWER = "72"
WORK = "Natalia sold 48 clips in April and half as many in May: 48 + 24 = 72."
# format name -> (the response written in it, the marker a prompt names when it asks for that format)
FORMATS: dict[str, tuple[str, str]] = {
    "hashes": (f"{WORK}\n#### {ANSWER}", "####"),
    "boxed": (f"{WORK}\nThe final answer is \\boxed{{{ANSWER}}}.", "\\boxed"),
    "answer_tag": (f"{WORK}\n<answer>{ANSWER}</answer>", "<answer>"),
    "answer_colon": (f"{WORK}\nAnswer: {ANSWER}", "Answer:"),
    "answer_is": (f"{WORK}\nThe answer is {ANSWER}", "The answer is"),
}
CODE = {"prime_code": ("```python\nprint(72)\n```", '{"inputs": ["\\n"], "outputs": ["72\\n"]}')}


def _sources() -> dict[str, str]:
    """data_source -> scorer module, from wizard's copy of verl's dispatch (checked against verl by running it)."""
    sys.path.insert(0, str(ROOT))
    from wizard.planner.dataprep import DEFAULT_SCORERS

    return {**DEFAULT_SCORERS, "aime24": "math_dapo"}


def _best(res: Any) -> bool:
    value = res.get("score") if isinstance(res, dict) else res
    return isinstance(value, (int, float)) and float(value) >= 1.0


def _returns(res: Any) -> dict[str, Any]:
    if isinstance(res, dict):
        return {"type": "dict", "keys": sorted(res), "extra_info_keys": sorted(res)}
    return {"type": "float", "keys": [], "extra_info_keys": ["acc"]}


def build() -> dict[str, Any]:
    from verl.utils.reward_score import default_compute_score

    out: dict[str, Any] = {}
    for source, scorer in sorted(_sources().items()):
        row: dict[str, Any] = {"scorer": scorer, "accepts": [], "returns": None, "runs": True}
        if scorer in CODE:
            solution, truth = CODE[scorer]
            try:
                row["returns"] = _returns(default_compute_score(source, solution, truth))
            except Exception as exc:  # noqa: BLE001
                row.update(runs=False, error=type(exc).__name__)
            out[source] = row
            continue
        truth: Any = {"target": [ANSWER]} if scorer == "search_r1_like_qa_em" else ANSWER
        for name, (solution, _marker) in FORMATS.items():
            try:
                res = default_compute_score(source, solution, truth)
            except Exception as exc:  # noqa: BLE001 - e.g. geo3k's optional mathruler
                row.update(runs=False, error=type(exc).__name__, accepts=[], returns=None)
                break
            row["returns"] = _returns(res)
            if _best(res):
                row["accepts"].append(name)
        out[source] = row
    return {"source": SOURCE, "answer": ANSWER, "formats": {k: {"response": v[0], "marker": v[1]}
                                                              for k, v in FORMATS.items()}, "data_sources": out}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
