"""runner.spec.model."""
