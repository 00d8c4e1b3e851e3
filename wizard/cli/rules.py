"""`verl-init rules [VIxxx ...] [--markdown | --json]`: what each rule ID verl-init reports means."""

from __future__ import annotations

import argparse

from wizard.cli.common import err


def main(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="verl-init rules", description="List the rule IDs verl-init reports.")
    p.add_argument("ids", nargs="*", metavar="VIxxx", help="only these rules")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="a Markdown table (as in the docs)")
    form.add_argument("--json", action="store_true", help="print the rules as JSON: a list of {id, area, title}")
    ns = p.parse_args(args)
    from wizard.check.rule_index import all_rules, markdown

    if ns.markdown:
        print(markdown())
        return 0
    rules = all_rules()
    wanted = [i.upper() for i in ns.ids] or list(rules)
    unknown = [i for i in wanted if i not in rules]
    if unknown:
        err(f"rules: {unknown[0]!r} is not a verl-init rule ID — run `verl-init rules` for the list")
        return 2
    if ns.json:
        import json

        print(json.dumps([{"id": rule, "area": rules[rule][0], "title": rules[rule][1]} for rule in wanted], indent=2))
        return 0
    for rule in wanted:
        area, title = rules[rule]
        print(f"{rule}  [{area}]  {title}")
    return 0
