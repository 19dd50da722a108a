"""vdlib.method: see docs/architecture.md."""
