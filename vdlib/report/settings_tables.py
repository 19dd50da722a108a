"""The paper's settings tables beside the settings a notebook ran with.

The paper prints its protocol in five tables that hold no results: ``tab:training_hypers``
(GRPO), ``tab:klcov_hypers`` (the entropy-control baselines), ``tab:vendi_hypers``,
``tab:epiplexity_hypers`` and ``tab:benchmarks``. :func:`settings_table` gives, for the first
four, one row per printed setting with the paper's value and ours (the resolved config, or the
metric function's default where the setting is not a config key), and one row per protocol
switch (a named choice where the paper is silent or vdlib deviates: issue 16's rule) with its
paper-literal default. Every notebook writes it as ``settings.{md,tex,csv}``
(:meth:`vdlib.report.notebook.Report.finish`), so each report shows the settings it used.
:func:`benchmarks_table` is ``tab:benchmarks``: items per benchmark, ours (from an evaluation
summary, and counted from the data for the paper's benchmarks it did not evaluate, e.g. Minerva)
beside the paper's (notebook 01).

>>> from vdlib.config.experiment import load_params
>>> t = settings_table(load_params({}))
>>> row = t[(t.table == "tab:training_hypers") & (t.key == "solver.global_batch_size")].iloc[0]
>>> row.setting, row.paper, row.ours, bool(row.same)
('Global batch size (solver)', '8', '8', True)
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any

import pandas as pd

from vdlib.config.experiment import ExperimentConfig, load_params, to_dict

__all__ = ["TRAINING_ROWS", "KLCOV_ROWS", "SWITCHES", "PAPER_BENCHMARK_ITEMS",
           "BENCHMARK_COLUMNS", "settings_table", "benchmarks_table"]

logger = logging.getLogger(__name__)

ROLES = ("proposer", "solver")

#: tab:training_hypers: (paper row, {role: paper value}, config key with {role}); a key of None
#: is a setting vdlib fixes (its value given in place of the key, after "=").
TRAINING_ROWS: list[tuple[str, dict[str, str], str]] = [
    ("Learning rate", {"proposer": "1e-06", "solver": "1e-06"}, "{role}.learning_rate"),
    ("Weight decay", {"proposer": "0.01", "solver": "0.01"}, "{role}.weight_decay"),
    ("LR warmup", {"proposer": "0", "solver": "0"}, "{role}.warmup_steps"),
    ("Max grad norm", {"proposer": "1.0", "solver": "1.0"}, "{role}.max_grad_norm"),
    ("KL penalty beta (low-variance KL)", {"proposer": "0.01", "solver": "0.01"},
     "{role}.kl_beta"),
    ("Gradient checkpointing", {"proposer": "True", "solver": "True"},
     "{role}.gradient_checkpointing"),
    ("Precision", {"proposer": "bfloat16", "solver": "bfloat16"}, "{role}.precision"),
    ("Global batch size", {"proposer": "16", "solver": "8"}, "{role}.global_batch_size"),
    ("Micro-batch (update)", {"proposer": "2", "solver": "2"}, "{role}.micro_batch_size_update"),
    ("Rollout batch size", {"proposer": "16", "solver": "8"}, "{role}.rollout_batch_size"),
    ("GRPO samples per prompt G", {"proposer": "4"}, "{role}.num_generations"),
    ("Temperature", {"proposer": "1.0", "solver": "1.0"}, "{role}.temperature"),
    ("Top-p", {"proposer": "0.99", "solver": "0.99"}, "{role}.top_p"),
    ("Max response length", {"proposer": "2048", "solver": "2048"}, "{role}.max_response_length"),
    ("Max steps per phase", {"proposer": "6", "solver": "20"}, "{role}.max_steps"),
    ("Epochs per phase", {"proposer": "10", "solver": "10"}, "{role}.epochs"),
    ("Self-consistency samples M", {"proposer": "10"}, "scoring.num_solver_samples"),
    ("Co-evolution iterations", {"proposer": "5"}, "iterations"),
    ("Difficulty window tau_min", {"proposer": "0.3"}, "scoring.tau_min"),
    ("Difficulty window tau_max", {"proposer": "0.7"}, "scoring.tau_max"),
    ("Vocab dropout alpha", {"proposer": "0.75"}, "vocab_dropout.alpha"),
    ("BLEU rep. penalty tau_BLEU", {"proposer": "0.5"}, "scoring.bleu_threshold"),
]

#: tab:klcov_hypers: (paper row, paper value, config key), all on the proposer
KLCOV_ROWS: list[tuple[str, str, str]] = [
    ("KL-Cov k (top-covariance token fraction)", "0.002", "proposer.kl_cov_k_frac"),
    ("KL-Cov beta (KL coefficient on selected tokens)", "1.0", "proposer.kl_cov_beta"),
    ("Clip-Cov rho (masked-token fraction)", "0.0002", "proposer.clip_cov_ratio"),
    ("Clip-Cov omega_low", "1.0", "proposer.clip_cov_lb"),
    ("Clip-Cov omega_high", "5.0", "proposer.clip_cov_ub"),
]

#: protocol switches (named choices where the paper is silent or vdlib could deviate), whose
#: ``paper`` profile default is the paper-literal setting (tests/test_fidelity_*.py pin them)
SWITCHES = ("vocab_dropout.width", "scoring.penalty_scope", "proposer.clip_eps_low",
            "proposer.clip_eps_high", "proposer.ppo_mini_batches", "proposer.updates_per_batch",
            "proposer.rollout_is_correction", "solver.rollout_is_correction",
            "scoring.parse_failure_reward", "scoring.failed_extraction",
            "verification.transfer_source",
            "evaluation.se_ddof", "evaluation.per_seed",
            "evaluation.single_eval_runs", "evaluation.olympiadbench_subset",
            "evaluation.judge", "metrics.bootstrap_unit", "metrics.semantic_embedder",
            "metrics.nli_unidirectional")

#: tab:benchmarks: items per benchmark as the paper prints them
PAPER_BENCHMARK_ITEMS = {"gsm8k": 1319, "math500": 500, "amc23": 40, "olympiadbench": 910,
                         "aime24": 30, "aime25": 30, "minerva": 272}


def _text(value: Any) -> str:
    if isinstance(value, float):
        return repr(value) if value < 1e-3 else f"{value:g}" if value != int(value) else \
            f"{value:.1f}"
    return str(value)


def _lookup(flat: Mapping[str, Any], key: str) -> Any:
    return flat.get(key, "(not a setting)")


def _flat(cfg: ExperimentConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            out[prefix] = node

    walk("", to_dict(cfg))
    return out


def _function_rows(label: str, func: Any, rows: list[tuple[str, str, str]]) -> list[dict]:
    """Rows for settings that are a metric function's defaults (not config keys)."""
    defaults = {k: p.default for k, p in inspect.signature(func).parameters.items()}
    name = f"{func.__module__}.{func.__qualname__}"
    return [{"table": label, "setting": setting, "key": f"{name}({arg})", "paper": paper,
             "ours": _text(defaults[arg])} for setting, paper, arg in rows]


