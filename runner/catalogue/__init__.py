"""runner.catalogue."""
