"""vdlib.report.mask_regimes: the three mask regimes of notebook 07's section 8 on the tiny
random model, and the mask shares against vdlib.method.mask_arithmetic."""

from __future__ import annotations

import pytest
import torch

from vdlib.method.mask_arithmetic import allowed_at_least_once, allowed_every_batch
from vdlib.method.vocab_dropout import VocabDropout, mask_seed
from vdlib.report import mask_regimes


@pytest.fixture(scope="module")
def tiny():
    from vdlib.engines.models import load_model

    model, tok = load_model("tiny-random")
    return model, tok, VocabDropout.for_model(model, tok, alpha=0.5)


@pytest.fixture(scope="module")
def runs(tiny):
    model, tok, vd = tiny
    return mask_regimes.sample_regimes(model, tok, vd, n=6, batch_size=2, seed=0, iteration=1,
                                       temperature=1.0, top_p=1.0, max_new_tokens=8)


def test_regimes_differ_only_by_their_masks(tiny, runs):
    _, _, vd = tiny
    plan = mask_regimes.regime_plan(0, 1, 3)
    assert list(runs) == list(mask_regimes.REGIMES)
    for regime, batches in runs.items():
        assert [len(b) for b in batches] == [2, 2, 2]
        assert [b[0].mask_seed for b in batches] == plan[regime]
        for batch in batches:
            for s in batch:
                if s.mask_seed is not None:
                    assert vd.dropped_ids(s.token_ids, s.mask_seed) == []
    # batch 0 has the same mask and the same random numbers in the two masked regimes
    assert [s.token_ids for s in runs["fixed mask"][0]] == [
        s.token_ids for s in runs["fresh mask per batch"][0]]
    # the check can fail: the unmasked samples use ids the masks drop
    unmasked = [s for b in runs["no mask"] for s in b]
    assert sum(len(vd.dropped_ids(s.token_ids, plan["fixed mask"][0])) for s in unmasked) > 0


def test_row_masks_mask_each_row_and_reject_a_mismatch():
    allowed = torch.tensor([[True, False, True], [False, True, True]])
    scores = torch.zeros(2, 3)
    out = mask_regimes.RowMasks(allowed)(torch.zeros(2, 1, dtype=torch.long), scores)
    assert torch.isinf(out[~allowed]).all() and (out[allowed] == 0).all()
    with pytest.raises(ValueError, match="masks"):
        mask_regimes.RowMasks(allowed)(None, torch.zeros(3, 3))


def test_regime_metrics_and_coverage_match_the_formulas(tiny, runs):
    _, tok, vd = tiny
    frame = mask_regimes.regime_metrics(runs, tok, vd, embedder="minilm").set_index("regime")
    assert list(frame.index) == list(mask_regimes.REGIMES)
    assert frame["masks"].tolist() == [0, 1, 3]
    assert (frame["dropped ids sampled"] == 0).all()
    assert (frame["distinct tokens"] > 0).all()
    assert frame["vendi"].between(1, 6 + 1e-6).all()
    assert frame.loc["no mask", "allowed at least once"] == 1.0
    fixed, fresh = frame.loc["fixed mask"], frame.loc["fresh mask per batch"]
    assert fixed["allowed at least once"] == fixed["allowed every batch"]
    assert fixed["formula: at least once"] == 0.5
    assert fresh["formula: at least once"] == allowed_at_least_once(0.5, 3) == 0.875
    assert fresh["formula: every batch"] == allowed_every_batch(0.5, 3) == 0.125
    # the tiny vocabulary (a few hundred free ids) scatters around the formula
    assert fresh["allowed at least once"] == pytest.approx(0.875, abs=0.06)
    assert fresh["allowed every batch"] == pytest.approx(0.125, abs=0.06)
    fig = mask_regimes.regime_figure(frame.reset_index())
    assert len(fig.data) == 3


def test_mask_coverage_on_a_large_vocabulary():
    vd = VocabDropout.from_sizes(n_real=30000, vocab_width=30000, alpha=0.75, protected=[0, 1])
    seeds = [mask_seed(0, 1, "gen", b) for b in range(4)]
    fresh = mask_regimes.mask_coverage(vd, seeds)
    assert fresh["allowed at least once"] == pytest.approx(allowed_at_least_once(0.75, 4),
                                                           abs=0.005)
    assert fresh["allowed every batch"] == pytest.approx(allowed_every_batch(0.75, 4), abs=0.01)
    fixed = mask_regimes.mask_coverage(vd, seeds[:1] * 4)
    assert fixed["allowed at least once"] == fixed["allowed every batch"] == pytest.approx(
        0.75, abs=0.01)
    assert mask_regimes.mask_coverage(vd, [None, None]) == {"allowed at least once": 1.0,
                                                            "allowed every batch": 1.0}


def test_template_check_and_expected_mass():
    vd = VocabDropout.from_sizes(n_real=5000, vocab_width=5008, alpha=0.75, protected=[0])
    check = mask_regimes.template_check(vd, [0, 10, 11, 11, 12], range(400))
    assert check["L"] == 3 and check["alpha ** L"] == pytest.approx(0.75 ** 3)
    assert check["measured"] == pytest.approx(0.75 ** 3, abs=0.07)
    protected, always = mask_regimes.mask_classes(vd)
    assert protected.sum() == 1 and always.sum() == 8  # the padded rows
    logits = torch.full((5008,), -1e4)
    logits[0], logits[10], logits[5004] = 0.0, 0.0, 0.0  # protected, drawn, padded: 1/3 each
    assert mask_regimes.expected_mask_mass(vd, logits) == pytest.approx(0.25 / 3 + 1 / 3,
                                                                        rel=1e-4)


def test_alpha_frame_and_figure(tmp_path):
    frame = mask_regimes.alpha_frame([0.75, 0.95], batches=4, lengths=(1, 10))
    fresh = frame[(frame["quantity"] == "allowed at least once (fresh)") & (frame["alpha"] == 0.75)]
    assert fresh["value"].tolist() == pytest.approx([1 - 0.25 ** b for b in range(1, 5)])
    tmpl = frame[(frame["quantity"] == "template survives one mask") & (frame["alpha"] == 0.95)]
    assert tmpl["value"].tolist() == pytest.approx([0.95, 0.95 ** 10])
    mask_regimes.alpha_figure(frame, tmp_path)
    assert (tmp_path / "alpha_arithmetic.png").is_file()
