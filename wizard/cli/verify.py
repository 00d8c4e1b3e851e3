"""`verl-init verify BUNDLE`: verl's own composition and checks on a bundle, printed or as JSON.

Also used after writing a bundle (`verl-init --verify`, the interactive wizard's last step).
"""

from __future__ import annotations

import argparse
from typing import Optional


def main(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="verl-init verify",
                                description="Compose a bundle with verl's Hydra tree and run verl's own checks.")
    p.add_argument("bundle", help="a folder written by verl-init")
    p.add_argument("--model-dir", help="local model folder standing in for hub models that must be loaded")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    ns = p.parse_args(args)
    return verify_and_report(ns.bundle, ns.model_dir, as_json=ns.json)


def verify_and_report(bundle: str, model_dir: Optional[str], *, as_json: bool) -> int:
    from wizard.verify.harness import SOURCES, verify_with_verl

    report = verify_with_verl(bundle, model_dir=model_dir)
    if as_json:
        import json

        print(json.dumps(report.as_dict(), indent=2))
    else:
        for source, title in SOURCES.items():
            checks = report.section(source)
            if not checks:
                continue
            print(f"{title}:")
            for check in checks:
                mark = "ok  " if check.ok else ("skip" if check.skipped else "FAIL")
                print(f"  [{mark}] {check.name}: {check.detail}")
        if report.blocked:
            print(f"verl {report.verl_version}: NOT VERIFIED {bundle} — {report.blocked}")
        else:
            print(f"verl {report.verl_version}: {'accepted' if report.ok else 'REJECTED'} {bundle}")
    return 0 if report.ok else 1
