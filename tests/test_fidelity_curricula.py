"""Issue 16, items 2, 4, 5, 6: the curricula notebook 03 verifies and measures, and the arms of
notebook 05, pinned to the paper's text (each test quotes it)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from vdlib.config.experiment import MetricsConfig, VerificationConfig, load_params
from vdlib.evaluation.verifier import Verifier
from vdlib.metrics.bootstrap import (
    bootstrap_se,
    item_bootstrap_se,
    pair_bootstrap_se,
    pairwise_cosine_distances,
)
from vdlib.metrics.diversity import mean_pairwise_cosine_distance
from vdlib.report import tables
from vdlib.report.curriculum_tables import annealing_table
from vdlib.report.paper_values import paper_values
from vdlib.utils.artifacts import read_jsonl, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("tiny", "gpu", "paper")


def _yaml(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text())


def _cell_params(notebook: str) -> dict:
    import papermill

    return {k: v["default"] for k, v in papermill.inspect_notebook(
        str(ROOT / "notebooks" / notebook)).items()}


# ----------------------------------------------------------------------------- item 2


class Oracle(Verifier):
    """Answers ``6*7`` with 42 and everything else with 1; counts the questions it is asked."""

    def __init__(self, folder: Path) -> None:
        super().__init__(model="oracle", cache_dir=str(folder))
        self.asked: list[str] = []

    def solve(self, questions):
        self.asked += list(questions)
        return ["42" if "6*7" in q else "1" for q in questions]

    def label_well_posed(self, questions):
        return ["?" in q for q in questions]


def _run(root: Path, t: int = 5) -> Path:
    run = root / "run"
    write_jsonl(run / f"iter_{t}" / "questions.jsonl", [
        {"question": "Compute 6*7.", "answer": "42", "acc": 0.5, "valid": True},
        {"question": "Compute 2-1.", "answer": "1", "acc": 0.9, "valid": True},  # too easy
        {"question": "Compute 3-2?", "answer": "1", "acc": 0.3, "valid": True},
        {"question": "Compute 9-8.", "answer": "1", "acc": 0.0, "valid": True},  # too hard
        {"question": "Compute 5+5?", "answer": "11", "acc": 0.7, "valid": True},
        {"question": None, "answer": None, "acc": None, "valid": False}])
    return run


def test_transfer_verifies_the_band_filtered_curriculum_by_default(tmp_path):
    """Paper, Sec. "Curriculum quality in isolation": "We take the iteration-5 question sets
    ... re-verify every problem with an external model (GPT-5-mini), keep only those whose
    independently-derived answer matches the curriculum's, roughly 20--31% of each arm". The
    kept counts of tab:wellposed's band (163 of 510, 325 of 1,408) are such fractions: the set
    verified is the curriculum that passed the difficulty filter [0.3, 0.7]."""
    assert VerificationConfig().transfer_source == "curriculum"
    wp = paper_values("tab:wellposed")["data"]
    for scale in ("Qwen3-4B", "Qwen3-8B"):
        for arm in ("baseline", "vd75"):
            frac = wp[scale][arm]["correct"] / wp[scale][arm]["filter_pass"]
            assert 0.2 <= frac <= 0.33, (scale, arm, frac)
    from vdlib.evaluation.verification import build_transfer_dataset

    run = _run(tmp_path)
    v = Oracle(tmp_path / "cache")
    out = build_transfer_dataset(run, 5, v, tmp_path / "band.jsonl")
    assert v.asked == ["Compute 6*7.", "Compute 3-2?", "Compute 5+5?"]  # in band only
    assert [r["question"] for r in read_jsonl(out)] == ["Compute 6*7.", "Compute 3-2?"]
    summary = json.loads((tmp_path / "band.summary.json").read_text())
    assert (summary["n_valid"], summary["n_candidates"], summary["n_kept"]) == (5, 3, 2)
    assert summary["candidates"] == "curriculum" and summary["band"] == [0.3, 0.7]
    assert summary["kept_fraction"] == pytest.approx(2 / 3)
    v = Oracle(tmp_path / "cache2")
    build_transfer_dataset(run, 5, v, tmp_path / "all.jsonl", source="valid")
    assert len(v.asked) == 5 and len(read_jsonl(tmp_path / "all.jsonl")) == 4
    with pytest.raises(ValueError, match="curriculum, valid"):
        build_transfer_dataset(run, 5, v, tmp_path / "x.jsonl", source="band")


def test_transfer_source_runs_are_the_8b_ones_in_the_paper_params():
    """Paper, Sec. "Curriculum quality in isolation": "the baseline, KL-Cov, Clip-Cov, and VD
    (alpha=0.75) 8B runs"."""
    p = _yaml("params/paper/curriculum_transfer.yaml")
    assert p["verification"]["transfer_experiment"] == "vd_qwen3_8b"
    assert p["verification"]["transfer_source"] == "curriculum"
    assert p["arms"] == ["baseline", "kl_cov", "clip_cov", "vd75"]
    assert _yaml("params/paper/main_table@8b.yaml")["experiment"] == "vd_qwen3_8b"


