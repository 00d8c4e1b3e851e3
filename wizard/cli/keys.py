"""`verl-init keys [--markdown]`: every answer key with what it means, what it allows and its default."""

from __future__ import annotations

import argparse


def main(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="verl-init keys", description="List answer keys.")
    p.add_argument("--markdown", action="store_true", help="a Markdown table (as in README.md)")
    ns = p.parse_args(args)
    from wizard.intent.answers import Answers, _allowed

    if ns.markdown:
        print("| key | what | allowed | default |\n| --- | --- | --- | --- |")
    for name, info in Answers.model_fields.items():
        default = info.get_default(call_default_factory=True)
        if ns.markdown:
            shown = "chosen by verl-init" if default is None else f"`{default!r}`"
            print(f"| `{name}` | {info.description} | {_allowed(name)} | {shown} |")
        else:
            shown = "chosen by verl-init" if default is None else repr(default)
            print(f"{name}: {info.description} ({_allowed(name)}; default {shown})")
    return 0
