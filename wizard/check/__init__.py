"""`verl-init check`: lint a verl config, launch script or list of Hydra overrides before it runs.

Start at wizard.check.lint (`check()`, `cli`): its docstring walks the pipeline, one module per step
(source → overrides → items → resolve → hardware → rules/* → report). The rule IDs are in
wizard.check.catalog; verl's vocabulary in wizard.verlspec.keys.
"""
