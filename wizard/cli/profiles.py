"""`verl-init profiles`: the shipped profiles, one per line with its description."""

from __future__ import annotations

import argparse


def main(args: list[str]) -> int:
    argparse.ArgumentParser(prog="verl-init profiles", description="List shipped profiles.").parse_args(args)
    from wizard.intent.profiles import list_profiles

    rows = list_profiles()
    width = max(len(n) for n, _ in rows)
    for name, desc in rows:
        print(f"{name.ljust(width)}  {desc}")
    return 0
