"""vdlib: reference implementation of "Vocabulary Dropout for Curriculum Diversity in LLM
Co-Evolution".

The library holds all logic; notebooks and the command line are thin drivers. Its folders, each
importing only the ones before it (tests/test_architecture.py; docs/architecture.md):

- ``method/``: the paper's math (mask, rewards, BLEU penalty, losses, filter, parsing, grading),
  importing nothing else of vdlib; ``utils/``: infrastructure that knows nothing of the method;
- ``engines/``: model loading and the generation engines (transformers, vLLM, vLLM servers);
- ``config/``: the typed config, the arms' table, every run path;
- ``metrics/``, ``evaluation/``: diversity and curriculum metrics; benchmark evaluation and the
  external-LLM verification;
- ``loop/``: one co-evolution run (runner, stages, trainer, checkpoints, run state);
- ``grid/``: many runs (local GPUs or SLURM) and their status;
- ``report/``: the notebooks' grids, tables, figures and report folders;
- ``app/``: the command line (``vdlib``, ``python -m vdlib``) and the notebooks' batch runner.
"""

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())
