"""Many runs: a grid on local GPUs or SLURM, and where every run of an output folder stands.

- :mod:`~vdlib.grid.launch` (with :mod:`~vdlib.grid.grid_run`, :mod:`~vdlib.grid.launch_slurm`):
  ``vdlib grid`` and the notebooks' grids: queued local runs, failures isolated, or a SLURM job
  array (submitit);
- :mod:`~vdlib.grid.status` (with :mod:`~vdlib.grid.status_records`,
  :mod:`~vdlib.grid.status_format`): ``vdlib status``;
- :mod:`~vdlib.grid.cli_errors`: one-line messages for fixable failures, SIGTERM as an exit (a
  run's process: the CLI and a SLURM task).

May import: every group below it (method, utils, engines, config, metrics, evaluation, runs,
loop). It sits below :mod:`vdlib.experiments`, whose :func:`~vdlib.experiments.grids.run_grid`
launches grids for the notebooks.
"""