# ----------------------------------------------------------------------------- item 4


def test_annealing_compares_baseline_fixed_and_anneal_in_every_profile():
    """Paper, fig:annealing legend: "Baseline", "VD75 (fixed)", "VD75 (anneal)"; caption:
    "Qwen3-8B solver accuracy across iterations under fixed vs. annealed (0.75 -> 1.0)
    vocabulary dropout". The tiny and gpu files add vdlib's adaptive schedule after the
    paper's three (issue 54); the paper profile keeps the paper's arms alone."""
    for profile in PROFILES:
        arms = _yaml(f"params/{profile}/annealing.yaml")["arms"]
        assert arms[:3] == ["baseline", "vd75", "anneal"], profile
        assert arms[3:] == ([] if profile == "paper" else ["adaptive"]), profile
    assert _cell_params("05_annealing.ipynb")["arms"] == '["baseline", "vd75", "anneal"]'
    paper = paper_values("fig:annealing")["data"]["Qwen3-8B"]["math_avg"]
    assert set(paper) == {"baseline", "vd75", "anneal"}


def test_annealing_table_puts_the_paper_beside_ours():
    rows = [(arm, seed, t, b, 0.1 * (t + 1) + (0.1 if arm == "anneal" else 0.0) + 0.02 * seed)
            for arm in ("baseline", "vd75", "anneal") for seed in (0, 1) for t in (0, 1, 2)
            for b in ("math500", "gsm8k")]
    acc = pd.DataFrame(rows, columns=["arm", "seed", "iteration", "benchmark", "accuracy"])
    t = annealing_table(acc, "frame").set_index("label")
    assert t.loc["ours: VD75 (anneal)", "It. 1"] == pytest.approx(31.0)  # (30 + 32) / 2 %
    assert t.loc["ours: Baseline", "It. 0"] == pytest.approx(11.0)
    assert t.loc["paper Qwen3-8B: Baseline", "It. 5"] == 54.2
    assert t.loc["paper Qwen3-8B: VD75 (anneal)", "It. 3"] == 56.1
    assert "| ours: VD75 |" in annealing_table(acc, "markdown")


# ----------------------------------------------------------------------------- item 5 / 6


def test_curriculum_tables_cover_both_scales_with_the_papers_encoders():
    """Paper, App. "Cumulative embedding diversity": "tab:nli_diversity reports mean pairwise
    cosine distance with Qwen3-Embedding-4B and NLI-based logical diversity computed with
    DeBERTa-v3-large fine-tuned on MNLI/FEVER/ANLI/LingNLI/WANLI, on the curriculum-filtered
    problem sets at iteration 5 ... This rank order holds under an encoder swap
    (all-MiniLM-L6-v2) and unidirectional NLI scoring." Caption: "Standard errors bootstrapped
    from 100 resamples". tab:wellposed has 4B and 8B rows."""
    m = MetricsConfig()
    assert m.semantic_embedder == "qwen3-embedding-4b" and m.swap_embedder == "minilm"
    assert m.nli_model == "deberta-v3-large-mnli-fever-anli-ling-wanli"
    assert m.nli_unidirectional and m.bootstrap_resamples == 100
    p = _yaml("params/paper/curriculum_transfer.yaml")
    assert set(p["reference_experiments"]) == {"vd_qwen3_4b", "vd_qwen3_8b"}
    assert p["metrics"]["semantic_embedder"] == "qwen3-embedding-4b"
    assert p["metrics"]["swap_embedder"] == "minilm" and p["metrics"]["nli_unidirectional"]
    assert _yaml("params/paper/main_table.yaml")["experiment"] == "vd_qwen3_4b"
    for profile in PROFILES:  # every profile's params load
        cfg = load_params(_yaml(f"params/{profile}/curriculum_transfer.yaml"))
        assert cfg.metrics.bootstrap_resamples >= 2
    assert load_params(_yaml("params/tiny/curriculum_transfer.yaml")).metrics.nli_model == \
        "tiny-random"


