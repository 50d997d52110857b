"""runner.net."""
