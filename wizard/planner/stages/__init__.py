"""The planner's rule stages, one concern a module; wizard.planner.pipeline.RULE_STAGES lists them in order."""
