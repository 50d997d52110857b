"""Plain data about what exists: workloads, servers, their variant options, which server
can run which workload, and the stages of a cell (docs/architecture.md)."""
