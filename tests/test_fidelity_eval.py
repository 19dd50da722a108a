"""Issue 16, items 3, 7, 9, 10 and the judged scores: each evaluation default pinned to the
paper's text, the paper's printed cells reproduced from the correct-counts they imply."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import yaml

from vdlib.config.experiment import EvaluationConfig, load_params
from vdlib.evaluation import BenchmarkResult, EvalSummary, load_benchmark, pool_runs
from vdlib.evaluation.judged import JUDGE_PROMPT, judge_evaluation, load_judge_meta
from vdlib.report import tables
from vdlib.report.paper_values import paper_cells
from vdlib.utils.artifacts import write_jsonl

ROOT = Path(__file__).resolve().parent.parent
DENOMINATOR = {"aime24": 30, "aime25": 30, "amc23": 40}


def _cell(counts: tuple[int, ...], n: int, ddof: int | None = None) -> tuple[float, float]:
    r = BenchmarkResult("x", n, [c / n for c in counts], list(range(len(counts))))
    if ddof is not None:
        r.ddof = ddof
    return round(100 * r.mean, 1), round(100 * r.se, 1)


# ----------------------------------------------------------------------------- item 3: SE


#: (table, group, row, benchmark, correct counts of the 3 runs)
PAPER_CELLS = [
    ("tab:vanilla_eval", "Qwen3-4B", "base", "aime24", (3, 4, 4)),      # 12.2 +- 0.9
    ("tab:vanilla_eval", "Qwen3-4B", "base", "aime25", (0, 0, 1)),      # 1.1 +- 0.9
    ("tab:vanilla_eval", "Qwen3-4B", "base", "amc23", (10, 12, 13)),    # 29.2 +- 1.8
    ("tab:vanilla_eval", "Qwen3-4B", "baseline", "amc23", (16, 16, 18)),  # 41.7 +- 1.4
    ("tab:vanilla_eval", "Qwen3-4B", "vd75", "amc23", (9, 15, 19)),     # 35.8 +- 5.9
    ("tab:vanilla_eval", "Qwen3-8B", "baseline", "amc23", (10, 16, 23)),  # 40.8 +- 7.7
    ("tab:vanilla_eval", "Qwen3-8B", "vd75", "aime24", (3, 5, 6)),      # 15.6 +- 2.4
    ("tab:vanilla_eval", "Qwen3-8B", "vd85", "aime24", (2, 2, 2)),      # 6.7 +- 0.0
    ("tab:proposer_eval", "Qwen3-4B", "vd85", "aime25", (0, 1, 3)),     # 4.4 +- 2.4
]


@pytest.mark.parametrize("label,group,row,bench,counts", PAPER_CELLS)
def test_the_default_se_rule_reproduces_the_papers_cells(label, group, row, bench, counts):
    """Paper, Sec. "Standard benchmarks": "Every number is an average over 3 independent runs
    with mean $\\pm$ standard error". Three runs of c/30 (AIME) or c/40 (AMC) correct with the
    population SD (evaluation.se_ddof = 0, the default) print exactly the paper's cell."""
    want = paper_cells(label, group)[row][bench]
    assert _cell(counts, DENOMINATOR[bench]) == (want["mean"], want["se"])
    assert EvaluationConfig().se_ddof == 0


def _fits(mean: float, se: float, n: int, k: int, ddof: int) -> bool:
    for counts in itertools.combinations_with_replacement(range(n + 1), k):
        vals = [c / n for c in counts]
        m = sum(vals) / k
        if abs(100 * m - mean) > 0.05 + 1e-9:
            continue
        ss = sum((v - m) ** 2 for v in vals)
        if abs(100 * math.sqrt(ss / (k - ddof)) / math.sqrt(k) - se) <= 0.05 + 1e-9:
            return True
    return False


def _small_cells(rows=None):
    out = []
    for label in ("tab:vanilla_eval", "tab:proposer_eval"):
        for group in ("Qwen3-4B", "Qwen3-8B"):
            for row, cols in paper_cells(label, group).items():
                if rows is not None and row not in rows:
                    continue
                for b, v in cols.items():
                    if b in DENOMINATOR and v["se"] is not None:
                        out.append((label, group, row, b, v["mean"], v["se"]))
    return out


def test_population_sd_over_three_single_evaluations_fits_every_cell():
    """Every AIME/AMC cell of tab:vanilla_eval and tab:proposer_eval other than KL-Cov /
    Clip-Cov is 3 single evaluations with the population SD; the sample SD fits few."""
    cells = [c for c in _small_cells() if c[2] not in ("kl_cov", "clip_cov")]
    assert len(cells) >= 40
    pop = [c for c in cells if _fits(c[4], c[5], DENOMINATOR[c[3]], 3, 0)]
    sample = [c for c in cells if _fits(c[4], c[5], DENOMINATOR[c[3]], 3, 1)]
    assert pop == cells
    assert len(sample) < len(cells) // 4


