"""Infrastructure that knows nothing of the method, used by every group above.

- :mod:`~vdlib.utils.artifacts`: atomic writes, JSONL;
- :mod:`~vdlib.utils.registry`: name-keyed registries (an unknown name lists the valid ones);
- :mod:`~vdlib.utils.stats`: mean +- standard error, the one rule of every table and summary;
- :mod:`~vdlib.utils.archive`: the committed evidence archives (read-only paths through a zip,
  reproducible packing, their SHA-256 list);
- :mod:`~vdlib.utils.terminal`: a quiet terminal (tqdm bars off, known warnings filtered);
- :mod:`~vdlib.utils.openai_client`: the OpenAI key and client;
- :mod:`~vdlib.utils.tracking`: experiment trackers (TensorBoard, W&B, MLflow, Trackio);
- :mod:`~vdlib.utils.workers`: independent CPU jobs in spawned worker processes;
- :mod:`~vdlib.utils.helper_process`: a function run in a persistent helper process with a hard
  timeout, safe from any thread, and a pool of them (grading's math-verify comparisons).

May import: third-party packages only; nothing else of vdlib (tests/test_architecture.py). The
lowest floor: every other group may import it, :mod:`vdlib.method` included.
"""
