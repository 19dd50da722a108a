"""vdlib.engines: see docs/architecture.md."""
