"""``python -m vdlib ...`` (and ``accelerate launch -m vdlib run ...``): the command line."""

from vdlib.cli import main

raise SystemExit(main())
