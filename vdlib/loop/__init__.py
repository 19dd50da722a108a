"""vdlib.loop: see docs/architecture.md."""
