"""vdlib.config: see docs/architecture.md."""
