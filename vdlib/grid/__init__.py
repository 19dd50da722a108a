"""vdlib.grid: see docs/architecture.md."""
