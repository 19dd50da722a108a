"""The run folder's bookkeeping: what makes ``<output_dir>/<experiment>/<run_id>`` a run that
resumes safely (docs/reliability.md).

- :mod:`~vdlib.runs.run_state`: what a run folder is and what it holds: the manifest, the claim
  (a folder of another config is refused, or set aside under ``force``), the stage records
  checked before a resume skips a stage; it re-exports the three below;
- :mod:`~vdlib.runs.fingerprint`: the config fingerprint and the keys two configs differ in;
- :mod:`~vdlib.runs.run_lock`: the folder's OS-level lock;
- :mod:`~vdlib.runs.file_records`: a stage's or a built folder's files recorded (size, SHA-256)
  and checked;
- :mod:`~vdlib.runs.run_extension`: a finished run resumed under a larger ``iterations``;
- :mod:`~vdlib.runs.run_start`: a run folder created, its ``manifest.json`` and ``config.yaml``
  written.

May import: :mod:`vdlib.method`, :mod:`vdlib.utils`, :mod:`vdlib.config`, :mod:`vdlib.engines`.
Beside :mod:`vdlib.metrics` and :mod:`vdlib.evaluation`, below :mod:`vdlib.loop` (which runs
Algorithm 1 in the folder), :mod:`vdlib.grid` (``vdlib status``) and :mod:`vdlib.export` (a run
read back and checked).
"""
