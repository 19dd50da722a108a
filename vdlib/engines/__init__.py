"""Generation engines: every stage that samples goes through one interface.

- :mod:`~vdlib.engines.models`: the model registry and loading (packaged SmolLM2, tiny random,
  local paths, Hub ids); :mod:`~vdlib.engines.gguf_checkpoint`: a llama GGUF read into a
  transformers config and state dict (the packaged model's one-time conversion);
- :mod:`~vdlib.engines.generation`: the engine interface and the transformers engine;
  :mod:`~vdlib.engines.sampling`: its top-p filter; :mod:`~vdlib.engines.split_linear`: its CPU
  decoding steps on every thread;
- :mod:`~vdlib.engines.vllm_backend`: the mask in vLLM (the seeded logits processor, the
  ``vllm.logits_processors`` entry point's target) and an LLM's start / stop;
- :mod:`~vdlib.engines.vllm_engine`, :mod:`~vdlib.engines.serving`: the engine over an
  in-process ``vllm.LLM``; vLLM servers;
- :mod:`~vdlib.engines.setting`: ``engine.backend`` -> an engine over a checkpoint
  (:func:`~vdlib.engines.setting.open_engine`);
- :mod:`~vdlib.engines.engine_lifetime`: ``engine.lifetime: run``, one sleep-mode engine per run.

May import: :mod:`vdlib.method`, :mod:`vdlib.utils`, :mod:`vdlib.config` (the model names
:mod:`~vdlib.engines.models` registers loaders for; the engine section, read by attribute).
"""
