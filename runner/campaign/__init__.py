"""The campaign loop (`loop.run_campaign`), adaptive repeats and the dashboard's worker:
the layer above the cells (docs/architecture.md)."""
