"""runner.cell.outcome."""
