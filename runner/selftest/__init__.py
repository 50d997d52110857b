"""runner.selftest."""
