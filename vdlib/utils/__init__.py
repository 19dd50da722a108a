"""Infrastructure that knows nothing of the method, used by every group above.

- :mod:`~vdlib.utils.artifacts`: atomic writes, JSONL;
- :mod:`~vdlib.utils.registry`: name-keyed registries (an unknown name lists the valid ones);
- :mod:`~vdlib.utils.stats`: mean +- standard error, the one rule of every table and summary;
- :mod:`~vdlib.utils.archive`: the committed evidence archives (read-only paths through a zip,
  reproducible packing, their SHA-256 list);
- :mod:`~vdlib.utils.terminal`: a quiet terminal (tqdm bars off, known warnings filtered);
- :mod:`~vdlib.utils.openai_client`: the OpenAI key and client;
- :mod:`~vdlib.utils.tracking`: experiment trackers (TensorBoard, W&B, MLflow, Trackio).

May import: third-party packages only; nothing else of vdlib (tests/test_architecture.py).
"""
