"""Why the mask is redrawn every batch, shown live (notebook 07, "three mask regimes"): one model
writes the same N questions (the same prompt, the same sampling seed per batch) with no mask,
with one fixed mask for every batch, and with a fresh mask per batch (the paper's Algorithm 1:
"fresh mask per batch"; Sec. "Vocabulary dropout": "the surviving token set is resampled every
batch"); then the paper's diversity metrics of each set (:mod:`vdlib.metrics`: distinct tokens,
Self-BLEU, Vendi) and the alpha arithmetic of :mod:`vdlib.method.mask_arithmetic`, beside the
same shares measured on the masks drawn.

The masks are the loop's own (:func:`vdlib.loop.proposals.generate_proposals`): batch b of the
fresh regime samples under the mask of ``mask_seed(seed, iteration, "gen", b)``; the fixed
regime uses batch 0's mask for every batch. Each regime is sampled in one call with one seed
(:func:`sample_regimes`), so the three differ only by their masks.

>>> plan = regime_plan(seed=0, iteration=1, batches=3)
>>> [len(set(plan[r])) for r in REGIMES]
[1, 1, 3]
>>> plan["no mask"], plan["fixed mask"][0] == plan["fresh mask per batch"][0]
([None, None, None], True)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pandas as pd
import torch
from transformers import LogitsProcessor

from vdlib.engines.generation import HFEngine, Sample
from vdlib.method.mask_arithmetic import (
    allowed_at_least_once,
    allowed_every_batch,
    expected_dropped_mass,
    template_survival,
)
from vdlib.method.prompts import proposer_prompt
from vdlib.method.seeding import derive_seed
from vdlib.method.vocab_dropout import VocabDropout, mask_seed
from vdlib.metrics import self_bleu, unique_tokens, vendi_score
from vdlib.metrics.embeddings import embed
from vdlib.report.drawing import figure_style, new_figure
from vdlib.report.plots import PlotResult, save_figure

__all__ = ["REGIMES", "RowMasks", "regime_plan", "sample_regimes", "regime_metrics",
           "regime_figure", "mask_coverage", "template_check", "alpha_frame", "alpha_figure",
           "mask_classes", "expected_mask_mass"]

#: the three regimes, in the order the tables and figures show them
REGIMES = ("no mask", "fixed mask", "fresh mask per batch")
_COLOURS = {"no mask": "#787878", "fixed mask": "#4C72B0", "fresh mask per batch": "#DD8452"}


def regime_plan(seed: int, iteration: int, batches: int) -> dict[str, list[int | None]]:
    """Each regime's mask seed per batch: None (no mask), batch 0's gen-phase mask seed for
    every batch (fixed), each batch's own (fresh, as the loop draws them)."""
    if batches < 1:
        raise ValueError(f"batches = {batches} must be >= 1")
    fresh = [mask_seed(seed, iteration, "gen", b) for b in range(batches)]
    return {"no mask": [None] * batches, "fixed mask": [fresh[0]] * batches,
            "fresh mask per batch": fresh}


class RowMasks(LogitsProcessor):
    """A transformers logits processor with one allowed-id mask per batch row: ``allowed`` bool
    (rows, V); dropped logits get -inf (:func:`vdlib.method.vocab_dropout.apply_mask`'s
    operation, row by row)."""

    def __init__(self, allowed: torch.Tensor) -> None:
        self.dropped = ~allowed.bool()

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor
                 ) -> torch.FloatTensor:
        if self.dropped.shape != scores.shape:
            raise ValueError(f"masks {tuple(self.dropped.shape)} do not match the logits "
                             f"{tuple(scores.shape)}")
        return scores.masked_fill_(self.dropped.to(scores.device), float("-inf"))


