"""`verl-init doctor [--json]`: versions, GPUs and topology, Ray, environment pitfalls (wizard.env.doctor)."""

from __future__ import annotations


def main(args: list[str]) -> int:
    from wizard.env.doctor import cli

    return cli(args)