def settings_table(cfg: ExperimentConfig) -> pd.DataFrame:
    """The paper's settings tables and the protocol switches beside ``cfg``'s values: columns
    ``table, setting, key, paper, ours, same`` (``paper`` for a switch is the ``paper``
    profile's default, i.e. the paper-literal choice)."""
    from vdlib.metrics.diversity import vendi_score
    from vdlib.metrics.epiplexity import epiplexity

    ours, paper_cfg = _flat(cfg), _flat(load_params({}))
    rows: list[dict[str, Any]] = []
    for setting, values, pattern in TRAINING_ROWS:
        for role, paper in values.items():
            key = pattern.format(role=role)
            label = f"{setting} ({role})" if "{role}" in pattern else setting
            rows.append({"table": "tab:training_hypers", "setting": label, "key": key,
                         "paper": paper, "ours": _text(_lookup(ours, key))})
    rows += [{"table": "tab:klcov_hypers", "setting": s, "key": k, "paper": p,
              "ours": _text(_lookup(ours, k))} for s, p, k in KLCOV_ROWS]
    rows.append({"table": "tab:vendi_hypers", "setting": "Embedding model",
                 "key": "metrics.embedder", "paper": "text-embedding-3-small",
                 "ours": _text(ours["metrics.embedder"])})
    rows += _function_rows("tab:vendi_hypers", vendi_score, [
        ("Max samples (eigendecomp.)", "5000", "max_samples"),
        ("Subsampling seed", "42", "seed"), ("Eigenvalue threshold", "1e-12", "eig_threshold")])
    rows += _function_rows("tab:epiplexity_hypers", epiplexity, [
        ("LoRA rank r", "16", "lora_r"), ("LoRA alpha", "32", "lora_alpha"),
        ("LoRA dropout", "0.05", "lora_dropout"), ("Max sequence length", "512", "max_length"),
        ("Batch size", "64", "batch_size"), ("Learning rate", "0.0001", "lr"),
        ("Max epochs", "20", "max_epochs")])
    rows += [{"table": "protocol switch", "setting": key.rsplit(".", 1)[-1], "key": key,
              "paper": _text(paper_cfg[key]), "ours": _text(ours[key])}
             for key in SWITCHES if key in paper_cfg]
    frame = pd.DataFrame(rows, columns=["table", "setting", "key", "paper", "ours"])
    frame["same"] = [_same(p, o) for p, o in zip(frame["paper"], frame["ours"], strict=True)]
    return frame