def test_scale_labels_match_the_papers_groups():
    from vdlib.report.curriculum_sets import scale_label

    assert scale_label("Qwen/Qwen3-4B-Base") == "Qwen3-4B"
    assert set(paper_values("tab:nli_diversity")["data"]) == {
        scale_label("Qwen/Qwen3-4B-Base"), scale_label("Qwen/Qwen3-8B-Base")}


def test_bootstrap_se_is_seeded_pure_and_matches_a_slow_reference():
    rng = np.random.default_rng(1)
    x = rng.normal(size=400)
    se = bootstrap_se(x, resamples=100, seed=7)
    assert se == bootstrap_se(x, resamples=100, seed=7)  # pure: same inputs, same SE
    assert se != bootstrap_se(x, resamples=100, seed=8)
    r = np.random.default_rng(7)
    ref = np.std([x[r.integers(0, 400, 400)].mean() for _ in range(100)], ddof=1)
    assert se == pytest.approx(ref)
    assert se == pytest.approx(x.std(ddof=1) / 20, rel=0.25)  # the analytic SE of a mean
    assert math.isnan(bootstrap_se([1.0]))


def test_item_bootstrap_resamples_questions_not_pairs():
    n = 6
    i, j = np.triu_indices(n, 1)
    pairs = np.stack([i, j], 1)
    scores = (i + j).astype(float)
    se = item_bootstrap_se(pairs, scores, n, resamples=50, seed=3)
    r = np.random.default_rng(3)
    ref = []
    while len(ref) < 50:  # the statistic on the resampled multiset, pair by pair
        c = r.multinomial(n, np.full(n, 1 / n))
        w = [c[a] * c[b] for a, b in pairs]
        if sum(w):
            ref.append(sum(wk * s for wk, s in zip(w, scores, strict=True)) / sum(w))
    assert se == pytest.approx(np.std(ref, ddof=1))
    assert pair_bootstrap_se(pairs, scores, n, "questions", 50, 3) == se
    assert pair_bootstrap_se(pairs, scores, n, "pairs", 50, 3) == bootstrap_se(scores, 50, 3)
    with pytest.raises(ValueError, match="pairs, questions"):
        pair_bootstrap_se(pairs, scores, n, "items")


def test_pairwise_cosine_distances_average_to_the_metric():
    e = np.random.default_rng(0).normal(size=(9, 5))
    pairs, d = pairwise_cosine_distances(e)
    assert len(d) == 36 and d.mean() == pytest.approx(mean_pairwise_cosine_distance(e))
    sub_pairs, sub = pairwise_cosine_distances(e, max_pairs=10, seed=1)
    assert len(sub) == 10 and set(map(tuple, sub_pairs.tolist())) <= set(map(tuple,
                                                                          pairs.tolist()))


def _metrics(**over) -> MetricsConfig:
    base = {"semantic_embedder": "minilm", "swap_embedder": "minilm", "nli_model": "tiny-random",
            "nli_max_pairs": None, "bootstrap_resamples": 10}
    return load_params({"profile": "tiny", "metrics": {**base, **over}}).metrics


TEXTS = ["What is 2 + 3?", "A train travels 60 km in 1.5 hours; find its speed.",
         "Find x if 2x + 1 = 7.", "How many primes are below 20?"]


def test_set_diversity_computes_the_tables_columns(tmp_path, monkeypatch):
    monkeypatch.setenv("VDLIB_CACHE_DIR", str(tmp_path))
    from vdlib.metrics.embeddings import embed
    from vdlib.metrics.nli import nli_diversity
    from vdlib.report.curriculum_sets import set_diversity

    out = set_diversity(TEXTS, _metrics(), seed=0, device="cpu")
    assert out["n"] == 4
    assert out["semantic"] == pytest.approx(
        mean_pairwise_cosine_distance(embed(TEXTS, "minilm", device="cpu")), abs=1e-6)
    assert out["semantic_swap"] == pytest.approx(out["semantic"])
    assert out["logical"] == pytest.approx(nli_diversity(TEXTS, "tiny-random", device="cpu"))
    assert out["logical_unidirectional"] == pytest.approx(
        nli_diversity(TEXTS, "tiny-random", "unidirectional", device="cpu"))
    assert all(out[f"{c}_se"] >= 0 for c in ("semantic", "logical", "semantic_swap"))
    off = set_diversity(TEXTS[:1], _metrics(nli_unidirectional=False, swap_embedder="none"))
    assert off["semantic"] is None and off["logical"] is None and off["semantic_swap"] is None


