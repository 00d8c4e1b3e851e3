"""The rules of `verl-init check`, one module per family; their IDs and titles are in wizard.check.catalog.

Each `rule_*` function takes the rule context and the shared facts (wizard.check.rules.context) and adds
findings. keys: run while the tree is resolved; values, batches, tokens, layout, roles, memory, files:
run by wizard.check.lint.check() on the resolved tree, in the order that function lists.
"""