def sample_regimes(model: Any, tokenizer: Any, vd: VocabDropout, *, n: int, batch_size: int,
                   seed: int = 0, iteration: int = 1, **sampling: Any
                   ) -> dict[str, list[list[Sample]]]:
    """The proposer prompt sampled ``n`` times under each regime (:func:`regime_plan`), as
    ceil(n / ``batch_size``) batches: regime -> its batches' samples, each sample carrying its
    batch's mask seed (None without a mask). Each regime is one call of
    :class:`~vdlib.engines.generation.HFEngine` on all ``n`` rows with the same sampling seed,
    row i under the mask of batch i // ``batch_size`` (:class:`RowMasks`), so a row draws the
    same random numbers in every regime and the regimes differ only by their masks.
    ``sampling``: temperature, top_p, max_new_tokens."""
    if n < 1 or batch_size < 1:
        raise ValueError(f"n = {n}, batch_size = {batch_size}; both must be >= 1")
    prompt = proposer_prompt(tokenizer)
    engine = HFEngine(model, tokenizer, batch_size=n, show_progress=False)
    batches = -(-n // batch_size)
    plan = regime_plan(seed, iteration, batches)
    call_seed = derive_seed(seed, "curriculum", iteration, 0)
    out = {}
    for regime, seeds in plan.items():
        rows = [seeds[i // batch_size] for i in range(n)]
        procs = [] if rows[0] is None else [RowMasks(torch.stack([vd.sample(s) for s in rows]))]
        samples = engine.generate([prompt], n=n, seed=call_seed, logits_processors=procs,
                                  **sampling)
        samples = [replace(x, mask_seed=ms) for x, ms in zip(samples, rows, strict=True)]
        out[regime] = [samples[b * batch_size:(b + 1) * batch_size] for b in range(batches)]
    return out


def mask_coverage(vd: VocabDropout, mask_seeds: Sequence[int | None]) -> dict[str, float]:
    """The shares of the drawn, non-protected ids allowed in at least one and in every one of
    the masks ``mask_seeds`` (None = no mask: 1 and 1), measured on the masks themselves."""
    free = ~vd._is_protected[: vd.n_draw]
    rows = [torch.ones(int(free.sum()), dtype=torch.bool) if s is None
            else vd.sample(s)[: vd.n_draw][free] for s in mask_seeds]
    allowed = torch.stack(rows)
    return {"allowed at least once": float(allowed.any(0).float().mean()),
            "allowed every batch": float(allowed.all(0).float().mean())}


def regime_metrics(runs: dict[str, list[list[Sample]]], tokenizer: Any, vd: VocabDropout,
                   embedder: str = "minilm") -> pd.DataFrame:
    """One row per regime: samples, batches, distinct masks, the samples' distinct tokens
    (:func:`vdlib.metrics.unique_tokens`), Self-BLEU (lower = more diverse), Vendi of the
    ``embedder``'s embeddings (higher = more diverse), the dropped ids any sample holds (0 under
    a mask), and the share of the vocabulary its masks allowed at least once and every time,
    measured and by the formula (:mod:`vdlib.method.mask_arithmetic`)."""
    rows = []
    for regime, batches in runs.items():
        samples = [s for batch in batches for s in batch]
        texts = [s.text for s in samples]
        seeds = [batch[0].mask_seed for batch in batches if batch]
        masks = {s for s in seeds if s is not None}
        coverage = mask_coverage(vd, seeds)
        fresh = len(masks) > 1
        formula = (1.0, 1.0) if not masks else (
            allowed_at_least_once(vd.alpha, len(seeds), fresh),
            allowed_every_batch(vd.alpha, len(seeds), fresh))
        rows.append({
            "regime": regime, "samples": len(samples), "batches": len(batches),
            "masks": len(masks), "distinct tokens": unique_tokens(texts, tokenizer),
            "self_bleu": self_bleu(texts), "vendi": vendi_score(embed(texts, embedder)),
            "dropped ids sampled": sum(len(vd.dropped_ids(s.token_ids, s.mask_seed))
                                       for s in samples if s.mask_seed is not None),
            "allowed at least once": coverage["allowed at least once"],
            "formula: at least once": formula[0],
            "allowed every batch": coverage["allowed every batch"],
            "formula: every batch": formula[1]})
    return pd.DataFrame(rows)


def regime_figure(metrics: pd.DataFrame, out_dir: str | os.PathLike | None = None,
                  name: str = "mask_regimes") -> PlotResult:
    """Three bar panels, one bar per regime: distinct tokens, Self-BLEU, Vendi."""
    panels = [("distinct tokens", "distinct tokens (higher = more diverse)"),
              ("self_bleu", "Self-BLEU (lower = more diverse)"),
              ("vendi", "Vendi (higher = more diverse)")]
    with figure_style():
        fig, axes = new_figure(1, 3, w=3.3, h=3.0)
        for ax, (col, title) in zip(axes[0], panels, strict=True):
            ax.bar(range(len(metrics)), metrics[col],
                   color=[_COLOURS.get(r, "#55A868") for r in metrics["regime"]])
            ax.set_xticks(range(len(metrics)), [r.replace(" per ", "\nper ")
                                                for r in metrics["regime"]], fontsize=8)
            ax.set_title(title, fontsize=9)
            for i, v in enumerate(metrics[col]):
                ax.annotate(f"{v:.3g}", (i, v), ha="center", va="bottom", fontsize=8)
    return PlotResult(fig, save_figure(fig, out_dir, name) if out_dir is not None else [],
                      metrics)


# ----------------------------------------------------------------------------- alpha arithmetic


def template_check(vd: VocabDropout, token_ids: Sequence[int], mask_seeds: Sequence[int]
                   ) -> dict[str, float]:
    """A template's L (its distinct non-protected ids), ``alpha ** L`` and the share of the
    masks ``mask_seeds`` that allow every one of its ids."""
    ids = sorted({int(t) for t in token_ids})
    length = int((~vd._is_protected[torch.tensor(ids)]).sum())
    allowed = torch.stack([vd.sample(s)[ids] for s in mask_seeds]).all(dim=1)
    return {"L": length, "alpha ** L": template_survival(vd.alpha, length),
            "measured": float(allowed.float().mean()), "masks": len(mask_seeds)}


def alpha_frame(alphas: Sequence[float], batches: int = 10, lengths: Sequence[int] = (1, 5, 10,
                20, 40)) -> pd.DataFrame:
    """The formulas on a grid, long format: per alpha, the share allowed at least once and every
    time over B = 1..``batches`` fresh masks (a fixed mask: alpha for both), and a template's
    survival ``alpha ** L`` for each L in ``lengths``."""
    rows = []
    for a in alphas:
        for b in range(1, batches + 1):
            rows += [{"alpha": a, "quantity": q, "x": b, "value": f(a, b)} for q, f in
                     (("allowed at least once (fresh)", allowed_at_least_once),
                      ("allowed every batch (fresh)", allowed_every_batch))]
            rows.append({"alpha": a, "quantity": "allowed (fixed mask)", "x": b, "value": a})
        rows += [{"alpha": a, "quantity": "template survives one mask", "x": n,
                  "value": template_survival(a, n)} for n in lengths]
    return pd.DataFrame(rows)


def alpha_figure(frame: pd.DataFrame, out_dir: str | os.PathLike | None = None,
                 name: str = "alpha_arithmetic") -> PlotResult:
    """Left: the share of the vocabulary allowed at least once / every batch over B fresh
    masks, and under one fixed mask; right: ``alpha ** L`` against the template length L."""
    styles = {"allowed at least once (fresh)": "-", "allowed every batch (fresh)": "--",
              "allowed (fixed mask)": ":"}
    colours = ["#DD8452", "#4C72B0", "#55A868", "#8172B3"]
    with figure_style():
        fig, axes = new_figure(1, 2, w=4.6, h=3.2)
        left, right = axes[0]
        for c, (a, part) in zip(colours * 3, frame.groupby("alpha", sort=True), strict=False):
            for q, ls in styles.items():
                d = part[part["quantity"] == q]
                left.plot(d["x"], d["value"], ls, color=c,
                          label=f"alpha {a}: {q}" if q != "allowed (fixed mask)" or a ==
                          frame["alpha"].min() else None)
            t = part[part["quantity"] == "template survives one mask"]
            right.plot(t["x"], t["value"], "o-", color=c, label=f"alpha = {a}")
        left.set_xlabel("batches B")
        left.set_ylabel("share of the non-protected vocabulary")
        left.legend(fontsize=7, frameon=False, loc="center right")
        right.set_xlabel("template length L (distinct non-protected tokens)")
        right.set_ylabel("P(template survives one mask) = alpha^L")
        right.set_yscale("log")
        right.legend(fontsize=8, frameon=False)
    return PlotResult(fig, save_figure(fig, out_dir, name) if out_dir is not None else [], frame)


def mask_classes(vd: VocabDropout, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(protected, always_dropped)`` bool (``width``,) (default the logits width): the ids
    every mask of ``vd`` keeps, and those it always drops (undrawn and not protected, padded
    rows)."""
    n = vd.vocab_width if width is None else int(width)
    protected = torch.zeros(n, dtype=torch.bool)
    protected[: min(n, vd.n_real)] = vd._is_protected[: min(n, vd.n_real)]
    always = torch.ones(n, dtype=torch.bool)
    always[: min(n, vd.n_draw)] = False
    return protected, always & ~protected


def expected_mask_mass(vd: VocabDropout, logits: torch.Tensor) -> float:
    """The probability mass of softmax(``logits`` (V,)) that a mask of ``vd`` drops, in
    expectation (:func:`vdlib.method.mask_arithmetic.expected_dropped_mass`)."""
    protected, always = mask_classes(vd, logits.shape[-1])
    probs = torch.softmax(logits.detach().float().cpu(), dim=-1)
    return float(expected_dropped_mass(probs, vd.alpha, protected, always))
