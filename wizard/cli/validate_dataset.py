"""`verl-init validate-dataset FILE... [--model-dir DIR] [--json]`: data files against what verl reads
(wizard.env.datasets)."""

from __future__ import annotations


def main(args: list[str]) -> int:
    from wizard.env.datasets import main as validate_dataset_main

    return validate_dataset_main(args)
