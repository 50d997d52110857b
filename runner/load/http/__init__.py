"""runner.load.http.client."""
