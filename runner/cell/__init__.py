"""One cell from start to outcome: the local and remote cell runners, the outcome and its
sample rows, the upload check, server reuse and the watchdog (docs/architecture.md)."""
