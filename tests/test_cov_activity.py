"""KL-Cov / Clip-Cov activity: the per-step gradient ratio, the per-iteration summary written
into metrics.json and the results records, and ``vdlib results``' warning for an arm whose
method never acted (issue 51: the committed gpu-small KL-Cov runs, 27 of 27 steps inert)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from vdlib.method.grpo import clip_cov_loss, kl_cov_loss
from vdlib.metrics.cov_activity import (
    COV_RECORD_FIELDS,
    cov_iteration_stats,
    cov_steps,
    inactive_cov_warnings,
)
from vdlib.utils.archive import resolve

ROOT = Path(__file__).resolve().parents[1]
RUNS = resolve(ROOT / "docs/results/archives/gpu_small_entropy.zip"
               / "h200x4_2026-11-28/entropy_s0/runs")


def _batch():
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(4, 6, generator=g) * 3
    mask = torch.ones(4, 6)
    mask[1, 4:] = 0
    return logp, torch.tensor([1.0, -1.0, 0.5, -0.5]), mask


def test_kl_cov_grad_ratio_is_the_ratio_of_the_two_terms_gradients():
    """``grad_ratio`` equals ||d penalty / d logp|| / ||d policy term / d logp|| computed by
    autograd; 0 (and active_fraction 0) where the old log-probs equal the current ones."""
    logp, adv, mask = _batch()
    old = logp - 1e-6  # a rounding-sized difference: every selected token acts
    selected = torch.zeros(4, 6, dtype=torch.bool)
    selected[0, 1] = selected[2, 3] = True
    x = logp.clone().requires_grad_()
    per_token, stats = kl_cov_loss(x, old, adv, mask, kl_coef=1.0, selected=selected)
    (full,) = torch.autograd.grad(per_token.sum(), x)
    y = logp.clone().requires_grad_()
    (pg,) = torch.autograd.grad((-adv[:, None] * torch.exp(y - old) * mask).sum(), y)
    expected = float((full - pg).norm() / pg.norm())
    assert float(stats["grad_ratio"]) == pytest.approx(expected, rel=1e-4)
    assert float(stats["active_fraction"]) == 1.0 and expected > 0.1
    _, same = kl_cov_loss(logp, logp, adv, mask, selected=selected)
    assert float(same["grad_ratio"]) == 0.0 and float(same["active_fraction"]) == 0.0
    _, none = kl_cov_loss(logp, old, adv, mask, selected=torch.zeros_like(selected))
    assert float(none["active_fraction"]) == 0.0  # nothing selected: 0, not NaN


def test_clip_cov_grad_ratio_is_the_share_of_the_policy_gradient_it_cuts():
    logp, adv, mask = _batch()
    selected = torch.zeros(4, 6, dtype=torch.bool)
    selected[0, 0] = True
    x = logp.clone().requires_grad_()
    per_token, stats = clip_cov_loss(x, logp, adv, mask, selected=selected)
    (cut,) = torch.autograd.grad(per_token.sum(), x)
    y = logp.clone().requires_grad_()
    (whole,) = torch.autograd.grad((-adv[:, None] * torch.exp(y - logp) * mask).sum(), y)
    expected = float((whole - cut).norm() / whole.norm())
    assert float(stats["grad_ratio"]) == pytest.approx(expected, rel=1e-5) and expected > 0


def _history(path: Path) -> list:
    return json.loads(path.read_text(encoding="utf-8"))["log_history"]


def test_the_committed_kl_cov_steps_never_acted_and_clip_cov_did():
    """On the committed gpu-small logs: KL-Cov 0 acting steps of 3 in every iteration
    (n_active 0), Clip-Cov acting in some; the baseline's log has no such stats."""
    for t in (1, 2, 3):
        kl = cov_iteration_stats(_history(RUNS / f"kl_cov-seed0/iter_{t}/proposer_train.json"))
        assert kl["cov_steps"] == 3 and kl["cov_active_steps"] == 0
        assert kl["kl_cov_active_fraction"] == 0 and kl["kl_cov_penalty"] == 0
        assert kl["kl_cov_grad_ratio"] is None  # not logged before issue 51
    clip = [cov_iteration_stats(_history(RUNS / f"clip_cov-seed0/iter_{t}/proposer_train.json"))
            for t in (1, 2, 3)]
    assert sum(c["cov_active_steps"] for c in clip) > 0
    assert set(clip[0]) <= set(COV_RECORD_FIELDS)
    assert cov_iteration_stats([{"loss": 0.1, "step": 1}]) == {}


