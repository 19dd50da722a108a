"""The sections of the experiment configuration: one typed dataclass per concern.

Every field is declared with :func:`param`: its default (the paper's value, i.e. the ``paper``
profile), its help text citing where the value comes from (``vdlib params describe`` prints them;
``docs/config.md`` is generated from it), and its declarative validation rules (``choices``,
``gt`` / ``ge`` / ``le`` / ``lt``), which :func:`vdlib.config.experiment.load_params` enforces.
Loading, merging, validation and the profile presets live in :mod:`vdlib.config`, which re-exports
every name here; import them from there.

This module imports nothing heavy (no torch, no datasets): the lists of allowed names other
modules register against (:data:`KNOWN_BENCHMARKS`; the engines' in
:mod:`vdlib.config.config_runtime`) live here so that
those modules, not the configuration, depend on them.

>>> GRPOConfig().global_batch_size, ExperimentConfig().solver.global_batch_size
(16, 8)
>>> EvaluationConfig().temperature
0.7
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vdlib.config.config_adaptive import AdaptiveScheduleConfig
from vdlib.config.config_evaluation import KNOWN_BENCHMARKS, EvaluationConfig, VerificationConfig
from vdlib.config.config_fields import PAPER, RZERO, SETUP, VDLIB, param
from vdlib.config.config_runtime import TRACKER_NAMES, EngineConfig, LauncherConfig
from vdlib.config.folder_keys import COMMITTED_CURRICULA_DIR

__all__ = [
    "ModelConfig",
    "GRPOConfig",
    "VocabDropoutConfig",
    "AdaptiveScheduleConfig",
    "ScoringConfig",
    "CurriculumConfig",
    "EvaluationConfig",
    "VerificationConfig",
    "SinglePolicyConfig",
    "WarmStartConfig",
    "MetricsConfig",
    "KNOWN_BENCHMARKS",
    "ExperimentConfig",
]

# ----------------------------------------------------------------------------- sections


@dataclass
class ModelConfig:
    """Which models play proposer and solver, and how they are loaded."""

    proposer: str = param("Qwen/Qwen3-4B-Base", f"Proposer base model: a registered name "
                          f"(vdlib.engines.models), a Hugging Face id or a local path. {SETUP}: "
                          "Qwen3-4B-Base and Qwen3-8B-Base.")
    solver: str | None = param(None, "Solver base model; null = same checkpoint as the proposer "
                               f"({SETUP}, as in R-Zero). Set it for cross-scale runs.")
    dtype: str = param("bfloat16", f"Weights dtype. {PAPER}: bfloat16.",
                       choices=("float32", "bfloat16", "float16", "auto"))
    device: str = param("auto", "Device: auto (cuda if available, else cpu), cpu, cuda, cuda:N.")
    cache_dir: str | None = param(None, "Where converted models are cached; null = "
                                  "$VDLIB_CACHE_DIR or ~/.cache/vdlib.")
    transfer: str = param("Qwen/Qwen3-4B-Base", "Fresh model GRPO-trained on a verified "
                          "curriculum (paper App. 'Curriculum-transfer training details': "
                          "Qwen3-4B-Base; notebook 03).")
    instruct: str = param("Qwen/Qwen2.5-1.5B-Instruct", "Instruction-tuned model of App. "
                          "'Instruction-tuned models' (Qwen2.5-1.5B-Instruct; notebook 06).")


@dataclass
class GRPOConfig:
    """GRPO settings for one role (proposer or solver). Defaults are the proposer column."""

    learning_rate: float = param(1e-6, f"AdamW learning rate. {PAPER}.", gt=0, le=1)
    weight_decay: float = param(1e-2, f"AdamW weight decay. {PAPER}.", ge=0, le=1)
    warmup_steps: int = param(0, f"Learning-rate warm-up steps. {PAPER}: 0.", ge=0,
                              le=10**9)
    max_grad_norm: float = param(1.0, f"Gradient clipping norm. {PAPER}.", gt=0,
                                  le=1e6)
    kl_beta: float = param(1e-2, f"KL penalty coefficient (low-variance k3 KL). {PAPER}.", ge=0,
                            le=1000)
    gradient_checkpointing: bool = param(True, f"Gradient checkpointing. {PAPER}: enabled.")
    skip_null_backward: bool = param(False, "Skip the backward pass of a micro-batch whose "
                                     "advantages are all 0 at the phase's first optimizer step "
                                     "(one process): the policy then equals the reference and "
                                     "the old policy, so the gradient is 0 by construction and "
                                     "only AdamW's weight decay (lr x weight_decay a step, "
                                     "1e-8) is skipped with it; the loss and its metrics are "
                                     "still computed. Off in the paper; the quickstart's 135M "
                                     "policies mostly get equal rewards within a group.")
    precision: str = param("bfloat16", f"Training precision. {PAPER}: bfloat16.",
                           choices=("float32", "bfloat16", "float16"))
    optimizer_offload: bool = param(False, "Keep AdamW's fp32 master weights and moments in "
                                    "CPU memory (ZeRO-Offload's layout in one process, as "
                                    "verl's FSDP optimizer offload): the GPU holds the weights in "
                                    "`precision` and fp32 gradient accumulators, 6 bytes a "
                                    "parameter instead of 16; the CPU 16. What lets the 8B "
                                    "shape train on one H200 (docs/SCALING.md). One process "
                                    "a run only.")
    global_batch_size: int = param(16, f"Global batch size in prompts per optimizer step "
                                   "(verl's ppo_mini_batch_size; each prompt brings "
                                   f"num_generations completions; split into "
                                   f"ppo_mini_batches steps when > 1). {PAPER}: proposer 16, "
                                   "solver 8.", gt=0, le=65536)
    micro_batch_size_update: int = param(2, "Completions per device per forward/backward of "
                                         f"the update (gradient accumulation fills the rest). "
                                         f"{PAPER}: 2. TRL's own log-prob passes (reference, "
                                         "old log-probs off-policy) use this size too.", gt=0,
                                         le=65536)
    micro_batch_size_experience: int = param(4, "Completions per forward of the no-grad pass "
                                             "that recomputes old log-probs before the update "
                                             "(verl's / EasyR1's compute_log_prob) for kl_cov / "
                                             "clip_cov with cov_old_logprobs: packed or "
                                             "recompute; grpo "
                                             f"does not read it. {PAPER}: 4 ('Micro-batch "
                                             "(experience)').", gt=0, le=65536)
    rollout_batch_size: int = param(16, "Prompts per rollout (generation) batch, a multiple of "
                                    "global_batch_size; one mask is drawn per rollout batch. "
                                    f"{PAPER}: proposer 16, solver 8.", gt=0,
                                    le=65536)
    num_generations: int = param(4, f"GRPO samples per prompt G. {PAPER}: proposer 4; the "
                                 "solver column is blank, vdlib uses 4.", ge=2,
                                 le=4096)
    temperature: float = param(1.0, f"Rollout sampling temperature. {PAPER}: 1.0.", gt=0,
                                le=100)
    top_p: float = param(0.99, f"Rollout nucleus top-p. {PAPER}: 0.99.", gt=0, le=1)
    top_k: int = param(0, "Rollout top-k; 0 disables it. The paper does not use top-k.", ge=0,
                      le=10**7)
    max_response_length: int = param(2048, f"Max new tokens per rollout. {PAPER}: 2048.", gt=0,
                                      le=10**7)
    max_steps: int = param(6, f"Max GRPO steps per phase. {PAPER}: proposer 6, solver 20.", gt=0,
                          le=10**9)
    epochs: int = param(10, f"Epochs per phase (upper bound; max_steps stops first). {PAPER}.",
                        gt=0, le=10**6)
    clip_eps_low: float = param(0.2, "PPO clip epsilon below 1 (TRL epsilon, verl "
                                "clip_ratio_low). Paper, Sec. 'Preliminaries: GRPO and R-Zero' "
                                "clips with one epsilon, clip(rho, 1-eps, 1+eps), and states no "
                                "value: 0.2, the default clip_ratio of verl (the trainer named in "
                                "Sec. 'Setup') and of TRL.", gt=0, lt=1)
    clip_eps_high: float = param(0.2, "PPO clip epsilon above 1 (TRL epsilon_high, verl "
                                 "clip_ratio_high). Paper, Sec. 'Preliminaries: GRPO and "
                                 "R-Zero': one symmetric epsilon, clip(rho, 1-eps, 1+eps), so "
                                 "the default equals clip_eps_low (0.2, verl's default). "
                                 "R-Zero's code clips the upper side higher (0.3, its actor "
                                 "config's clip_ratio_high, a DAPO-style clip-higher): set 0.3 "
                                 "for R-Zero's setting.", gt=0, le=100)
    rollout_is_correction: bool = param(False, "TRL's importance-sampling correction of "
                                        "rollouts sampled by vLLM (its sequence_mask mode, "
                                        "TRL's default). The paper trained with verl, which "
                                        "applies none: off by default; never applied under a "
                                        "mask (docs/vllm.md).")
    updates_per_batch: int = param(1, "PPO epochs: passes over each rollout batch (TRL "
                                   "num_iterations, verl ppo_epochs), each pass drawing no new "
                                   "rollouts, so > 1 draws fewer rollout batches within "
                                   f"max_steps. 1 ({RZERO}: one PPO epoch).", gt=0,
                                   le=1000)
    ppo_mini_batches: int = param(1, "Optimizer steps per global batch: each global_batch_size "
                                  "prompts' completions are split into this many mini-batches, "
                                  "one AdamW step each (verl's ppo_mini_batch_size below the "
                                  "rollout batch). The rollouts are unchanged (max_steps counts "
                                  "global batches); every step after a batch's first is "
                                  f"off-policy. {PAPER}: 1 (global = rollout batch size: one "
                                  "on-policy update per rollout batch; paper App. "
                                  "'Entropy-control baselines': KL-Cov and Clip-Cov use 'all "
                                  "other training settings identical'). The kl_cov_offpolicy "
                                  "arm sets 2.", gt=0, le=65536)
    loss_variant: str = param("grpo", "Policy loss: grpo, or the entropy-control baselines "
                              "kl_cov / clip_cov (paper App. 'Entropy-control baselines', "
                              "proposer only).", choices=("grpo", "kl_cov", "clip_cov"))
    kl_cov_k_frac: float = param(2e-3, "KL-Cov: fraction of tokens (top covariance) penalised, "
                                 "selected within each update micro-batch as verl does. Paper "
                                 "App. 'Entropy-control baselines': 2e-3.", gt=0, le=1)
    kl_cov_beta: float = param(1.0, "KL-Cov penalty coefficient. Paper: 1.", ge=0,
                                 le=1000)
    clip_cov_ratio: float = param(2e-4, "Clip-Cov: fraction of tokens whose gradient is cut. "
                                  "Paper: 2e-4.", gt=0, le=1)
    clip_cov_lb: float = param(1.0, "Clip-Cov covariance lower bound. Paper: 1.",
                                ge=-1e6, le=1e6)
    clip_cov_ub: float = param(5.0, "Clip-Cov covariance upper bound. Paper: 5.",
                                ge=-1e6, le=1e6)
    cov_old_logprobs: str = param("packed", "Old log-probs of kl_cov / clip_cov. packed: a "
                                  "separate no-grad forward of the policy over each rollout "
                                  "batch before its update, in micro_batch_size_experience "
                                  "chunks packed without padding, as the paper's system does "
                                  "(verl v0.4.1-v0.5.0 compute_log_prob with use_remove_padding; "
                                  "no on-policy shortcut before v0.6.0); it rounds otherwise "
                                  "than the padded update, so KL-Cov's |logp - old| term can "
                                  "have a gradient at one on-policy step per rollout batch (in "
                                  "bf16 autocast on a CPU it does; on the GPU: to be measured). "
                                  "recompute: "
                                  "the same pass padded like the update: bit-identical to it in "
                                  "bf16 (H200, 27 of 27 steps), so KL-Cov is inert (the "
                                  "kl_cov_inert arm). detach: the update's own log-probs, "
                                  "detached (exactly on-policy; KL-Cov's term is 0). "
                                  "docs/experiments.md, 'KL-Cov on-policy'. grpo does not read "
                                  "it.", choices=("packed", "recompute", "detach"))


def _solver_grpo() -> GRPOConfig:
    return GRPOConfig(global_batch_size=8, rollout_batch_size=8, max_steps=20)


def _transfer_grpo() -> GRPOConfig:
    """App. 'Curriculum-transfer training details': lr 1e-6, global batch 32, group 8, 3 epochs,
    max completion 1536 (prime-rl; its other settings are not stated: the solver column's)."""
    return GRPOConfig(global_batch_size=32, rollout_batch_size=32, num_generations=8,
                      max_response_length=1536, epochs=3, max_steps=1_000_000)


@dataclass
class VocabDropoutConfig:
    """The mask: retention probability, schedule over iterations, and where it applies."""

    alpha: float = param(0.75, f"Retention probability of each non-protected token. {PAPER}: "
                         "0.75 (arms: 0.85; baseline 1.0 = no mask). The adaptive schedule "
                         "starts here.", gt=0, le=1)
    schedule: str = param("fixed", "fixed alpha; linear anneal from alpha to alpha_final "
                          "over the iterations (paper App. 'Annealed masking schedule': "
                          "0.75 -> 1.0 over 5 iterations); or adaptive: alpha of the next "
                          "iteration set from the last one's valid fraction and diversity "
                          "(vocab_dropout.adaptive; vdlib's, not the paper's).",
                          choices=("fixed", "linear", "adaptive"))
    alpha_final: float = param(1.0, "Final alpha of the linear schedule.", gt=0, le=1)
    adaptive: AdaptiveScheduleConfig = field(
        default_factory=AdaptiveScheduleConfig,
        metadata={"help": "The adaptive schedule's settings (schedule: adaptive)."})
    phases: str = param("both", f"Where the mask applies: both (GRPO rollouts and curriculum "
                        f"generation, {SETUP}), train (rollouts only), gen (curriculum only), "
                        "none.", choices=("both", "train", "gen", "none"))
    format_strings: list[str] = param(["<question>", "</question>", "\\boxed{", "}"],
                                      "Strings whose tokens are protected (never masked); "
                                      "paper App. 'Vocabulary dropout implementation'.")
    extra_protected_ids: list[int] = param([], "Additional token ids always kept.", ge=0,
                                           le=10**7)
    width: str = param("vocab_size", "Ids the Bernoulli draw covers. vocab_size: ids below "
                       "tokenizer.vocab_size, as the paper's snippet (App. 'Vocabulary dropout "
                       "implementation', fig:code_diff: 'V = tokenizer.vocab_size'); added "
                       "tokens at or above it (Qwen's <|im_end|> and other specials) are then "
                       "never allowed unless protected (Algorithm 1: the mask is the draw "
                       "union F). len_tokenizer: every real id, added tokens kept with "
                       "probability alpha. Both give the same draw on the shared ids; padded "
                       "logits rows are always dropped.", choices=("vocab_size", "len_tokenizer"))


@dataclass
class ScoringConfig:
    """Self-consistency scoring, proposer reward, repetition penalty and solver target."""

    num_solver_samples: int = param(10, f"Solver answers per question M. {PAPER}: 10.",
                                     gt=0, le=10000)
    temperature: float = param(1.0, f"Solver sampling temperature when scoring. {RZERO}: 1.0.",
                               gt=0, le=100)
    top_p: float = param(0.99, "Solver top-p when scoring (vdlib: the rollout value).", gt=0,
                         le=1)
    top_k: int = param(0, "Solver top-k when scoring; 0 disables (R-Zero labels with 40).", ge=0,
                      le=10**7)
    max_new_tokens: int = param(2048, f"Max solver tokens when scoring. {PAPER}: 2048.", gt=0,
                                 le=10**7)
    tau_min: float = param(0.3, f"Difficulty window lower bound. {PAPER}: 0.3.", ge=0, le=1)
    tau_max: float = param(0.7, f"Difficulty window upper bound. {PAPER}: 0.7 (R-Zero's "
                           "shipped script: 0.8).", ge=0, le=1)
    proposer_reward_variant: str = param("paper", "paper: min(acc, 1-acc) inside the window, "
                                         "else 0; rzero: min(acc, 1-acc) with no window.",
                                         choices=("paper", "rzero"))
    parse_failure_reward: float = param(0.0, "Proposer reward for an unparseable rollout, "
                                        "with no repetition penalty on top. Paper Algorithm 1: "
                                        "0. R-Zero's code gives -1 minus the rollout's "
                                        "penalty (its empty question is a BLEU cluster of its "
                                        "own: -1 - 1/batch size); -1 here is that value without "
                                        "the penalty.", ge=-1000, le=1000)
    bleu_threshold: float = param(0.5, f"BLEU-distance threshold of the repetition-penalty "
                                  f"clustering. {PAPER}: 0.5.", gt=0, le=1)
    penalty_weight: float = param(1.0, "Weight lambda of the repetition penalty (R-Zero: 1).",
                                  ge=0, le=1000)
    penalty_scope: str = param("batch", "Which rollouts the repetition penalty clusters and "
                               "divides by. batch: every rollout of the batch, failed ones as "
                               "the empty question, penalty = |cluster| / batch size ("
                               f"{RZERO}: paper, Sec. 'Preliminaries: GRPO and R-Zero', says "
                               "only 'a penalty proportional to cluster size'). valid: the "
                               "parsed questions only, over their count "
                               "(larger penalties when fewer rollouts parse, as under a mask). "
                               "Failed rollouts get the failure reward either way (Algorithm 1).",
                               choices=("batch", "valid"))
    failed_extraction: str = param("never_group", "How the majority vote treats a solver "
                                   "answer with no boxed answer (a failed extraction), which "
                                   "always counts in acc's denominator M. never_group: it never "
                                   "forms a group (paper Algorithm 1: acc = 'fraction matching "
                                   "majority vote'; R-Zero's labelling intent). separate_group: "
                                   "the failures form one group, which can be the majority (then "
                                   "the majority answer is null), as in R-Zero's reward server, "
                                   "whose extractor returns the string 'None'. Applies to the "
                                   "proposer reward and the scoring stage (docs/experiments.md).",
                                   choices=("never_group", "separate_group"))
    solver_target: str = param("proposer", "Solver reward target: proposer (the proposer's "
                               f"stated answer, {SETUP}) or majority (R-Zero).",
                               choices=("proposer", "majority"))


@dataclass
class CurriculumConfig:
    """Curriculum generation by the trained proposer."""

    num_questions: int = param(8000, f"Questions K generated per iteration. {RZERO}: 8,000.",
                               gt=0, le=10**7)
    batch_size: int = param(64, "Prompts per generation batch; each batch draws a fresh mask "
                            f"({VDLIB} for the size).", gt=0, le=65536)
    temperature: float = param(1.0, f"Sampling temperature. {PAPER}: 1.0.", gt=0,
                                le=100)
    top_p: float = param(0.99, f"Top-p. {PAPER}: 0.99 (R-Zero generation: 0.95).", gt=0, le=1)
    top_k: int = param(0, "Top-k; 0 disables it.", ge=0, le=10**7)
    max_new_tokens: int = param(2048, f"Max new tokens per question. {PAPER}: 2048.", gt=0,
                                 le=10**7)


#: Every benchmark name a config may list: the single source of the names. The registry of
#: :mod:`vdlib.evaluation.benchmarks` registers exactly these (checked when it is imported).
@dataclass
class SinglePolicyConfig:
    """Vocabulary dropout outside co-evolution (paper App. 'Vocabulary dropout outside
    co-evolution', notebook 04): one GRPO policy on GSM8K with a binary correctness reward,
    trained with the ``solver`` section's GRPO settings and the ``vocab_dropout`` train mask."""

    dataset: str = param("gsm8k", "Training problems: gsm8k (Hub 'openai/gsm8k' train split, "
                         "the paper) or gsm_symbolic (reasoning-gym, offline).",
                         choices=("gsm8k", "gsm_symbolic"))
    train_examples: int | None = param(None, "Use the first N training problems; null = all.",
                                       gt=0, le=10**9)
    checkpoint_every: int = param(0, "Save a checkpoint every N GRPO steps (0 = none); a run "
                                  "started again goes on from the last one (weights, optimizer, "
                                  "RNG, logs; the rollout engine's sampler starts afresh).",
                                  ge=0, le=10**9)


@dataclass
class WarmStartConfig:
    """Tiny-profile-only format warm-start of the base model (off in the paper profile).

    SmolLM2-135M rarely writes the ``<question>...</question>`` + ``\\boxed{}`` format at
    temperature 1.0 (0/16 in the quickstart; 3/16 with a two-shot prompt) and rarely reaches a
    boxed answer as a solver, so GRPO would see almost only failed rollouts. ``sft`` fine-tunes
    the base briefly on short reasoning-gym ``gsm_symbolic`` items in both formats, once per
    machine (cached), before iteration 1 (vdlib.loop.warm_start).
    """

    mode: str = param("none", "none, or sft (brief supervised warm-start of the base model on "
                      "short gsm_symbolic items in the proposer and solver formats; tiny "
                      "profile only).", choices=("none", "sft"))
    examples: int = param(64, "Training examples for the SFT warm-start.", gt=0,
                          le=10**7)
    steps: int = param(24, "Optimizer steps of the SFT warm-start (24 x 4 examples, half "
                       "proposer, half solver: then all of SmolLM2's proposer outputs parse at "
                       "temperature 1.0 without a mask and 75% with alpha 0.75, measured with "
                       "every weight trained at learning_rate 2e-4).",
                       gt=0, le=10**7)
    batch_size: int = param(4, "Batch size of the SFT warm-start.", gt=0, le=65536)
    learning_rate: float = param(2e-4, "Learning rate of the SFT warm-start.", gt=0,
                                   le=1)
    train_layers: int = param(0, "Train only the top N decoder layers (all of a model with "
                              "fewer) and the final norm in the SFT warm-start, the embeddings "
                              "(tied to SmolLM2's output layer) and lower layers frozen: 2.5x "
                              "faster a step on 2 CPU cores at N = 6 of 30 "
                              "(benchmarks/warm_start_speed.py); 0 trains every weight.",
                              ge=0, le=10**4)


@dataclass
class MetricsConfig:
    """Per-iteration diversity metrics (vdlib.metrics)."""

    embedder: str = param("openai:text-embedding-3-small", "Embedder for Vendi, novelty and "
                          "cosine distance: minilm (packaged, offline), openai:<model> (key from "
                          "OPENAI_API_KEY), hf:<id>, or none. Paper App. 'Vendi score "
                          "computation': text-embedding-3-small.")
    novelty_threshold: float = param(0.3, "Cosine distance above which a question is novel. "
                                     f"{SETUP}: 0.3.", ge=0, le=2)
    extra: list[str] = param([], "Costly extra metrics: nli_diversity, "
                             "nli_diversity_unidirectional, curriculum_nli_diversity, "
                             "epiplexity (each needs its model).")
    semantic_embedder: str = param("qwen3-embedding-4b", "Embedder of tab:nli_diversity's "
                                   "semantic column (mean pairwise cosine distance of the "
                                   "curriculum-filtered sets, notebook 03); names as for "
                                   "embedder. Paper, App. 'Cumulative embedding diversity': "
                                   "Qwen3-Embedding-4B.")
    swap_embedder: str = param("minilm", "Encoder-swap robustness check of that column (paper, "
                               "App. 'Cumulative embedding diversity': 'This rank order holds "
                               "under an encoder swap (all-MiniLM-L6-v2)'); none = skip.")
    nli_model: str = param("deberta-v3-large-mnli-fever-anli-ling-wanli", "NLI classifier of "
                           "tab:nli_diversity's logical column and of the well-posed subset's "
                           "NLI gap (paper, App. 'Cumulative embedding diversity': "
                           "DeBERTa-v3-large fine-tuned on MNLI/FEVER/ANLI/LingNLI/WANLI); "
                           "tiny-random = a seeded random offline stand-in (tiny profile).")
    nli_unidirectional: bool = param(True, "Also score NLI unidirectionally (premise before "
                                     "hypothesis), the robustness check of paper, App. "
                                     "'Cumulative embedding diversity'.")
    nli_max_pairs: int | None = param(20000, "NLI pairs scored per set (a seeded uniform "
                                      f"sample); null = all n(n-1). {VDLIB}.", gt=0,
                                      le=10**9)
    bootstrap_resamples: int = param(100, "Bootstrap resamples of tab:nli_diversity's standard "
                                     "errors. Paper, App. 'Cumulative embedding diversity' "
                                     "(table caption): 100.", gt=1,
                                     le=10**6)
    bootstrap_unit: str = param("pairs", "What the bootstrap resamples: pairs (the scored "
                                "pairs; consistent with the '<0.001' semantic SEs the paper "
                                "prints for tab:nli_diversity) or "
                                f"questions (whole items, pairs weighted by counts). {VDLIB}.",
                                choices=("pairs", "questions"))


@dataclass
class ExperimentConfig:
    """One experiment (one arm of one notebook). Nested sections hold the hyperparameters."""

    experiment: str = param("quickstart", "Experiment name; artifacts go to "
                            "<output_dir>/<experiment>/<run_id>/. A name: letters, digits, "
                            "_ . + -, not starting with '.' or '-', at most 128 bytes, not a "
                            "name vdlib uses for its own folders (vdlib.config.names).")
    profile: str = param("paper", "Size preset merged under your values: tiny (CPU, packaged "
                         "SmolLM2), gpu (one GPU), paper (the paper's settings); the presets "
                         "are vdlib.config.PROFILE_PRESETS.")
    seed: int = param(0, "Run seed: sampling, masks (derived per iteration/phase/step) and "
                      "training.", ge=0, le=2**32 - 1)
    seeds: list[int] = param([0, 1, 2], f"Seeds of the independent runs per configuration. "
                             f"{SETUP}: 3. At most 100 seeds.", ge=0, le=2**32 - 1)
    iterations: int = param(5, f"Co-evolution iterations T. {SETUP}: 5.", gt=0,
                           le=1000)
    output_dir: str = param("outputs", "Root folder of run artifacts (gitignored).")
    run_id: str | None = param(None, "Run folder name (the rule of experiment names); null = "
                               "derived from experiment and seed.")
    arms: list[str] = param([], "Arms a notebook compares (vdlib.loop.arms: baseline, vd85, vd75, "
                            "train_only, gen_only, anneal, kl_cov, kl_cov_offpolicy, clip_cov, "
                            "vd85_gen, vd95, vd75_fail_neg, baseline_fail_neg); empty = this "
                            "config alone.")
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "Models."})
    proposer: GRPOConfig = field(default_factory=GRPOConfig,
                                 metadata={"help": "Proposer GRPO (paper table, proposer column)."})
    solver: GRPOConfig = field(default_factory=_solver_grpo,
                               metadata={"help": "Solver GRPO (paper table, solver column)."})
    vocab_dropout: VocabDropoutConfig = field(default_factory=VocabDropoutConfig,
                                              metadata={"help": "Vocabulary dropout."})
    scoring: ScoringConfig = field(default_factory=ScoringConfig,
                                   metadata={"help": "Scoring and rewards."})
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig,
                                         metadata={"help": "Curriculum generation."})
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig,
                                         metadata={"help": "Evaluation protocol."})
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig,
                                        metadata={"help": "Tiny-profile format warm-start."})
    metrics: MetricsConfig = field(default_factory=MetricsConfig,
                                   metadata={"help": "Per-iteration metrics."})
    verification: VerificationConfig = field(default_factory=VerificationConfig,
                                             metadata={"help": "External-LLM verification."})
    transfer: GRPOConfig = field(default_factory=_transfer_grpo,
                                 metadata={"help": "Curriculum-transfer GRPO of a fresh model."})
    single_policy: SinglePolicyConfig = field(default_factory=SinglePolicyConfig,
                                              metadata={"help": "Single-policy GRPO (04)."})
    engine: EngineConfig = field(default_factory=EngineConfig,
                                 metadata={"help": "Generation engine of every sampling stage."})
    tracking: str = param("none", "Experiment tracker of the loop's per-iteration numbers and "
                          "TRL's training logs (vdlib.utils.tracking): none, tensorboard, wandb "
                          "(offline unless WANDB_MODE says otherwise), mlflow (a local store "
                          "unless MLFLOW_TRACKING_URI is set), trackio (local). Needs the "
                          "'tracking' extra.", choices=TRACKER_NAMES)
    launcher: LauncherConfig = field(default_factory=LauncherConfig,
                                     metadata={"help": "How `vdlib grid` runs a grid."})
    reference_experiments: list[str] = param([], "Experiment folders (under output_dir) whose "
                                             "runs a notebook shows beside its own, e.g. the "
                                             "symmetric runs of 01 in 06.")
    curricula_dir: str = param(COMMITTED_CURRICULA_DIR, "The folder of `vdlib export` outputs "
                               "(<run>/README.md, <run>/data/) whose curricula notebook 01 shows "
                               "per arm and iteration: committed = the repository's gpu-small "
                               "main-table exports (docs/results/curricula/gpu_small_main; the "
                               "section is skipped where vdlib runs without the repository), "
                               "'' = skip the section, else a folder that exists.")

    @property
    def solver_model(self) -> str:
        """The solver's base model (the proposer's when ``model.solver`` is null)."""
        return self.model.solver or self.model.proposer


