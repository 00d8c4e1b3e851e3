"""`verl-init validate-dataset FILE... [--model-dir DIR] [--json]`: data files against what verl reads
(wizard.env.datasets)."""

from __future__ import annotations


def translate(args: list[str]) -> list[str]:
    """`--model-dir DIR` (the name every command gives a local model folder) as wizard.env.datasets' parser takes it,
    `--tokenizer DIR` (its first name, still accepted); nothing after `--` is touched."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        if arg == "--model-dir":
            out.append("--tokenizer")
        elif arg.startswith("--model-dir="):
            out.append("--tokenizer=" + arg.split("=", 1)[1])
        else:
            out.append(arg)
    return out


def main(args: list[str]) -> int:
    from wizard.env.datasets import main as validate_dataset_main

    return validate_dataset_main(translate(args))
