"""``python -m vdlib ...`` (and ``accelerate launch -m vdlib run ...``): the command line."""

from vdlib.app.cli import main

raise SystemExit(main())
