"""Bundle capabilities beyond the core verl config: each module exposes `artefacts(plan)`."""
