"""notebooks/07_method_walkthrough.ipynb executed by the batch runner, and its values checked
(split from tests/test_notebooks.py so that ``pytest -n 2 --dist loadfile`` runs this
execution beside the other notebooks' instead of after them on one worker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_notebooks import _code_cells

ROOT = Path(__file__).resolve().parent.parent
WALKTHROUGH = ROOT / "notebooks" / "07_method_walkthrough.ipynb"


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    """notebooks/07_method_walkthrough.ipynb run by the batch runner with its own tiny params
    (the packaged SmolLM2 on CPU, nothing downloaded). Returns (summary, report folder,
    executed copy)."""
    from vdlib.app.notebooks import run_notebooks

    out = tmp_path_factory.mktemp("walkthrough") / "outputs"
    [job] = run_notebooks("tiny", [WALKTHROUGH.stem], ROOT / "notebooks", ROOT / "params", out,
                          cwd=ROOT)
    assert job.status == "ran", job.error
    folder = job.report.parent
    return json.loads(job.report.read_text()), folder, job.output


def _markdown(nb: Path) -> list[str]:
    cells = json.loads(nb.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def test_walkthrough_follows_algorithm_1_and_cites_the_paper():
    """Sections 0-9: the loop at a glance, seven in the order of Algorithm 1, the three mask
    regimes and the schedules, each heading citing a section, equation or appendix of the
    paper; the code cells only call vdlib (no function, class or lambda defined in the
    notebook)."""
    import re

    headings = [line for text in _markdown(WALKTHROUGH) for line in text.splitlines()
                if line.startswith("## ")]
    assert [h.split("·")[0].strip("# ").strip() for h in headings] == [str(i) for i in
                                                                        range(0, 10)]
    for h in headings:
        assert re.search(r"Sec\. \d|Eq\. \d|App\. [A-F]", h), h
    order = ["loop", "mask", "Sampling", "Self-consistency", "repetition penalty", "GRPO",
             "curriculum", "diversity", "fresh mask per batch", "Schedules"]
    assert all(word.lower() in h.lower() for word, h in zip(order, headings, strict=True))
    code = "\n".join(_code_cells(WALKTHROUGH))
    for defined in ("def ", "class ", "lambda", "torch.softmax", "import numpy"):
        assert defined not in code, defined
    assert "from vdlib" in code


def test_teaching_notebooks_give_the_default_parse_failure_reward():
    """Where the quickstart and the walkthrough say what an unparseable rollout earns, they
    give the config's default (Algorithm 1's 0) under its key, never R-Zero's -1 as if it were
    the default (issue 55, item 6)."""
    import re

    from vdlib.config.experiment import load_params

    default = load_params({"profile": "tiny"}).scoring.parse_failure_reward
    for nb in (ROOT / "notebooks" / "00_quickstart.ipynb", WALKTHROUGH):
        text = "\n".join(_markdown(nb))
        assert f"parse_failure_reward: {default}" in text, nb.name
        assert not re.search(r"-1 for an unparseable", text), nb.name


def test_walkthrough_proposer_reward_is_min_acc_inside_the_window(walked):
    import numpy as np
    import pandas as pd

    summary, folder, _ = walked
    tau_min, tau_max = summary["config"]["scoring"]["tau_min"], summary["config"]["scoring"][
        "tau_max"]
    curve = pd.read_csv(folder / "proposer_reward.csv")  # the plotted numbers
    inside = (curve["acc"] >= tau_min - 1e-9) & (curve["acc"] <= tau_max + 1e-9)
    assert inside.any() and (~inside).any()
    acc = curve.loc[inside, "acc"].to_numpy()
    assert curve.loc[inside, "reward"].to_numpy() == pytest.approx(np.minimum(acc, 1 - acc))
    assert (curve.loc[~inside, "reward"] == 0).all()
    assert curve.loc[curve["reachable"], "acc"].round(6).tolist() == [k / 10 for k in range(11)]
    assert {k: v["acc"] for k, v in summary["votes"].items()} == {
        "too easy": 0.9, "at the edge": 0.5, "split": 0.4, "too hard": 0.1}
    assert summary["votes"]["at the edge"]["majority"] == "34"  # 34, 34.0 and 68/2 are one


def test_walkthrough_samples_under_the_mask_hold_no_dropped_id(walked):
    import pandas as pd

    from vdlib.engines.models import checkpoint_path, load_tokenizer
    from vdlib.method.vocab_dropout import VocabDropout

    summary, folder, _ = walked
    mask = summary["mask"]
    tok = load_tokenizer("smollm2-135m")
    vd = VocabDropout.for_checkpoint(str(checkpoint_path("smollm2-135m")), tok,
                                     alpha=summary["config"]["vocab_dropout"]["alpha"])
    allowed = vd.sample(mask["seed"])
    assert int(allowed.sum()) == mask["allowed"]
    assert 0.7 < mask["allowed"] / mask["vocab_width"] < 0.8  # the mask drops about 1 - alpha
    assert summary["samples"] and all(s["token_ids"] for s in summary["samples"])
    for s in summary["samples"]:
        assert s["mask_seed"] == mask["seed"]
        assert vd.dropped_ids(s["token_ids"], s["mask_seed"]) == []
    assert (pd.read_csv(folder / "masked_samples.csv")["dropped ids sampled"] == 0).all()
    # the update scores the sampled tokens over the full vocabulary: never above the sampler's
    lp = summary["logprobs"]
    full, masked = lp["log p (full vocabulary)"], lp["log p (under the mask)"]
    assert all(f <= m + 1e-5 for f, m in zip(full, masked, strict=True))
    assert any(f < m - 1e-4 for f, m in zip(full, masked, strict=True))
    assert 0 < mask["dropped_mass"] < 1
    fresh = pd.read_csv(folder / "fresh_masks.csv")
    assert fresh["mask seed"].nunique() == 4
    assert fresh["overlap with the first"].iloc[1:].to_numpy() == pytest.approx([0.6] * 3,
                                                                                 abs=0.02)


def test_walkthrough_bleu_clusters_and_penalties(walked):
    import pandas as pd

    from vdlib.method.rewards import bleu_cluster_penalty

    summary, folder, _ = walked
    bleu = summary["bleu"]
    assert bleu["labels"] == [0, 0, 0, 1, 1, 2]  # the two near-duplicate families
    assert bleu["penalties"] == pytest.approx([3 / 6] * 3 + [2 / 6] * 2 + [1 / 6])
    assert bleu["penalties"] == bleu_cluster_penalty(bleu["questions"])
    pairs = pd.read_csv(folder / "bleu_distance.csv")
    assert (pairs.loc[pairs["i"] == pairs["j"], "distance"] == 0).all()
    assert (pairs.loc[pairs["same_cluster"] & (pairs["i"] != pairs["j"]), "distance"]
            < summary["config"]["scoring"]["bleu_threshold"]).all()


def test_walkthrough_grpo_advantages_and_cov_selection(walked):
    import pandas as pd

    summary, folder, _ = walked
    g = summary["grpo"]
    adv = g["advantages"]
    assert sum(adv[:4]) == pytest.approx(0, abs=1e-6) and adv[4:] == [0.0] * 4  # a flat group
    assert adv[0] > adv[1] > 0 > adv[2] == adv[3]  # the order of the rewards
    tokens = pd.read_csv(folder / "covariance.csv")
    assert g["kl_cov_selected"] == tokens["kl_cov"].sum() == 1
    assert tokens.loc[tokens["kl_cov"], "covariance"].max() == tokens["covariance"].max()
    picked = tokens[tokens["clip_cov"]]
    assert len(picked) == g["clip_cov_selected"] == 1
    assert ((picked["covariance"] > 1) & (picked["covariance"] < 5) & ~picked["clipped"]).all()
    assert (tokens["k3_kl"] >= 0).all() and tokens["clipped"].mean() == pytest.approx(
        g["clip_fraction"])


def test_walkthrough_filter_and_targets(walked):
    import pandas as pd

    _, folder, _ = walked
    f = pd.read_csv(folder / "curriculum_filter.csv",
                    dtype={"target (paper)": str, "target (R-Zero)": str}).set_index("question")
    assert f["kept"].to_dict() == {"too easy": False, "at the edge": True, "split": True,
                                   "too hard": False, "unparsed": False}
    assert f.loc["split", "target (paper)"] == "8"  # the proposer's stated answer
    assert f.loc["split", "target (R-Zero)"] == "7"  # the solvers' majority


def test_walkthrough_phase_switch_losses_and_schedules(walked):
    import pandas as pd

    summary, folder, _ = walked
    switch = pd.read_csv(folder / "phase_switch.csv").set_index("vocab_dropout.phases")
    alpha = summary["config"]["vocab_dropout"]["alpha"]
    assert switch["proposer GRPO rollouts (train)"].to_dict() == {
        "both": alpha, "train": alpha, "gen": 1.0, "none": 1.0}
    assert switch["curriculum generation (gen)"].to_dict() == {
        "both": alpha, "train": 1.0, "gen": alpha, "none": 1.0}
    assert (switch["solver GRPO"] == 1.0).all()  # the solver is never masked
    losses = pd.read_csv(folder / "grpo_losses.csv").set_index("variant")
    assert (losses["beta x k3 to pi_ref"] > 0).all()  # every variant carries the KL term
    assert losses.loc["KL-Cov", "total"] == pytest.approx(summary["grpo"]["kl_cov_loss"],
                                                          abs=1e-4)
    assert summary["schedules"]["linear"] == [0.75, 0.8125, 0.875, 0.9375, 1.0]
    assert summary["schedules"]["fixed"] == [alpha] * 5
    assert summary["schedules"]["adaptive"][0] == alpha


def test_walkthrough_three_mask_regimes(walked):
    """Section 8: the three regimes' metrics exist, no sample holds an id its mask drops, the
    masks' measured coverage is the formulas', and on the notebook's seed the fresh masks'
    distinct-token count is at least the fixed mask's."""
    from vdlib.engines.models import checkpoint_path, load_tokenizer
    from vdlib.method.mask_arithmetic import allowed_at_least_once, allowed_every_batch
    from vdlib.method.vocab_dropout import VocabDropout

    summary, folder, _ = walked
    r = summary["regimes"]
    assert list(r) == ["no mask", "fixed mask", "fresh mask per batch"]
    for m in r.values():
        assert m["samples"] == 6 and m["batches"] == 3 and m["distinct tokens"] > 0
        assert 0 <= m["self_bleu"] <= 1 and 1 <= m["vendi"] <= 6 + 1e-6
        assert m["dropped ids sampled"] == 0
    assert [m["masks"] for m in r.values()] == [0, 1, 3]
    alpha = summary["config"]["vocab_dropout"]["alpha"]
    fixed, fresh = r["fixed mask"], r["fresh mask per batch"]
    assert fixed["allowed at least once"] == fixed["allowed every batch"] == pytest.approx(
        alpha, abs=0.01)
    assert fresh["allowed at least once"] == pytest.approx(allowed_at_least_once(alpha, 3),
                                                           abs=0.01)
    assert fresh["allowed every batch"] == pytest.approx(allowed_every_batch(alpha, 3),
                                                         abs=0.01)
    assert fresh["distinct tokens"] >= fixed["distinct tokens"]
    tok = load_tokenizer("smollm2-135m")
    vd = VocabDropout.for_checkpoint(str(checkpoint_path("smollm2-135m")), tok, alpha=alpha)
    samples = summary["regime_samples"]
    assert len({s["mask_seed"] for s in samples["fresh mask per batch"]}) == 3
    # batch 0: the same mask and random numbers in both masked regimes, so the same completions
    assert [s["token_ids"] for s in samples["fixed mask"][:2]] == [
        s["token_ids"] for s in samples["fresh mask per batch"][:2]]
    for regime in ("fixed mask", "fresh mask per batch"):
        for s in samples[regime]:
            assert vd.dropped_ids(s["token_ids"], s["mask_seed"]) == []
    assert sum(len(vd.dropped_ids(s["token_ids"], samples["fixed mask"][0]["mask_seed"]))
               for s in samples["no mask"]) > 0  # unmasked samples do use dropped ids
    template = summary["template"]
    assert template["L"] > 5 and template["alpha ** L"] == pytest.approx(alpha ** template["L"])
    assert template["measured"] == pytest.approx(template["alpha ** L"], abs=0.05)
    for figure in ("mask_regimes", "alpha_arithmetic"):
        assert (folder / f"{figure}.png").stat().st_size > 10_000, figure


def test_walkthrough_templated_set_is_less_diverse(walked):
    summary, folder, copy = walked
    d = summary["diversity"]
    assert d["templated"]["self_bleu"] > d["varied"]["self_bleu"]
    assert d["templated"]["vendi"] < d["varied"]["vendi"]
    assert 1 <= d["templated"]["vendi"] < d["varied"]["vendi"] <= 8
    for figure in ("mask_effect", "proposer_reward", "bleu_distance", "covariance",
                   "cosine_kernels"):
        assert (folder / f"{figure}.png").stat().st_size > 10_000, figure
    cells = json.loads(copy.read_text())["cells"]
    assert not any(o.get("output_type") == "error" for c in cells for o in c.get("outputs", []))
