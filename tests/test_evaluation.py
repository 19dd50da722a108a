"""Evaluation harness: loaders in each benchmark's format, gold-oracle scoring, standard errors,
tables, multiple-choice parsing, errors, and the ``vdlib eval`` command."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from vdlib import evaluation as ev
from vdlib.config.experiment import KNOWN_BENCHMARKS
from vdlib.engines.generation import Sample
from vdlib.method.parsing import COT_SUFFIX

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
MATH_BENCHMARKS = ("gsm8k", "math500", "amc23", "olympiadbench", "aime24", "aime25", "minerva")


class OracleEngine:
    """A fake engine answering ``... \\boxed{<gold>}``: it finds the item whose problem text is
    in the prompt (longest match, so a problem that is a prefix of another cannot be taken)."""

    def __init__(self, items, wrong_every: int = 0):
        self.golds = sorted(((it["problem"], it["answer"]) for it in items),
                            key=lambda pa: -len(pa[0]))
        self.wrong_every = wrong_every
        self.calls = 0

    def generate(self, prompts, *, n=1, temperature=1.0, top_p=1.0, top_k=0,
                 max_new_tokens=256, seed=0, **_):
        assert max_new_tokens >= 1
        self.calls += 1
        out = []
        for i, p in enumerate(prompts):
            gold = next(g for prob, g in self.golds if prob in p)
            if self.wrong_every and (seed + i) % self.wrong_every == 0:
                gold = "wrong"
            text = f"Reasoning ... so the final answer is \\boxed{{{gold}}}."
            out.append(Sample(p, i, 0, [1, 2, 3], text, "stop", seed))
        return out


def _write(tmp: Path, name: str, rows: list[dict]) -> None:
    (tmp / name).mkdir(parents=True, exist_ok=True)
    (tmp / name / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                            encoding="utf-8")


@pytest.fixture()
def fixture_dir(tmp_path: Path) -> Path:
    """A few records of every benchmark in its exact format (see ../shared/benchmarks)."""
    s = COT_SUFFIX
    _write(tmp_path, "gsm8k", [
        {"question": "Janet has 3 ducks and buys 2 more. How many ducks?",
         "answer": "She has 3+2=<<3+2=5>>5 ducks.\n#### 5"},
        {"question": "A farm sells 1,250 eggs a day for 1 dollar each. Revenue per day?",
         "answer": "1250*1=<<1250*1=1250>>1250\n#### 1,250"},
    ])
    _write(tmp_path, "math500", [
        {"problem": "Convert $(0,3)$ to polar coordinates." + s,
         "answer": "\\left( 3, \\frac{\\pi}{2} \\right)", "subject": "Precalculus", "level": 2,
         "unique_id": "test/precalculus/807.json"},
        {"problem": "How much money?" + s, "answer": "\\$32,\\!348",
         "subject": "Algebra", "level": 3, "unique_id": "test/algebra/1.json"},
        {"problem": "Who wins?" + s, "answer": "\\text{Evelyn}", "subject": "Algebra",
         "level": 1, "unique_id": "test/algebra/2.json"},
        {"problem": "An angle?" + s, "answer": "90^\\circ", "subject": "Geometry", "level": 1,
         "unique_id": "test/geometry/3.json"},
    ])
    _write(tmp_path, "aime24", [{"problem": "Find the number of ways." + s, "answer": "25"},
                                {"problem": "Find m+n." + s, "answer": "204"}])
    _write(tmp_path, "aime25", [{"problem": "Find the sum of all bases b." + s, "answer": "70"}])
    _write(tmp_path, "amc23", [{"problem": "Compute x." + s, "answer": "27"},
                               {"problem": "Compute y." + s, "answer": "-1"}])
    _write(tmp_path, "olympiadbench", [
        {"problem": "Find the minimum." + s, "answer": "$\\frac{1}{2 n+2}$"},
        {"problem": "Find all triples." + s, "answer": "$(1,8,19), (2,7,13), (4,5,7)$"},
        {"problem": "Find both values." + s, "answer": "$69$,$84$"},
        {"problem": "Find f and g." + s, "answer": "$f(n)=n$, $g(n)=1$"},
        {"problem": "Let $T=0$. Find k." + s, "answer": "3"},
    ])
    # the paper's 910 items add OE_TO_physics_en_COMP (Hothan/OlympiadBench row fields)
    (tmp_path / "olympiadbench" / ev.OLYMPIADBENCH_PHYSICS_FILE).write_text(json.dumps(
        {"id": 1606, "context": "A ball falls freely from rest.", "question": "Find its speed "
         "after 2 s with g = 10.", "final_answer": ["$20$"], "unit": "m/s"}) + "\n",
        encoding="utf-8")
    _write(tmp_path, "minerva", [{"problem": "Compute the luminosity." + s, "answer": "4.5e33"},
                                 {"problem": "Angle?" + s, "answer": "np.arcsin(10/13)"},
                                 {"problem": "Rate?" + s, "answer": "\\frac{1}{2}"}])
    return tmp_path


def test_registry_matches_config():
    # the config's list is the source: the registry refuses other names when it is imported
    assert set(ev.BENCHMARKS.names()) == set(KNOWN_BENCHMARKS)


def test_local_formats(fixture_dir):
    gsm = ev.load_benchmark("gsm8k", data_dir=fixture_dir)
    assert [it["answer"] for it in gsm] == ["5", "1250"]
    m5 = ev.load_benchmark("math500", data_dir=fixture_dir)
    assert all(not it["problem"].endswith("\\boxed{}.") for it in m5)
    assert m5[0]["id"] == "test/precalculus/807.json" and m5[0]["subject"] == "Precalculus"
    ob = ev.load_benchmark("olympiadbench", data_dir=fixture_dir)
    assert [it["answer"] for it in ob[:4]] == ["\\frac{1}{2 n+2}", "(1,8,19), (2,7,13), (4,5,7)",
                                               "69,84", "f(n)=n, g(n)=1"]
    assert len(ob) == 6 and ob[-1]["answer"] == "20" and ob[-1]["subject"] == "physics"
    assert ob[-1]["problem"].startswith("A ball falls freely from rest.\n\nFind its speed")
    maths = ev.load_benchmark("olympiadbench", data_dir=fixture_dir,
                              olympiadbench_subset="maths_en")
    assert len(maths) == 5
    assert len(ev.load_benchmark("olympiadbench", data_dir=fixture_dir, limit=2)) == 2


def _oracle_score(name, **kw):
    items = ev.load_benchmark(name, **kw)
    summary = ev.evaluate(OracleEngine(items), None, [name], runs=1, **kw)
    return items, summary.results[name]


@pytest.mark.parametrize("name", MATH_BENCHMARKS)
def test_gold_oracle_fixtures(fixture_dir, name):
    items, res = _oracle_score(name, data_dir=fixture_dir)
    assert res.n == len(items) > 0
    assert res.accuracies == [1.0]


@pytest.mark.parametrize("name", ["gsm_symbolic", "champ"])
def test_gold_oracle_standins(name):
    pytest.importorskip("champ_dataset") if name == "champ" else None
    items, res = _oracle_score(name, limit=20)
    assert res.n == 20 and res.accuracies == [1.0]


def test_stand_in_copy_is_read_where_the_generator_is_missing(tmp_path, monkeypatch):
    from vdlib.evaluation import benchmarks as bm
    from vdlib.loop.policy import training_problems, training_seed

    direct = ev.load_benchmark("gsm_symbolic", limit=5, seed=training_seed(3))
    path = bm.write_stand_in_copy("gsm_symbolic", tmp_path, limit=5, seed=training_seed(3))
    assert path == tmp_path / "gsm_symbolic" / "seed10003_n5.jsonl"

    def missing(limit, seed):
        raise ImportError("no reasoning_gym on this machine")

    spec = bm.BENCHMARKS.get("gsm_symbolic")
    monkeypatch.setitem(bm.BENCHMARKS._items, "gsm_symbolic",
                        dataclasses.replace(spec, load=missing))
    assert ev.load_benchmark("gsm_symbolic", data_dir=tmp_path, limit=5,
                             seed=training_seed(3)) == direct
    assert training_problems("gsm_symbolic", 5, 3, str(tmp_path)) == [
        {"question": it["problem"], "answer": it["answer"]} for it in direct]
    with pytest.raises(ImportError):  # another size or seed has no copy: the generator runs
        ev.load_benchmark("gsm_symbolic", data_dir=tmp_path, limit=4, seed=training_seed(3))
    with pytest.raises(ValueError, match="not a generated stand-in; allowed: .*gsm_symbolic"):
        bm.write_stand_in_copy("gsm8k", tmp_path)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/benchmarks not present")
@pytest.mark.parametrize("name", MATH_BENCHMARKS)
def test_gold_oracle_real_files(name, tmp_path):
    # the shared copy holds the 674 maths items only (no physics file): subset maths_en
    kw = {"olympiadbench_subset": "maths_en"}
    items = ev.load_benchmark(name, data_dir=SHARED, **kw)
    summary = ev.evaluate(OracleEngine(items), None, [name], runs=1, data_dir=SHARED,
                          out_dir=tmp_path, batch_size=256, **kw)
    records = [json.loads(x) for x in (tmp_path / name / "run0.jsonl").read_text().splitlines()]
    misses = [(r["id"], r["gold"], r["extracted"]) for r in records if not r["correct"]]
    acc = summary.results[name].accuracies[0]
    print(f"\n{name}: gold oracle {acc:.2%} over {len(items)} items; misses: {misses}")
    assert acc >= 0.995, misses


def test_multi_answer_rule():
    item = {"benchmark": "olympiadbench", "answer": "69,84"}
    assert ev.grade(item, "\\boxed{84, 69}")["correct"]
    assert ev.grade(item, "\\boxed{$69$, $84$}")["correct"]
    assert not ev.grade(item, "\\boxed{69}")["correct"]
    assert not ev.grade(item, "\\boxed{69, 84, 1}")["correct"]
    tup = {"benchmark": "olympiadbench", "answer": "(1,8,19), (2,7,13)"}
    assert ev.grade(tup, "\\boxed{(2,7,13), (1,8,19)}")["correct"]
    assert not ev.grade(tup, "\\boxed{(1,8,19), (2,13,7)}")["correct"]
    eqs = {"benchmark": "olympiadbench", "answer": "f(n)=n, g(n)=1"}
    assert ev.grade(eqs, "\\boxed{g(n)=1, f(n)=n}")["correct"]
    assert not ev.grade(eqs, "\\boxed{f(n)=n}")["correct"]


def test_grade_basics():
    item = {"benchmark": "gsm8k", "answer": "1250"}
    assert ev.grade(item, "so \\boxed{1,250}") == {"extracted": "1,250", "correct": True}
    assert ev.grade(item, "no box here 1250") == {"extracted": None, "correct": False}
    assert ev.grade(item, "\\boxed{1250} then \\boxed{12") == {"extracted": None,
                                                                "correct": False}


def test_mean_and_se():
    assert ev.mean_and_se([0.2]) == (0.2, None)
    mean, se = ev.mean_and_se([0.5, 0.6, 0.7])  # the paper's rule: population SD
    assert mean == pytest.approx(0.6) and se == pytest.approx(math.sqrt(0.02 / 3) / math.sqrt(3))
    assert ev.mean_and_se([0.5, 0.6, 0.7], ddof=1)[1] == pytest.approx(0.1 / math.sqrt(3))
    mean, se = ev.mean_and_se([0.3, 0.3])
    assert se == 0.0
    with pytest.raises(ValueError):
        ev.mean_and_se([])
    r = ev.BenchmarkResult("x", 10, [0.1, 0.3], [0, 1])
    assert r.mean == pytest.approx(0.2) and r.se == pytest.approx(0.1 / math.sqrt(2))
    assert ev.BenchmarkResult("x", 10, [0.1, 0.3], [0, 1], ddof=1).se == pytest.approx(0.1)


def test_average_se_is_across_runs_of_per_run_averages():
    s = ev.EvalSummary({"a": ev.BenchmarkResult("a", 5, [0.2, 0.4], [0, 1]),
                        "b": ev.BenchmarkResult("b", 5, [0.6, 0.6], [0, 1])})
    mean, se = s.average()
    assert mean == pytest.approx(0.45)
    assert se == pytest.approx(ev.mean_and_se([0.4, 0.5])[1])


def _summ(**accs):
    return ev.EvalSummary({b: ev.BenchmarkResult(b, 10, a, list(range(len(a))))
                           for b, a in accs.items()})


def test_format_table_markdown_bold_best():
    table = ev.format_table({"Baseline": _summ(gsm8k=[0.5, 0.6, 0.7], math500=[0.4, 0.4, 0.4]),
                             "VD": _summ(gsm8k=[0.6, 0.6, 0.6], math500=[0.2, 0.3, 0.4])})
    lines = table.strip().splitlines()
    assert lines[0] == "| Model | GSM8K | MATH500 | Avg. |"
    # population SD / sqrt(3) (the paper's rule): sqrt(2/300) / sqrt(3) = 4.7 %
    assert lines[2] == "| Baseline | **60.0** ± 4.7 | **40.0** ± 0.0 | **50.0** ± 2.4 |"
    assert lines[3] == "| VD | **60.0** ± 0.0 | 30.0 ± 4.7 | 45.0 ± 2.4 |"


def test_format_table_latex_escaping_and_missing():
    table = ev.format_table({"VD_75 & co": _summ(gsm8k=[0.9]),
                             "R-Zero": _summ(gsm8k=[0.8], aime24=[0.1])}, fmt="latex")
    assert r"VD\_75 \& co & \textbf{90.0} & -- & -- \\" in table
    assert r"R-Zero & 80.0 & \textbf{10.0} & \textbf{45.0} \\" in table
    assert r"Model & GSM8K & AIME'24 & Avg. \\" in table
    assert table.startswith(r"\begin{tabular}{lccc}")
    assert r"$\pm$" in ev.format_table({"a": _summ(x=[0.1, 0.2])}, fmt="latex")
    with pytest.raises(ValueError):
        ev.format_table({}, fmt="html")


@pytest.mark.parametrize("text,choices,expected", [
    ("\\boxed{B}", "ABCD", "B"),
    ("\\boxed{(C)}", "ABCD", "C"),
    ("\\boxed{\\text{D}}", "ABCD", "D"),
    ("\\boxed{A. Paris}", "ABCD", "A"),
    ("A looks right but \\boxed{B}", "ABCD", "B"),
    ("\\boxed{E}", "ABCD", None),                     # not a valid choice, nothing else
    ("\\boxed{42} so the answer is (C)", "ABCD", "C"),  # a non-letter box falls through
    ("The answer is B. Also, the answer is (D).", "ABCD", "D"),
    ("The answer is: A", "AB", "A"),
    ("I considered A and then B", "AB", "B"),
    ("I think option C", "AB", None),                # C is not valid for two choices
    ("A is wrong, so I choose B, not I.", "ABCD", "B"),
    ("no letters here", "ABCD", None),
    (None, "ABCD", None),
    ("\\boxed{B}", ["A", "B"], "B"),
])
def test_parse_choice(text, choices, expected):
    assert ev.parse_choice(text, choices) == expected


def test_choice_converters_and_grading():
    med = ev.BENCHMARKS.get("medqa").convert(
        {"question": "Which drug?", "options": {"A": "x", "B": "y", "C": "z", "D": "w"},
         "answer_idx": "C"}, 0)
    assert med["choices"] == "ABCD" and "(C) z" in med["problem"] and med["answer"] == "C"
    assert ev.grade(med, "the answer is (C)")["correct"]
    assert not ev.grade(med, "\\boxed{B}")["correct"]
    wg = ev.BENCHMARKS.get("winogrande").convert(
        {"sentence": "The cup fit in the bag because _ was small.", "option1": "cup",
         "option2": "bag", "answer": "1"}, 3)
    assert wg["answer"] == "A" and wg["choices"] == "AB"
    assert ev.BENCHMARKS.get("winogrande").convert(
        {"sentence": "s", "option1": "a", "option2": "b", "answer": ""}, 0) is None
    sg = ev.BENCHMARKS.get("supergpqa").convert(
        {"question": "q", "options": list("abcdefghij"), "answer_letter": "J"}, 0)
    assert sg["choices"] == "ABCDEFGHIJ" and ev.grade(sg, "\\boxed{J}")["correct"]
    bbh = ev.BENCHMARKS.get("bbh")
    mc = bbh.convert({"input": "Q\nOptions:\n(A) x\n(B) y\n(C) z", "target": "(B)",
                      "task": "date_understanding"}, 0)
    assert mc["choices"] == "ABC" and ev.grade(mc, "\\boxed{(B)}")["correct"]
    free = bbh.convert({"input": "not ( True ) and True is", "target": "False"}, 1)
    assert "choices" not in free and ev.grade(free, "\\boxed{False}")["correct"]


def test_unknown_benchmark_lists_valid_names(tmp_path):
    with pytest.raises(KeyError) as err:
        ev.load_benchmark("gsm9k")
    assert "gsm8k" in str(err.value) and "winogrande" in str(err.value)
    with pytest.raises(KeyError):
        ev.evaluate(OracleEngine([]), None, ["gsm9k"], runs=1)


@pytest.mark.parametrize("name", ["gsm8k", "medqa", "bbh"])
def test_offline_hub_error(monkeypatch, name):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ev.BenchmarkUnavailableError, match="--data-dir"):
        ev.load_benchmark(name)


def test_missing_local_file(tmp_path):
    with pytest.raises(ev.BenchmarkUnavailableError, match="aime24/test.jsonl"):
        ev.load_benchmark("aime24", data_dir=tmp_path)


@pytest.mark.parametrize("content, error", [
    ('{"problem": "1+1", "answer": "2"}\n{"problem": "2+2", \n', r"test\.jsonl:2: not valid JSON"),
    ('{"problem": "1+1", "answer": "2"}\n[1, 2]\n', r"test\.jsonl:2: a JSON object per line"),
    ('{"problem": "1+1", "answer": "2"}\n{"question": "2+2"}\n', r"test\.jsonl:2: .*no"),
    ("", r"aime24/test\.jsonl holds no items"),
])
def test_bad_benchmark_files_name_the_file_and_line(tmp_path, content, error):
    (tmp_path / "aime24").mkdir()
    (tmp_path / "aime24" / "test.jsonl").write_text(content)
    with pytest.raises(ev.BenchmarkUnavailableError, match=error):
        ev.load_benchmark("aime24", data_dir=tmp_path)


def test_a_failed_evaluation_does_not_block_its_corrected_rerun(fixture_dir, tmp_path):
    items = ev.load_benchmark("olympiadbench", data_dir=fixture_dir)
    out = tmp_path / "out"

    class Broken(OracleEngine):
        def generate(self, *a, **k):
            raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):  # fails before any record is written
        ev.evaluate(Broken(items), None, ["olympiadbench"], runs=1, data_dir=fixture_dir,
                    out_dir=out, temperature=1.5)
    s = ev.evaluate(OracleEngine(items), None, ["olympiadbench"], runs=1, data_dir=fixture_dir,
                    out_dir=out, temperature=0.7)  # the corrected rerun, another protocol
    assert s.results["olympiadbench"].n == 6  # 5 maths + 1 physics (the paper's subset)


def test_evaluate_runs_seeds_records_and_resume(fixture_dir, tmp_path):
    items = ev.load_benchmark("olympiadbench", data_dir=fixture_dir)
    engine = OracleEngine(items, wrong_every=2)
    out = tmp_path / "out"
    s = ev.evaluate(engine, None, ["olympiadbench"], runs=3, seed=10, data_dir=fixture_dir,
                    out_dir=out, batch_size=2)
    r = s.results["olympiadbench"]
    assert r.seeds == [10, 11, 12] and r.n == 6 and len(r.accuracies) == 3
    recs = [json.loads(x) for x in (out / "olympiadbench" / "run1.jsonl").read_text()
            .splitlines()]
    assert {k for k in recs[0]} >= {"benchmark", "id", "problem", "gold", "completion",
                                    "extracted", "correct", "seed", "run"}
    assert all(x["run"] == 1 and x["seed"] == 11 for x in recs)
    assert json.loads((out / "summary.json").read_text())["benchmarks"]["olympiadbench"]["n"] == 6
    calls = engine.calls
    again = ev.evaluate(engine, None, ["olympiadbench"], runs=3, seed=10, data_dir=fixture_dir,
                        out_dir=out, batch_size=2)
    assert engine.calls == calls  # every run read back
    assert again.results["olympiadbench"].accuracies == r.accuracies
    with pytest.raises(ValueError, match="another protocol"):
        ev.evaluate(engine, None, ["olympiadbench"], runs=3, seed=10, temperature=1.0,
                    data_dir=fixture_dir, out_dir=out)


def test_max_context_budget(fixture_dir, tokenizer):
    items = ev.load_benchmark("gsm8k", data_dir=fixture_dir)
    seen = []

    class Recorder(OracleEngine):
        def generate(self, prompts, **kw):
            seen.append(kw["max_new_tokens"])
            return super().generate(prompts, **kw)

    ev.evaluate(Recorder(items), tokenizer, ["gsm8k"], runs=1, data_dir=fixture_dir,
                max_context=200, batch_size=1)
    assert len(seen) == 2 and all(0 < b < 200 for b in seen)
    seen.clear()
    ev.evaluate(Recorder(items), tokenizer, ["gsm8k"], runs=1, data_dir=fixture_dir,
                max_context=200, max_new_tokens=7)
    assert seen == [7]


def test_cli_eval_tiny(tmp_path, capsys):
    from vdlib.app.cli import main

    out = tmp_path / "ev"
    rc = main(["eval", "--model", "tiny-random", "--benchmarks", "gsm_symbolic", "--runs", "2",
               "--limit", "3", "--max-new-tokens", "8", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "| Model | GSM-Symbolic (rg) | Avg. |" in printed and "tiny-random" in printed
    assert len((out / "gsm_symbolic" / "run1.jsonl").read_text().splitlines()) == 3


def _no_engine(monkeypatch):
    """Make opening an engine (loading a model) fail the test."""
    import vdlib.engines.setting

    def refuse(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(vdlib.engines.setting, "open_engine", refuse)


@pytest.mark.parametrize(("argv", "words"), [
    (["--benchmarks", "nope"], ["evaluation.benchmarks[0]", "allowed values", "gsm8k"]),
    (["--runs", "0"], ["evaluation.runs", "0 < runs"]),
    (["--top-p", "1.5"], ["evaluation.top_p"]),
    (["--device", "tpu"], ["model.device"]),
])
def test_cli_eval_bad_arguments_fail_before_any_model_loads(monkeypatch, capsys, argv, words):
    from vdlib.app.cli import main

    _no_engine(monkeypatch)
    assert main(["eval", "--model", "tiny-random", *argv]) == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err


def test_cli_eval_defaults_are_the_config_evaluation_section(tmp_path):
    """One source: with no flags, `vdlib eval` runs the config's evaluation section (the paper
    profile's, a profile's, or a params file's); flags override single keys."""
    import dataclasses

    from vdlib.app.cli import build_parser, eval_config
    from vdlib.config.experiment import EvaluationConfig, load_params

    def cfg(*argv):
        return eval_config(build_parser().parse_args(["eval", "--model", "m", *argv]))

    assert cfg().evaluation == EvaluationConfig()
    assert cfg().seed == 0 and cfg().model.device == "auto"
    assert cfg("--profile", "tiny").evaluation == load_params({"profile": "tiny"}).evaluation
    params = tmp_path / "p.yaml"
    params.write_text("profile: tiny\nseed: 4\nevaluation: {runs: 2, limit: 5}\n")
    got = cfg("--params", str(params), "--limit", "7", "--benchmarks", "gsm8k", "minerva")
    want = dataclasses.replace(load_params(params).evaluation, limit=7,
                               benchmarks=["gsm8k", "minerva"])
    assert got.evaluation == want and got.evaluation.runs == 2 and got.seed == 4
    # every evaluation key has a flag, and evaluate() defaults to the same values
    import inspect

    from vdlib.app.cli import EVAL_FLAG_KEYS

    # keys only the notebooks' tables read (how seeds pool, which tables evaluate once, the
    # out-of-domain table's benchmarks, the judge) need no flag of `vdlib eval`
    table_keys = {"per_seed", "single_eval_runs", "ood_benchmarks", "ood_data_dir", "judge"}
    assert set(EVAL_FLAG_KEYS) == {f.name for f in dataclasses.fields(EvaluationConfig)} \
        - table_keys
    sig = inspect.signature(ev.evaluate).parameters
    for key in EVAL_FLAG_KEYS:
        if key in sig and key != "benchmarks":
            assert sig[key].default == getattr(EvaluationConfig(), key), key
