"""`verl-init smoke BUNDLE [--engine auto|verl|cpu|verl-workers] [--prompts N] [--json]`: one real rollout/update cycle
(wizard.smoketest.run)."""

from __future__ import annotations


def main(args: list[str]) -> int:
    from wizard.smoketest.run import cli

    return cli(args)
