"""vdlib.utils: see docs/architecture.md."""