def test_composition_and_diversity_frames_of_a_run(tmp_path, monkeypatch):
    """App. "Curriculum diversity controlling for correctness": "NLI logical diversity on the
    well-posed subset also favors VD75, by +0.12 at 4B and +0.03 at 8B"."""
    monkeypatch.setenv("VDLIB_CACHE_DIR", str(tmp_path / "cache"))
    import vdlib.evaluation.verification as verification
    from vdlib.metrics.nli import nli_diversity
    from vdlib.report.curriculum_sets import composition_frame, diversity_frame

    run = _run(tmp_path)
    (run / "config.yaml").write_text("model: {proposer: Qwen/Qwen3-8B-Base}\n")
    monkeypatch.setattr(verification, "make_verifier",
                        lambda *a, **k: Oracle(tmp_path / "vcache"))
    cfg = load_params({"profile": "tiny", "seed": 3, "metrics": {
        "embedder": "minilm", "semantic_embedder": "minilm", "nli_model": "tiny-random",
        "nli_max_pairs": None, "bootstrap_resamples": 10}})
    comp = composition_frame({("vd75", 0): run}, cfg, iteration=5).iloc[0]
    assert comp["group"] == "Qwen3-8B"
    assert (comp["generated"], comp["filter_pass"], comp["well_posed"], comp["correct"]) == (
        6, 3, 2, 2)
    assert comp["nli_wp"] == pytest.approx(nli_diversity(["Compute 3-2?", "Compute 5+5?"],
                                                         "tiny-random", seed=3, device="cpu"))
    div = diversity_frame({("vd75", 0): run}, cfg, iteration=5).iloc[0]
    assert (div["group"], div["n"]) == ("Qwen3-8B", 3)
    assert div["logical"] == pytest.approx(nli_diversity(
        ["Compute 6*7.", "Compute 3-2?", "Compute 5+5?"], "tiny-random", device="cpu"))


def test_nli_and_wellposed_tables_group_rows_by_scale_beside_the_paper():
    rows = []
    for group, base in (("Qwen3-4B", 0.6), ("Qwen3-8B", 0.5)):
        for arm, lift in (("baseline", 0.0), ("vd75", 0.1)):
            for seed in (0, 1):
                rows.append({"group": group, "arm": arm, "seed": seed, "iteration": 5, "n": 10,
                             "semantic": base + lift, "semantic_se": 0.003,
                             "logical": 0.2 + lift + 0.02 * seed, "logical_se": 0.004,
                             "semantic_swap": base, "semantic_swap_se": 0.0,
                             "logical_unidirectional": None, "logical_unidirectional_se": None})
    t = tables.nli_diversity_table(pd.DataFrame(rows), "frame").set_index("label")
    r = t.loc["ours Qwen3-8B: VD75"]
    assert r["semantic"] == pytest.approx(0.6)
    assert r["semantic_delta_pct"] == pytest.approx(20.0)
    assert r["semantic_se"] == pytest.approx(np.sqrt(2 * 0.003 ** 2) / 2)
    assert r["logical"] == pytest.approx(0.31) and math.isnan(r["logical_unidirectional"])
    assert t.loc["ours Qwen3-4B: Baseline", "semantic"] == pytest.approx(0.6)
    assert t.loc["paper Qwen3-8B: VD75", "logical"] == 0.376
    assert t.loc["paper Qwen3-4B: VD75", "logical_delta_pct"] == 68.1
    comp = pd.DataFrame([
        {"group": g, "arm": a, "seed": 0, "iteration": 5, "filter_pass": 10, "pass_rate": 0.1,
         "well_posed": 8, "correct": 3, "vendi_wp": v, "vendi_c": v, "nli_wp": nli}
        for g in ("Qwen3-4B", "Qwen3-8B")
        for a, v, nli in (("baseline", 5.0, 0.2), ("vd75", 7.0, 0.25))])
    w = tables.wellposed_table(comp, "frame").set_index("label")
    assert w.loc["ours Qwen3-4B: VD75", "delta_nli_wp"] == pytest.approx(0.05)
    assert w.loc["ours Qwen3-8B: VD75", "delta_vendi_wp"] == pytest.approx(2.0)
    assert w.loc["paper Qwen3-4B: VD75", "delta_nli_wp"] == 0.12
    assert w.loc["paper Qwen3-8B: VD75", "delta_nli_wp"] == 0.03
    assert math.isnan(w.loc["paper Qwen3-8B: Baseline", "delta_nli_wp"])
    assert w.loc["paper Qwen3-8B: VD75", "filter_pass"] == 1408
