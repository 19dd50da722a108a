"""The config's evaluation sections: the one list of known benchmarks (``KNOWN_BENCHMARKS``),
``evaluation`` (benchmarks, runs, sampling) and ``verification`` (answer checking). Re-exported
by :mod:`vdlib.config.config_sections` and :mod:`vdlib.config`."""

from __future__ import annotations

from dataclasses import dataclass

from vdlib.config.config_fields import SETUP, VDLIB, param

__all__ = ["KNOWN_BENCHMARKS", "EvaluationConfig", "VerificationConfig"]

KNOWN_BENCHMARKS = ("gsm8k", "math500", "amc23", "olympiadbench", "aime24", "aime25", "minerva",
                    "gsm_symbolic", "champ", "bbh", "medqa", "supergpqa", "winogrande")


@dataclass
class EvaluationConfig:
    """Benchmark evaluation protocol (paper, Sec. 'Standard benchmarks')."""

    benchmarks: list[str] = param(["gsm8k", "math500", "amc23", "olympiadbench", "aime24",
                                   "aime25"], f"Benchmarks. {SETUP} (Minerva added for the "
                                  "annealing and transfer experiments). Known: "
                                  f"{', '.join(KNOWN_BENCHMARKS)}.")
    runs: int = param(3, f"Independent runs (seeds); pass@1 = mean over runs, +- s.e. {SETUP}.",
                      gt=0, le=1000)
    temperature: float = param(0.7, f"Sampling temperature. {SETUP}: 0.7.", ge=0,
                                le=100)
    top_p: float = param(1.0, "Top-p (the paper states none: 1.0).", gt=0, le=1)
    max_context: int = param(4096, f"Max context (prompt + answer) tokens. {SETUP}: 4096.", gt=0,
                            le=10**7)
    data_dir: str | None = param(None, "Local benchmark folder (<dir>/<name>/test.jsonl); "
                                 "null = the Hugging Face Hub.")
    limit: int | None = param(None, "Evaluate only the first N items per benchmark (smoke "
                              "runs); null = all.", gt=0, le=10**9)
    max_new_tokens: int | None = param(None, "Cap on new tokens per answer; null = the paper's "
                                       "max_context - prompt length.", gt=0,
                                       le=10**7)
    batch_size: int = param(16, "Prompts per generate call, with any engine (the prompts are "
                            "sorted by length; each call samples with a seed derived from its "
                            "index, so this choice changes the samples).", gt=0,
                            le=65536)
    se_ddof: int = param(0, "Spread of every pass@1 mean +- SE (the evaluation tables; vdlib "
                         "results reads it from a results file): SE = std(ddof) / sqrt(k). 0 "
                         "(population SD) reproduces the paper's printed cells (paper, Sec. "
                         "'Standard benchmarks': mean +- SE over 3 runs; e.g. AIME'24 12.2 +- "
                         "0.9 = 3, 4, 4 of 30 correct, which ddof 1 prints as +- 1.1); 1 = "
                         "sample SD (Miller 2024's estimator). Cells the paper prints without "
                         "SE (loop metrics, figures) always use the sample SD.", choices=(0, 1))
    per_seed: str = param("first_run", "With several training seeds, what each seed adds to a "
                          "cell: first_run = its first evaluation run (paper, Sec. 'Standard "
                          "benchmarks': every cell is 3 single evaluations; its AIME/AMC means "
                          "are multiples of 1/90 and 1/120), mean = the mean of its runs.",
                          choices=("first_run", "mean"))
    single_eval_runs: int = param(1, "Evaluation runs per model for the tables the paper "
                                  "prints as single evaluations (paper, tab:curriculum_transfer "
                                  "and tab:vanilla_grpo: cells are multiples of 1/30, 1/40, "
                                  "1/500, no SE): notebooks 03 and 04.", gt=0,
                                  le=1000)
    olympiadbench_subset: str = param("maths_physics_en", "OlympiadBench items: "
                                      "maths_physics_en = English text-only open-ended maths "
                                      "(674) + physics (236) = 910 (paper, App. "
                                      "'tab:benchmarks': 910); maths_en = the 674/675 maths "
                                      "subset of R-Zero's list (zwhe99/simplerl-OlympiadBench).",
                                      choices=("maths_physics_en", "maths_en"))
    ood_benchmarks: list[str] = param([], "Out-of-domain benchmarks of tab:ood for notebook "
                                      "01's base, baseline and vd75 solvers; [] = none. Paper, "
                                      "Sec. 'Out-of-domain transfer': bbh, medqa, supergpqa, "
                                      "winogrande on the 8B solvers only (main_table@8b).")
    ood_data_dir: str | None = param(None, "Local folder of the out-of-domain benchmarks "
                                     "(<dir>/<name>/test.jsonl); null = the Hub; 'samples' = "
                                     "vdlib's packaged hand-written items (offline smoke runs).")
    judge: bool = param(False, f"Also grade each completion with the verification section's "
                        f"correctness model and show the judged score beside math-verify's; "
                        f"the judge's prompt is saved with the scores. {VDLIB}.")


@dataclass
class VerificationConfig:
    """External-LLM judging (vdlib.evaluation.verification): correctness, well-posedness, transfer
    filter."""

    backend: str = param("openai", "openai: any OpenAI-compatible server (key from "
                         "OPENAI_API_KEY only); local: a vdlib model answers on this machine "
                         "(offline stand-in for the tiny profile, not the paper's judge).",
                         choices=("openai", "local"))
    correctness_model: str = param("gpt-4.1-mini", "Judge of proposer answer correctness and "
                                   "well-posedness (paper App. 'Proposer answer correctness').")
    transfer_model: str = param("gpt-5-mini", "Curriculum-transfer filter (paper App. "
                                "'Curriculum-transfer training details': greedy, one attempt).")
    base_url: str | None = param(None, "OpenAI-compatible base URL; null = $OPENAI_BASE_URL or "
                                 "OpenAI's API.")
    max_calls: int | None = param(None, "Budget: requests per verifier (null = no cap).", gt=0,
                                 le=10**12)
    max_tokens_budget: int | None = param(None, "Budget: reported tokens per verifier (null = "
                                          "no cap).", gt=0, le=10**15)
    max_concurrency: int = param(8, "Requests in flight.", gt=0, le=4096)
    dry_run: bool = param(False, "Count the requests and tokens a run would send; send none.")
    max_new_tokens: int = param(512, "local backend: max new tokens per reply.", gt=0,
                                 le=10**7)
    transfer_source: str = param("curriculum", "What the transfer filter verifies (notebook "
                                 "03): curriculum = the iteration's valid questions inside "
                                 "[tau_min, tau_max], the set the solver trained on; valid = "
                                 "every valid question. Paper, Sec. 'Curriculum quality in "
                                 "isolation': verification keeps 'roughly 20-31% of each arm', "
                                 "the fractions of the band counts of tab:wellposed (163/510, "
                                 "325/1,408).", choices=("curriculum", "valid"))
    transfer_experiment: str | None = param(None, "The experiment (under output_dir) whose "
                                            "runs notebook 03 verifies and transfers; null = "
                                            "the first of reference_experiments. Paper, Sec. "
                                            "'Curriculum quality in isolation': the 8B runs.")
