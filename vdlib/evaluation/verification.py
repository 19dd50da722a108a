r"""External-LLM verification of a run's questions: the paper's three judging tasks.

Each task is one chat completion per question, sent through a
:class:`~vdlib.evaluation.verifier.Verifier` (cached, retried, budgeted; the key only from
``$OPENAI_API_KEY``: :mod:`vdlib.evaluation.verifier`, :mod:`vdlib.utils.openai_client`) or its
offline stand-in :class:`~vdlib.evaluation.verifier.LocalVerifier`; :func:`make_verifier` picks one
from a :class:`vdlib.config.experiment.VerificationConfig`.

- **proposer answer correctness** (App. "Proposer answer correctness"; paper model
  ``gpt-4.1-mini``): the verifier solves each problem on its own (the evaluation prompt of
  :mod:`vdlib.method.prompts`, last ``\boxed{}``) and the proposer's answer counts as correct when
  ``is_equivalent(proposer answer, verifier answer)`` (:meth:`Verifier.check_answers`,
  :func:`proposer_correctness`);
- **well-posed / ill-posed labelling** (App. "Curriculum diversity controlling for
  correctness"; same ``gpt-4.1-mini`` verifier): :meth:`Verifier.label_well_posed` asks for a
  JSON verdict and :func:`~vdlib.evaluation.judging.parse_well_posed` reads it (or a boxed verdict)
  back;
- **curriculum-transfer filter** (App. "Curriculum-transfer training details"; paper model
  ``gpt-5-mini``, greedy decoding, a single attempt): :func:`build_transfer_dataset` keeps a
  question when math-verify agrees that the verifier's answer equals the proposer's. What it
  verifies (:data:`TRANSFER_SOURCES`): ``curriculum`` (the default, the paper) = the iteration's
  valid questions inside the difficulty band [tau_min, tau_max] (the set the solver trained
  on, :func:`vdlib.method.curriculum.filter_curriculum`); ``valid`` = every valid question.

The judges, the prompt and the verdict parser live in :mod:`vdlib.evaluation.judging`, the client in
:mod:`vdlib.evaluation.verifier`; their public names are importable from here too. Where the files
go: :mod:`vdlib.config.layout`.

>>> parse_well_posed('Missing the rate. {"well_posed": false}')
False
>>> estimate_tokens([{"role": "user", "content": "x" * 9}])
3
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.evaluation.judging import (
    CORRECTNESS_MODEL,
    TRANSFER_MODEL,
    WELL_POSED_MODEL,
    WELL_POSED_PROMPT,
    parse_well_posed,
)
from vdlib.evaluation.verifier import (
    BudgetExceededError,
    LocalVerifier,
    VerificationRequestError,
    Verifier,
    VerifierUsage,
    estimate_tokens,
)
from vdlib.method.curriculum import filter_curriculum
from vdlib.utils.artifacts import atomic_write_json, read_jsonl, write_jsonl
from vdlib.utils.openai_client import MissingAPIKeyError

__all__ = ["Verifier", "LocalVerifier", "make_verifier", "VerifierUsage", "BudgetExceededError",
           "VerificationRequestError",
           "MissingAPIKeyError", "CORRECTNESS_MODEL", "WELL_POSED_MODEL", "TRANSFER_MODEL",
           "TRANSFER_TRAINING", "WELL_POSED_PROMPT", "parse_well_posed", "estimate_tokens",
           "proposer_correctness", "transfer_filter", "build_transfer_dataset",
           "transfer_candidates", "TRANSFER_SOURCES"]

logger = logging.getLogger(__name__)

#: The paper's curriculum-transfer training (prime-rl GRPO of Qwen3-4B-Base on the verified set).
TRANSFER_TRAINING = {"model": "Qwen/Qwen3-4B-Base", "epochs": 3, "learning_rate": 1e-6,
                     "global_batch_size": 32, "group_size": 8, "max_seq_length": 2048,
                     "max_completion_length": 1536}

#: What the transfer filter verifies: the band-filtered curriculum (the paper) or every valid
#: question (vdlib before issue 16).
TRANSFER_SOURCES = ("curriculum", "valid")


def make_verifier(cfg: Any, role: str = "correctness", cache_dir: str | None = None,
                  device: str = "cpu", engine: Any = None) -> Verifier:
    """The verifier a :class:`vdlib.config.experiment.VerificationConfig` describes, for ``role``
    ``correctness`` (answer correctness and well-posedness) or ``transfer`` (the transfer
    filter, greedy). ``engine`` (an EngineConfig) is the local backend's engine setting."""
    if role not in ("correctness", "transfer"):
        raise ValueError(f"role = {role!r}; allowed: correctness, transfer")
    model = cfg.correctness_model if role == "correctness" else cfg.transfer_model
    common = {"max_calls": cfg.max_calls, "max_tokens_budget": cfg.max_tokens_budget,
              "dry_run": cfg.dry_run, "cache_dir": cache_dir}
    if cfg.backend == "local":
        return LocalVerifier(model, max_new_tokens=cfg.max_new_tokens, device=device,
                             engine=engine, **common)
    # gpt-5-mini (a reasoning model) accepts only its default temperature
    temperature = None if model.startswith("gpt-5") else 0.0
    return Verifier(model, base_url=cfg.base_url, max_concurrency=cfg.max_concurrency,
                    temperature=temperature, **common)


# ---------------------------------------------------------------------- run-level helpers


