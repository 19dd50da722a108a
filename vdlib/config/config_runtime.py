"""The runtime sections of the experiment configuration: which engine samples, how ``vdlib grid``
spreads runs, and which tracker records them. None of them changes what the paper's protocol
computes (that is :mod:`vdlib.config.config_sections`); :mod:`vdlib.config` re-exports every name
here.

>>> EngineConfig().backend, LauncherConfig().kind, TRACKER_NAMES[0]
('vllm', 'local', 'none')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vdlib.config.config_fields import param

__all__ = ["ENGINE_BACKENDS", "EngineConfig", "TRACKER_NAMES", "SlurmConfig", "LauncherConfig"]


ENGINE_BACKENDS = ("hf", "vllm", "server")


@dataclass
class EngineConfig:
    """Which engine samples: every stage that generates text (proposer GRPO rollouts, the K
    questions, the M solver answers of scoring and of the proposer reward, evaluation, the local
    verifier) goes through it (vdlib.engines; docs/vllm.md)."""

    backend: str = param("vllm", "hf: transformers generate in this process; vllm: an "
                         "in-process vLLM engine started from the stage's checkpoint and shut "
                         "down after it (TRL's rollouts through TRL's colocated vLLM); server: "
                         "a vLLM OpenAI server (vdlib.engines.serving), started by vdlib on "
                         "engine.server_gpus or reached at engine.server_url. Paper profile: "
                         "vllm (the paper samples with vLLM).", choices=ENGINE_BACKENDS)
    rollouts: str = param("auto", "Engine of the GRPO rollouts inside TRL: auto (hf backend: "
                          "transformers; vllm and server: TRL's colocated vLLM), hf "
                          "(transformers), colocate (TRL's vLLM in the training process), or "
                          "server (a running `trl vllm-serve` at engine.rollout_server_url).",
                          choices=("auto", "hf", "colocate", "server"))
    route: str = param("processor", "How the mask reaches vLLM: processor (vdlib's seeded "
                       "logits processor, the seed in extra_args) or allowed_token_ids (the "
                       "allowed ids per request; vLLM's model runner V1 only).",
                       choices=("processor", "allowed_token_ids"))
    gpu_memory_utilization: float = param(0.4, "Share of the GPU's memory a vLLM engine that "
                                          "vdlib starts may take (its weights and KV cache).",
                                          gt=0, le=1)
    rollout_gpu_memory_utilization: float = param(0.3, "Share of the GPU's memory TRL's "
                                                  "colocated vLLM may take (beside the "
                                                  "trainer and the frozen solver's engine).",
                                                  gt=0, le=1)
    kv_cache_gb: float | None = param(None, "KV cache of each vLLM engine vdlib starts, GiB "
                                      "(vLLM's kv_cache_memory_bytes); set, vLLM skips its "
                                      "start-up memory profiling, which fails when another "
                                      "process on the same GPU frees memory meanwhile: what "
                                      "lets several runs share one GPU (vdlib grid --gpus "
                                      "0,0,0). null = gpu_memory_utilization sizes it.", gt=0,
                                      le=100000)
    rollout_kv_cache_gb: float | None = param(None, "The same for TRL's colocated vLLM (GiB); "
                                              "null = rollout_gpu_memory_utilization sizes it.",
                                              gt=0, le=100000)
    max_model_len: int | None = param(None, "vLLM context length; null = the stage's need "
                                      "(prompt + max new tokens), capped by the model.", gt=0,
                                      le=10**7)
    lifetime: str = param("run", "How long a vLLM engine lives (backend vllm): run (one "
                          "in-process engine for the whole run, shared by both roles and TRL's "
                          "colocated rollouts, asleep while training holds the GPU and woken "
                          "with the current weights pushed in memory; docs/vllm.md, 'Sharing "
                          "one GPU with training') or stage (an engine per sampling stage, "
                          "started from the checkpoint on disk and shut down after it, TRL's "
                          "rollouts in TRL's own engine). run falls back to stage, with a log "
                          "line, where it cannot apply: several processes, or proposer and "
                          "solver of different architectures.", choices=("run", "stage"))
    enforce_eager: bool = param(False, "vLLM without CUDA graphs: faster start, slower "
                                "decoding (small smoke runs). It reaches vdlib's own engines "
                                "(sampling stages, evaluation, the run lifetime's engine); "
                                "TRL's own colocated rollout engine (lifetime stage, single-"
                                "policy runs) captures CUDA graphs either way.")
    cpu_dtype: str = param("float32", "hf backend on CPU: weights dtype of the sampling "
                           "stages' engines (the K questions, scoring, the proposer reward's "
                           "answers, evaluation); GRPO training and its rollouts stay in "
                           "float32. bfloat16 (with eager attention) sampled the "
                           "quickstart's questions 1.29x and its scoring 1.43x faster on one "
                           "core of an AMD EPYC with AVX512-BF16 "
                           "(benchmarks/results/cpu_dtype_speed_cpu.txt); a CPU without it "
                           "emulates bfloat16. The GPU profiles sample in model.dtype.",
                           choices=("float32", "bfloat16"))
    batch_size: int = param(64, "hf backend: prompts x samples per generate call (solver "
                            "scoring, the proposer reward).", gt=0, le=65536)
    server_url: str | None = param(None, "server backend: base URL of a running vLLM server "
                                   "(started with vdlib's logits processor); null = vdlib "
                                   "starts one per stage.")
    server_gpus: list[str] = param([], "server backend: GPUs (CUDA_VISIBLE_DEVICES values) "
                                   "of the servers vdlib starts, one server each, requests "
                                   "spread over them; a stage that trains (the proposer "
                                   "phase's reward) uses only those other than the training "
                                   "GPU. [] = the training device. The paper's 2-GPU "
                                   "topology (paper App. 'Compute requirements'; "
                                   "params/smollm2/topology_2gpu.yaml): ['0', '1'] with "
                                   "training on cuda:0.")
    rollout_server_url: str | None = param(None, "rollouts = server: base URL of "
                                           "`trl vllm-serve` (null = http://127.0.0.1:8000).")


# the names of vdlib.utils.tracking.TRACKERS
TRACKER_NAMES = ("none", "tensorboard", "wandb", "mlflow", "trackio")


@dataclass
class SlurmConfig:
    """How ``vdlib grid --launcher slurm`` submits a grid (one array job, through submitit)."""

    partition: str | None = param(None, "SLURM partition; null = the cluster's default.")
    time_min: int = param(240, "Time limit of one run's job, minutes (a run that needs longer "
                          "resumes when the grid is submitted again).", gt=0,
                          le=10**6)
    cpus_per_task: int = param(8, "CPU cores per run.", gt=0, le=4096)
    mem_gb: int | None = param(None, "Memory per run, GB; null = the partition's default.", gt=0,
                               le=10**6)
    account: str | None = param(None, "SLURM account; null = none given.")
    array_parallelism: int = param(64, "Most array tasks running at once.", gt=0,
                                   le=100000)
    extra: list[str] = param([], "Other SLURM options as key=value, passed to submitit as "
                             "slurm_<key> (e.g. constraint=h100, qos=high).")


@dataclass
class LauncherConfig:
    """How ``vdlib grid`` spreads a grid's runs (arms x seeds)."""

    kind: str = param("local", "local (runs packed onto this machine's GPUs, one per group of "
                      "gpus_per_run, the rest queued) or slurm (a submitit job array).",
                      choices=("local", "slurm"))
    gpus_per_run: int = param(1, "GPUs per run: 1 = one process per run; N > 1 = `accelerate "
                              "launch` with N processes; 0 = CPU runs.", ge=0,
                              le=1024)
    max_parallel: int | None = param(None, "Most runs at once on this machine; null = one per "
                                     "GPU group (1 without GPUs). On the CPU, run_arms (the "
                                     "notebooks) also runs up to this many arms at once, the "
                                     "cores shared among them (vdlib.utils.workers).", gt=0,
                                     le=4096)
    slurm: SlurmConfig = field(default_factory=SlurmConfig,
                               metadata={"help": "SLURM submission."})
