"""vdlib.report: see docs/architecture.md."""