def _questions_path(run_dir: Path, iteration: int) -> Path:
    return layout.iteration_dir(run_dir, iteration) / layout.QUESTIONS_FILE


def _valid_questions(run_dir: Path, iteration: int) -> list[dict[str, Any]]:
    path = _questions_path(run_dir, iteration)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (has iteration {iteration} been scored?)")
    return [q for q in read_jsonl(path)
            if q.get("valid") and q.get("question") and q.get("answer") is not None]


def proposer_correctness(run_dir: str | os.PathLike, verifier: Verifier,
                         iterations: Sequence[int] | None = None) -> dict[int, float | None]:
    """Fraction of valid questions whose proposer answer the verifier confirms, per iteration
    (paper App. "Proposer answer correctness"; None for an iteration with no valid question).
    Writes ``<run_dir>/verification/proposer_correctness.json`` and the judged records of each
    iteration to ``verification/iter_<t>_correctness.jsonl``."""
    run_dir = Path(run_dir)
    if iterations is None:
        iterations = [t for t, _ in layout.iteration_dirs(run_dir, layout.QUESTIONS_FILE)]
    out: dict[int, float | None] = {}
    for t in iterations:
        checked = verifier.check_answers(_valid_questions(run_dir, t))
        if not verifier.dry_run:
            write_jsonl(layout.verification_path(run_dir, t), checked)
        out[t] = sum(r["correct"] for r in checked) / len(checked) if checked else None
    if not verifier.dry_run:
        atomic_write_json(layout.correctness_summary_path(run_dir),
                          {"model": verifier.model, "correctness": out,
                           "usage": verifier.usage.as_dict()})
    return out


def transfer_filter(records: Sequence[dict[str, Any]], verifier: Verifier
                    ) -> list[dict[str, Any]]:
    """The records whose proposer answer the verifier reproduces (paper: gpt-5-mini, greedy,
    one attempt, kept when math-verify agrees), as ``{question, answer, verifier_answer, acc}``
    with ``answer`` the proposer's (the solver phase's target)."""
    return [{"question": r["question"], "answer": r.get("proposer_answer", r.get("answer")),
             "verifier_answer": r["verifier_answer"], "acc": r.get("acc")}
            for r in verifier.check_answers(records) if r["correct"]]


def transfer_candidates(run_dir: str | os.PathLike, iteration: int, source: str = "curriculum",
                        band: tuple[float, float] = (0.3, 0.7)) -> list[dict[str, Any]]:
    """The questions of ``iter_<iteration>/questions.jsonl`` the transfer filter verifies.

    ``source="curriculum"`` (the paper, Sec. "Curriculum quality in isolation": the
    "iteration-5 question sets" of which verification keeps "roughly 20-31% of each arm", the
    fractions of tab:wellposed's band counts, 163/510 and 325/1,408): the valid questions whose
    solver accuracy lies in ``band`` = [tau_min, tau_max], i.e. the curriculum the solver
    trained on, with the proposer's answer as target. ``source="valid"``: every valid
    question with an answer."""
    if source not in TRANSFER_SOURCES:
        raise ValueError(f"source = {source!r}; allowed: {', '.join(TRANSFER_SOURCES)}")
    valid = _valid_questions(Path(run_dir), iteration)
    if source == "valid":
        return valid
    return filter_curriculum(valid, band[0], band[1], target="proposer")


def build_transfer_dataset(run_dir: str | os.PathLike, iteration: int, verifier: Verifier,
                           out_path: str | os.PathLike | None = None, *,
                           source: str = "curriculum",
                           band: tuple[float, float] = (0.3, 0.7)) -> Path:
    """Verify the questions of ``iter_<iteration>/questions.jsonl`` that ``source`` picks
    (:func:`transfer_candidates`: by default the band-filtered curriculum, as the paper) and
    write the kept ones (:func:`transfer_filter`) as JSONL, by default to
    ``<run_dir>/transfer/iter_<iteration>/curriculum.jsonl``: the record layout the loop's
    solver phase reads from ``curriculum.jsonl``. A summary (``source``, ``band``, counts of
    valid questions, of the verified candidates and of the kept ones, kept fraction of the
    candidates, model, usage, the paper's transfer training settings
    :data:`TRANSFER_TRAINING`) goes next to it as ``<stem>.summary.json``. A dry run writes
    only the summary (with the planned request count) and returns the path the dataset would
    have."""
    run_dir = Path(run_dir)
    out = Path(out_path) if out_path is not None else (
        layout.transfer_dataset_path(run_dir, iteration))
    n_valid = len(_valid_questions(run_dir, iteration))
    questions = transfer_candidates(run_dir, iteration, source, band)
    kept = transfer_filter(questions, verifier)
    if not verifier.dry_run:
        write_jsonl(out, kept)
    atomic_write_json(layout.dataset_summary_path(out), {
        "source": str(_questions_path(run_dir, iteration)), "candidates": source,
        "band": list(band) if source == "curriculum" else None,
        "iteration": iteration, "model": verifier.model, "temperature": verifier.temperature,
        "dry_run": verifier.dry_run, "n_valid": n_valid, "n_candidates": len(questions),
        "n_kept": len(kept),
        "kept_fraction": len(kept) / len(questions) if questions and not verifier.dry_run
        else None,
        "usage": verifier.usage.as_dict(), "training": TRANSFER_TRAINING})
    logger.info("transfer filter (%s) kept %d of %d questions -> %s", source, len(kept),
                len(questions), out)
    return out
