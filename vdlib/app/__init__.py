"""vdlib.app: see docs/architecture.md."""
