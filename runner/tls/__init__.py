"""runner.tls."""
