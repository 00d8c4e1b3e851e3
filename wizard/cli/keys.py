"""`verl-init keys [--markdown | --json]`: every answer key with what it means, what it allows and its default."""

from __future__ import annotations

import argparse


def main(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="verl-init keys", description="List answer keys.")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="a Markdown table (as in the docs)")
    form.add_argument("--json", action="store_true",
                      help="print the keys as JSON: a list of {key, description, allowed, default} (default null: "
                           "chosen by verl-init)")
    ns = p.parse_args(args)
    from wizard.intent.answers import Answers, _allowed

    if ns.json:
        import json

        rows = [{"key": name, "description": info.description, "allowed": _allowed(name),
                 "default": info.get_default(call_default_factory=True)} for name, info in Answers.model_fields.items()]
        print(json.dumps(rows, indent=2, default=str))
        return 0
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