def test_cell_means_are_sums_of_three_single_evaluations():
    """Each mean is a multiple of 1/90 (AIME) or 1/120 (AMC): three single evaluations, not
    per-seed means of several (multiples of 1/270, 1/360): evaluation.per_seed = first_run."""
    for _, _, row, b, mean, _ in _small_cells():
        if row in ("kl_cov", "clip_cov"):
            continue
        unit = 3 * DENOMINATOR[b]
        assert min(abs(100 * c / unit - mean) for c in range(unit + 1)) <= 0.05 + 1e-9
    assert EvaluationConfig().per_seed == "first_run"


def test_kl_cov_and_clip_cov_cells_fit_five_evaluations_not_three():
    """The paper's KL-Cov / Clip-Cov cells are not 3 runs: 9.3 = 14/150 and AMC 42.0 / 39.5
    are impossible with 3 x 40; 5 evaluations fit all of them (reported, not "fixed")."""
    cells = _small_cells(rows=("kl_cov", "clip_cov"))
    assert len(cells) == 12
    assert all(_fits(m, s, DENOMINATOR[b], 5, 0) for *_, b, m, s in cells)
    amc = {(g, r): m for _, g, r, b, m, _ in cells if b == "amc23"}
    for mean in (amc[("Qwen3-4B", "kl_cov")], amc[("Qwen3-4B", "clip_cov")]):
        assert all(abs(100 * c / 120 - mean) > 0.05 for c in range(121))


def test_pool_runs_first_run_or_mean_per_seed():
    def s(accs):
        return EvalSummary({"a": BenchmarkResult("a", 30, accs, [0, 1, 2])})

    grid = {("vd", 0): s([0.1, 0.2, 0.3]), ("vd", 1): s([0.3, 0.3, 0.3]), "base": s([0.1, 0.2])}
    first = pool_runs(grid)
    assert first["vd"].results["a"].accuracies == [0.1, 0.3]
    assert first["vd"].results["a"].se == pytest.approx(0.1 / math.sqrt(2))  # population SD
    assert first["base"].results["a"].accuracies == [0.1, 0.2]  # one model: its runs
    mean = pool_runs(grid, per_seed="mean", ddof=1)
    assert mean["vd"].results["a"].accuracies == pytest.approx([0.2, 0.3])
    assert mean["vd"].protocol["se_ddof"] == 1


# ----------------------------------------------------------------------------- item 10


def test_single_evaluation_tables_default_to_one_run():
    """tab:curriculum_transfer and tab:vanilla_grpo print no SE and every cell is a multiple of
    1/30 (AIME), 1/40 (AMC), 1/500 (MATH500), 1/272 (Minerva), 1/910 (OlympiadBench): one
    evaluation per trained model (evaluation.single_eval_runs = 1)."""
    n = {"aime24": 30, "aime25": 30, "amc23": 40, "math500": 500, "minerva": 272,
         "olympiadbench": 910, "gsm8k": 1319}
    for label, group in (("tab:curriculum_transfer", "Qwen3-4B-Base"),
                         ("tab:vanilla_grpo", "Qwen3-4B-Base")):
        for row, cols in paper_cells(label, group).items():
            for b, v in cols.items():
                if b in n:
                    assert v["se"] is None
                    assert min(abs(100 * c / n[b] - v["mean"]) for c in range(n[b] + 1)) \
                        <= 0.05 + 1e-9, (label, row, b)
    assert EvaluationConfig().single_eval_runs == 1


# ----------------------------------------------------------------------------- item 9


def test_olympiadbench_defaults_to_the_papers_910_items():
    """Paper, tab:benchmarks: "OlympiadBench ... 910". 910 = OE_TO_maths_en_COMP (674) +
    OE_TO_physics_en_COMP (236); the single-evaluation cells fit 1/910 and not 1/674 (27.8,
    24.1) nor 1/675 (28.2)."""
    assert EvaluationConfig().olympiadbench_subset == "maths_physics_en"
    olympiad = [v["olympiadbench"]["mean"] for label in ("tab:curriculum_transfer",
                                                         "tab:vanilla_grpo")
                for v in paper_cells(label, "Qwen3-4B-Base").values()]

    def fits(n):
        return all(min(abs(100 * c / n - m) for c in range(n + 1)) <= 0.05 + 1e-9
                   for m in olympiad)

    assert fits(910) and not fits(674) and not fits(675)


def test_olympiadbench_local_subsets(tmp_path):
    folder = tmp_path / "olympiadbench"
    folder.mkdir()
    write_jsonl(folder / "test.jsonl", [{"problem": "Find x.", "answer": "$3$"}])
    with pytest.raises(Exception, match="olympiadbench_subset: maths_en"):
        load_benchmark("olympiadbench", data_dir=tmp_path)
    assert len(load_benchmark("olympiadbench", data_dir=tmp_path,
                              olympiadbench_subset="maths_en")) == 1
    write_jsonl(folder / "physics_en.jsonl", [{"id": 7, "question": "Speed?",
                                               "final_answer": ["$5$"], "context": None}])
    items = load_benchmark("olympiadbench", data_dir=tmp_path)
    assert [it["answer"] for it in items] == ["3", "5"]
    assert items[1]["id"] == "olympiadbench-physics-7"


