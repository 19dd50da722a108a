"""The entry points: the command line and the notebooks' batch runner.

- :mod:`~vdlib.app.cli`: ``vdlib`` / ``python -m vdlib`` (run, grid, results, status,
  notebooks, params, eval, plan);
- :mod:`~vdlib.app.notebooks`: ``vdlib notebooks run`` (papermill, skip logic, quiet kernels);
- :mod:`~vdlib.app.plan` (with :mod:`~vdlib.app.plan_table`, :mod:`~vdlib.app.plan_report`,
  :mod:`~vdlib.app.plan_measure`): ``vdlib plan``, a params file's cost before anything loads.

May import: every group; nothing imports it but ``vdlib/__main__.py``.
"""
