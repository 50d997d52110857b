"""runner.load.tools."""
