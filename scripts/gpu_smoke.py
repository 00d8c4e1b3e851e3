#!/usr/bin/env python3
"""Prepare (and with --run, run) one real verl `main_ppo` step of a bundle on a GPU machine.

    python scripts/gpu_smoke.py BUNDLE --out DIR [--data-dir LOCAL_DATASET] [--prompts N] [--run]

Builds DIR/tiny-model (a tiny random-initialised model of the bundle model's architecture, fitted for a few
seconds on the bundle's rows; no hub), prints the commands as a shell script, and with --run executes them:
the bundle's data/prepare_data.py if its training file is missing, then
`verl-init smoke BUNDLE --engine verl --model-dir DIR/tiny-model --json` (HF_HUB_OFFLINE=1), whose JSON is the
same smoke report the cpu engine prints. Exit status: the smoke's (0 passed, 1 failed), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str]) -> int:
    from wizard.intent.errors import WizardError
    from wizard.smoketest.prepared import prepare_gpu_smoke

    p = argparse.ArgumentParser(prog="gpu_smoke.py", description=__doc__.split("\n\n")[0])
    p.add_argument("bundle")
    p.add_argument("--out", required=True, help="a new folder for the tiny model")
    p.add_argument("--data-dir", help="a local copy of the hub dataset for data/prepare_data.py --local-dir")
    p.add_argument("--prompts", type=int)
    p.add_argument("--run", action="store_true", help="run the commands (on the GPU machine)")
    ns = p.parse_args(argv)
    try:
        prep = prepare_gpu_smoke(ns.bundle, ns.out, data_dir=ns.data_dir, prompts=ns.prompts)
    except WizardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(prep.script(), end="")
    if not ns.run:
        return 0
    env = {**os.environ, **prep.env, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    rc = 0
    for step in prep.steps:
        rc = subprocess.run(step, cwd=prep.bundle, env=env, check=False).returncode
        if rc != 0:
            break
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
