#!/usr/bin/env python3
"""Regenerate wizard/offline_data/: the built-in offline dataset (arithmetic word problems in GSM8K's form).

    python scripts/make_offline_dataset.py           # rewrite wizard/offline_data/train.jsonl and test.jsonl
    python scripts/make_offline_dataset.py --check   # exit 1 if the committed files differ from a fresh run

Every row is {"question": ..., "answer": ...} exactly as openai/gsm8k stores it: worked steps with the
calculator annotations `<<a*b=c>>` and the final line `#### <integer>`, so the bundle's data/prepare_data.py
reads it with its gsm8k settings (the number after "#### " is the ground truth) and verl's own gsm8k scorer
(verl/utils/reward_score/gsm8k.py, data_source "openai/gsm8k") scores it. Whole, non-negative answers only;
questions are unique and the test split shares no question with the train split.

Deterministic: a fixed seed and Python's `random.Random` (its sequence is stable across versions for the
calls used here: randint and choice), so the files only change when this script does. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Callable

OUT = Path(__file__).resolve().parent.parent / "wizard" / "offline_data"
SEED = 20240914
SPLITS = (("train", 256), ("test", 64))

NAMES = ("Ada", "Ben", "Carla", "Dev", "Emi", "Farid", "Gus", "Hana", "Ivo", "Jun", "Kira", "Liam", "Mona",
         "Nils", "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara")
THINGS = ("apples", "pencils", "stickers", "marbles", "books", "cookies", "stamps", "shells", "cards", "buttons")
BOXES = ("box", "bag", "jar", "crate", "basket")

Row = tuple[str, str]


def _add(r: random.Random) -> Row:
    name, thing = r.choice(NAMES), r.choice(THINGS)
    a, b = r.randint(3, 90), r.randint(2, 60)
    return (f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?",
            f"{name} has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} {thing}.\n#### {a + b}")


def _sub(r: random.Random) -> Row:
    name, thing = r.choice(NAMES), r.choice(THINGS)
    a = r.randint(20, 120)
    b = r.randint(1, a - 1)
    return (f"{name} had {a} {thing} and gave away {b}. How many {thing} are left?",
            f"{name} has {a} - {b} = <<{a}-{b}={a - b}>>{a - b} {thing} left.\n#### {a - b}")


def _mul(r: random.Random) -> Row:
    thing, box = r.choice(THINGS), r.choice(BOXES)
    per, n = r.randint(2, 25), r.randint(2, 12)
    return (f"Each {box} holds {per} {thing}. How many {thing} are in {n} {box}s?",
            f"{n} {box}s hold {n} * {per} = <<{n}*{per}={n * per}>>{n * per} {thing}.\n#### {n * per}")


def _div(r: random.Random) -> Row:
    name, thing = r.choice(NAMES), r.choice(THINGS)
    friends, each = r.randint(2, 9), r.randint(2, 15)
    total = friends * each
    return (f"{name} shares {total} {thing} equally among {friends} friends. How many {thing} does each friend get?",
            f"Each friend gets {total} / {friends} = <<{total}/{friends}={each}>>{each} {thing}.\n#### {each}")


def _price(r: random.Random) -> Row:
    name, thing = r.choice(NAMES), r.choice(THINGS)
    n, price, paid_extra = r.randint(2, 9), r.randint(2, 12), r.randint(1, 20)
    cost = n * price
    paid = cost + paid_extra
    return (f"{name} buys {n} {thing} at ${price} each and pays with ${paid}. How much change does {name} get?",
            f"The {thing} cost {n} * {price} = <<{n}*{price}={cost}>>{cost} dollars.\n"
            f"The change is {paid} - {cost} = <<{paid}-{cost}={paid_extra}>>{paid_extra} dollars.\n#### {paid_extra}")


def _two_step(r: random.Random) -> Row:
    name, thing, box = r.choice(NAMES), r.choice(THINGS), r.choice(BOXES)
    boxes, per, loose = r.randint(2, 9), r.randint(3, 20), r.randint(1, 30)
    packed = boxes * per
    total = packed + loose
    return (f"{name} has {boxes} {box}s with {per} {thing} in each and {loose} loose {thing}. "
            f"How many {thing} does {name} have in all?",
            f"The {box}s hold {boxes} * {per} = <<{boxes}*{per}={packed}>>{packed} {thing}.\n"
            f"In all {packed} + {loose} = <<{packed}+{loose}={total}>>{total} {thing}.\n#### {total}")


def _weeks(r: random.Random) -> Row:
    name = r.choice(NAMES)
    per_day, days, spent = r.randint(2, 15), r.randint(3, 7), r.randint(1, 10)
    saved = per_day * days
    spent = min(spent, saved - 1)
    left = saved - spent
    return (f"{name} saves ${per_day} a day for {days} days, then spends ${spent}. How many dollars are left?",
            f"{name} saves {per_day} * {days} = <<{per_day}*{days}={saved}>>{saved} dollars.\n"
            f"After spending, {saved} - {spent} = <<{saved}-{spent}={left}>>{left} dollars are left.\n#### {left}")


KINDS: tuple[Callable[[random.Random], Row], ...] = (_add, _sub, _mul, _div, _price, _two_step, _weeks)


def rows() -> dict[str, list[dict[str, str]]]:
    """Each split's rows: the kinds in turn, questions unique across both splits."""
    r = random.Random(SEED)
    seen: set[str] = set()
    out: dict[str, list[dict[str, str]]] = {}
    i = 0
    for split, n in SPLITS:
        part: list[dict[str, str]] = []
        while len(part) < n:
            question, answer = KINDS[i % len(KINDS)](r)
            i += 1
            if question not in seen:
                seen.add(question)
                part.append({"question": question, "answer": answer})
        out[split] = part
    return out


def texts() -> dict[str, str]:
    return {f"{split}.jsonl": "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in part)
            for split, part in rows().items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder to write (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for name, text in texts().items():
        path = args.out / name
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"make_offline_dataset: out of date: {', '.join(stale)} (run scripts/make_offline_dataset.py)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
