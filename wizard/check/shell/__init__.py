"""The static shell reader behind wizard.check.shellargs (which is its public face)."""
