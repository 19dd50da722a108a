"""The notebooks' verbs: run a grid, evaluate its models, train a transfer student.

- :mod:`~vdlib.experiments.grids`: :func:`~vdlib.experiments.grids.run_grid` runs (or resumes)
  every arm x seed of a config, in this process or through :mod:`vdlib.grid.launch`;
  :func:`~vdlib.experiments.grids.instruct_config`, notebook 06's instruction-tuned grid;
- :mod:`~vdlib.experiments.evaluate`: pass@1 of a checkpoint, of every run's solver / proposer /
  policy, of the starting checkpoint (resumable), and the proposers' verified correctness;
- :mod:`~vdlib.experiments.eval_grid`: the paper's evaluation protocol over a grid (which runs
  each table evaluates, pooling, the out-of-domain table, the judged scores);
- :mod:`~vdlib.experiments.transfer`: notebook 03's curriculum transfer (verify, then train a
  fresh student).
- :mod:`~vdlib.experiments.experiment_results`: the experiment's results JSON a notebook writes
  (``<output_dir>/results/<experiment>.json``, docs/results' format) and the join of files made
  on different machines (``vdlib notebooks merge``).

What they write is read back and drawn by :mod:`vdlib.report`, which imports nothing of the
loop or the grid.

May import: every group below it (method, utils, config, engines, metrics, evaluation, loop,
report, grid). Only :mod:`vdlib.app` sits above it.
"""
