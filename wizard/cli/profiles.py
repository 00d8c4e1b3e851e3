"""`verl-init profiles [--json]`: the shipped profiles, one per line with its description."""

from __future__ import annotations

import argparse


def main(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="verl-init profiles", description="List shipped profiles.")
    p.add_argument("--json", action="store_true", help="print the profiles as JSON: a list of {name, description}")
    ns = p.parse_args(args)
    from wizard.intent.profiles import list_profiles

    rows = list_profiles()
    if ns.json:
        import json

        print(json.dumps([{"name": name, "description": desc} for name, desc in rows], indent=2))
        return 0
    width = max(len(n) for n, _ in rows)
    for name, desc in rows:
        print(f"{name.ljust(width)}  {desc}")
    return 0