def test_olympiad_footnote_names_the_size():
    s = EvalSummary({"olympiadbench": BenchmarkResult("olympiadbench", 674, [0.2], [0])},
                    {"olympiadbench_subset": "maths_en"})
    text = tables.main_table({"baseline": s}, "markdown")
    assert "Olympiad: 674 items (evaluation.olympiadbench_subset: maths_en)" in text
    assert "910" in text


# ----------------------------------------------------------------------------- item 7


def _summary(accs: dict[str, list[float]]) -> EvalSummary:
    return EvalSummary({b: BenchmarkResult(b, 10, a, list(range(len(a)))) for b, a in accs.items()})


def test_ood_table_has_the_papers_layout_and_values():
    """Paper, tab:ood: rows BBH, MedQA-USMLE, SuperGPQA, WinoGrande; columns Base, Baseline,
    VD, Delta (BBH: 37.5, 44.8, 55.0, +10.1)."""
    evals = {"base": _summary({"bbh": [0.3, 0.3]}), "baseline": _summary({"bbh": [0.4, 0.5]}),
             "vd75": _summary({"bbh": [0.6, 0.6]})}
    t = tables.ood_table(evals)
    f = t.frame
    assert f["label"].tolist() == ["BBH", "MedQA-USMLE", "SuperGPQA", "WinoGrande"]
    bbh = f.iloc[0]
    assert (bbh["Base"], bbh["Baseline"], bbh["VD"]) == pytest.approx((30.0, 45.0, 60.0))
    assert bbh["Δ"] == pytest.approx(15.0)
    assert (bbh["paper Base"], bbh["paper Baseline"], bbh["paper VD"], bbh["paper Δ"]) == \
        (37.5, 44.8, 55.0, 10.1)
    assert f.iloc[3]["paper Δ"] == -4.5
    assert t["markdown"].splitlines()[0].startswith("| Benchmark | Base | Baseline | VD | Δ |")


def test_ood_benchmarks_are_evaluated_at_8b_only():
    """Paper, Sec. "Out-of-domain transfer": "we also evaluate the 8B VD75 solver zero-shot on
    BBH, MedQA-USMLE, SuperGPQA, and WinoGrande"."""
    eight = load_params(yaml.safe_load((ROOT / "params/paper/main_table@8b.yaml").read_text()))
    four = load_params(yaml.safe_load((ROOT / "params/paper/main_table.yaml").read_text()))
    assert eight.evaluation.ood_benchmarks == ["bbh", "medqa", "supergpqa", "winogrande"]
    assert four.evaluation.ood_benchmarks == [] == EvaluationConfig().ood_benchmarks
    tiny = load_params(yaml.safe_load((ROOT / "params/tiny/main_table.yaml").read_text()))
    for b in tiny.evaluation.ood_benchmarks:
        assert load_benchmark(b, data_dir=tiny.evaluation.ood_data_dir)


# ----------------------------------------------------------------------------- judged scores


class FakeJudge:
    model = "fake-judge"

    def __init__(self):
        self.prompts = []

    def complete(self, conversations):
        replies = []
        for conv in conversations:
            text = conv[0]["content"]
            self.prompts.append(text)
            gold = text.split("Reference answer (taken as correct):\n")[1].split("\n")[0]
            pred = text.split("Model's final answer:\n")[1].split("\n\nIs the model")[0]
            replies.append('{"correct": %s}' % ("true" if gold in pred else "false"))
        return replies


def test_judged_scores_sit_beside_math_verify_and_record_the_prompt(tmp_path):
    """Off by default (the paper scores with math-verify only); the judge sees gold and
    prediction under their own labels, and its prompt is saved with the scores."""
    assert EvaluationConfig().judge is False
    rec = {"benchmark": "gsm8k", "problem": "p", "gold": "12", "seed": 0, "run": 0}
    write_jsonl(tmp_path / "gsm8k" / "run0.jsonl", [
        {**rec, "id": "a", "extracted": "12", "completion": "\\boxed{12}", "correct": True},
        {**rec, "id": "b", "extracted": "12.0 apples", "completion": "x", "correct": False},
        {**rec, "id": "c", "extracted": "7", "completion": "\\boxed{7}", "correct": False},
        {**rec, "id": "d", "extracted": None, "completion": "so 12", "correct": False}])
    judge = FakeJudge()
    judged = judge_evaluation(tmp_path, judge)
    assert judged.results["gsm8k"].accuracies == [0.75]
    assert load_judge_meta(tmp_path) == {**load_judge_meta(tmp_path), "model": "fake-judge",
                                         "prompt": JUDGE_PROMPT}
    lines = (tmp_path / "judged" / "gsm8k" / "run0.jsonl").read_text().splitlines()
    assert [json.loads(x)["judged_correct"] for x in lines] == [True, True, False, True]
    scores = _summary({"gsm8k": [0.25]})
    t = tables.judged_table({"baseline": scores}, {"baseline": judged})
    assert t.frame.iloc[0][["GSM8K math-verify", "GSM8K judged"]].tolist() == [25.0, 75.0]