def test_cov_steps_skip_malformed_rows():
    rows = ["x", None, {"kl_cov/n_selected": "1", "kl_cov/n_active": float("nan")},
            {"clip_cov/n_selected": 2.0, "step": 4}]
    steps = cov_steps(rows)
    assert [s["variant"] for s in steps] == ["kl_cov", "clip_cov"]
    assert steps[0]["acted"] is False and steps[1]["acted"] is True


def _rec(arm, seed, t, **kw):
    return {"arm": arm, "seed": seed, "iteration": t, **kw}


def test_inactive_cov_warnings():
    records = [
        *[_rec("kl_cov", s, t, cov_steps=3, cov_active_steps=0) for s in (0, 1) for t in (1, 2)],
        _rec("kl_cov_offpolicy", 0, 1, cov_steps=3, cov_active_steps=0),
        _rec("kl_cov_offpolicy", 0, 2, cov_steps=3, cov_active_steps=2),
        _rec("clip_cov", 0, 1, cov_steps=3, cov_active_steps=0),
        _rec("kl_cov_inert", 0, 1),  # exported before the fields existed
        _rec("baseline", 0, 1), "junk", {"arm": 3},
    ]
    lines = inactive_cov_warnings(records)
    assert len(lines) == 3
    assert lines[0].startswith("arm 'kl_cov': KL-Cov's penalty had a gradient on no selected")
    assert "12 proposer steps (4 records)" in lines[0]
    assert lines[1].startswith("arm 'clip_cov': Clip-Cov selected no token")
    assert lines[2].startswith("arm 'kl_cov_inert' (kl_cov): no record carries cov_steps")
    assert inactive_cov_warnings([]) == []


def test_iteration_metrics_carry_the_cov_summary(tmp_path):
    from vdlib.metrics.loop import iteration_metrics

    it = tmp_path / "iter_1"
    it.mkdir()
    for name in ("proposer_rollouts.jsonl", "questions.jsonl", "curriculum.jsonl"):
        (it / name).write_text("", encoding="utf-8")
    src = RUNS / "kl_cov-seed0/iter_1/proposer_train.json"
    (it / "proposer_train.json").write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    m = iteration_metrics(it, 1, {"train": 1.0, "gen": 1.0})
    assert (m["cov_steps"], m["cov_active_steps"]) == (3, 0)
    (it / "proposer_train.json").write_text(json.dumps({"log_history": [{"loss": 1.0}]}),
                                            encoding="utf-8")
    assert "cov_steps" not in iteration_metrics(it, 1, {"train": 1.0, "gen": 1.0})


def test_vdlib_results_warns_about_an_arm_that_never_acted(tmp_path, monkeypatch, capsys):
    import vdlib.report.results as results
    from vdlib.app.cli import main

    monkeypatch.setattr(results, "results_report", lambda *a, **k: [])
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"records": [
        _rec("kl_cov", 0, 1, cov_steps=3, cov_active_steps=0, valid_fraction=0.5),
        _rec("baseline", 0, 1, valid_fraction=0.5)]}), encoding="utf-8")
    assert main(["results", str(path), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "vdlib results: warning: arm 'kl_cov': KL-Cov's penalty had a gradient on no" in err
    assert "arm 'baseline'" not in err and err.count("warning") == 1


def test_collect_results_carries_the_cov_summary(tmp_path):
    from vdlib.report.results import collect_results

    for arm, extra in (("kl_cov", {"cov_steps": 3, "cov_active_steps": 2,
                                   "kl_cov_penalty": 1e-7}), ("baseline", {})):
        it = tmp_path / arm / "iter_1"
        it.mkdir(parents=True)
        (it / "metrics.json").write_text(json.dumps({"valid_fraction": 0.5, **extra}),
                                         encoding="utf-8")
    data = collect_results({("kl_cov", 0): tmp_path / "kl_cov",
                            ("baseline", 0): tmp_path / "baseline"})
    kl, base = data["records"]
    assert (kl["cov_steps"], kl["cov_active_steps"], kl["kl_cov_penalty"]) == (3, 2, 1e-7)
    assert not set(COV_RECORD_FIELDS) & set(base)
    assert inactive_cov_warnings(data["records"]) == []