def _same(paper: str, ours: str) -> bool:
    try:
        return float(paper) == float(ours)
    except ValueError:  # an embedder's registry prefix (openai:<model>) is not part of its name
        return paper.strip().lower() == ours.strip().lower().removeprefix("openai:")


#: the columns of :func:`benchmarks_table`
BENCHMARK_COLUMNS = ["benchmark", "items (ours)", "items (paper)", "evaluated"]


def _count_items(name: str, ev: Any) -> int | None:
    """Items of benchmark ``name`` under the evaluation section ``ev`` (its data folder, limit
    and OlympiadBench subset), or None where its data cannot be read here."""
    from vdlib.evaluation import BenchmarkUnavailableError, load_benchmark

    try:
        return len(load_benchmark(name, ev.data_dir, ev.limit,
                                  olympiadbench_subset=ev.olympiadbench_subset))
    except (BenchmarkUnavailableError, OSError, ImportError, ValueError) as e:
        logger.warning("tab:benchmarks: %s not counted (%s)", name, e)
        return None


def benchmarks_table(summary: Any, evaluation: Any = None) -> pd.DataFrame:
    """``tab:benchmarks``: one row per benchmark of an :class:`vdlib.evaluation.EvalSummary`,
    its items (after ``evaluation.limit`` and the OlympiadBench subset) beside the paper's
    count, and, with ``evaluation`` (a config's evaluation section), one row per other benchmark
    of the paper's table, counted from its data without evaluating it (blank where the data
    cannot be read here: the Hub under ``HF_HUB_OFFLINE``, no file in ``data_dir``). Notebook 01
    evaluates the six benchmarks of ``tab:vanilla_eval`` and counts Minerva, which the paper
    lists under "Additional benchmarks (annealing experiments)" and evaluates in 03, 04 and 05.
    Column ``evaluated``: whether ``summary`` holds the benchmark."""
    rows = [{"benchmark": name, "items (ours)": result.n,
             "items (paper)": PAPER_BENCHMARK_ITEMS.get(name), "evaluated": True}
            for name, result in summary.results.items()]
    if evaluation is not None:
        rows += [{"benchmark": name, "items (ours)": _count_items(name, evaluation),
                  "items (paper)": items, "evaluated": False}
                 for name, items in PAPER_BENCHMARK_ITEMS.items() if name not in summary.results]
    frame = pd.DataFrame(rows, columns=BENCHMARK_COLUMNS)
    frame["items (ours)"] = frame["items (ours)"].astype("Int64")
    return frame
