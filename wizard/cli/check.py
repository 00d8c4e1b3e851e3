"""`verl-init check`: lint a verl config, launch script or bundle (wizard.check.lint), or, with `--mode cluster`,
compare a bundle with a live Ray cluster (wizard.env.cluster)."""

from __future__ import annotations


def main(args: list[str]) -> int:
    if _cluster_mode(args):
        from wizard.env.cluster import cli

        return cli(args)
    from wizard.check.lint import cli as lint_cli

    return lint_cli(args)


def _cluster_mode(args: list[str]) -> bool:
    """`--mode cluster` / `--mode=cluster` before any `--` (what follows `--` are verl overrides)."""
    head = args[:args.index("--")] if "--" in args else args
    return any(a == "--mode=cluster" or (a == "--mode" and head[i + 1:i + 2] == ["cluster"])
               for i, a in enumerate(head))
