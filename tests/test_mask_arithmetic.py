"""vdlib.method.mask_arithmetic: each formula against real VocabDropout draws and slow
references."""

from __future__ import annotations

import pytest
import torch

from vdlib.method.mask_arithmetic import (
    allowed_at_least_once,
    allowed_every_batch,
    distinct_free_tokens,
    expected_dropped_mass,
    template_survival,
)
from vdlib.method.vocab_dropout import VocabDropout

V = 20000
PROTECTED = [0, 1, 2]


@pytest.fixture(scope="module")
def masks():
    vd = VocabDropout.from_sizes(n_real=V, vocab_width=V, alpha=0.75, protected=PROTECTED)
    return torch.stack([vd.sample(s) for s in range(400)])  # (400, V)


def test_template_survival_is_the_share_of_masks_allowing_every_token(masks):
    template = [5, 17, 17, 300, 4001, 0]  # 4 distinct free ids; id 0 is protected
    length = distinct_free_tokens(template, PROTECTED)
    assert length == 4
    survived = masks[:, template].all(dim=1).float().mean().item()
    assert survived == pytest.approx(template_survival(0.75, length), abs=0.06)  # 0.316
    assert template_survival(0.75, 0) == 1.0
    assert template_survival(0.75, 4, batches=2) == pytest.approx(0.75 ** 8)


@pytest.mark.parametrize("batches", [1, 2, 4, 8])
def test_coverage_over_fresh_masks_matches_the_formulas(masks, batches):
    free = masks[:batches, 3:]
    assert free.any(dim=0).float().mean().item() == pytest.approx(
        allowed_at_least_once(0.75, batches), abs=0.01)
    assert free.all(dim=0).float().mean().item() == pytest.approx(
        allowed_every_batch(0.75, batches), abs=0.01)
    fixed = masks[[0] * batches, 3:]  # one mask reused: both shares stay alpha
    assert fixed.any(dim=0).float().mean().item() == pytest.approx(
        allowed_at_least_once(0.75, batches, fresh=False), abs=0.01)
    assert fixed.all(dim=0).float().mean().item() == pytest.approx(
        allowed_every_batch(0.75, batches, fresh=False), abs=0.01)


def test_coverage_edge_cases():
    assert allowed_at_least_once(0.75, 0) == 0.0 and allowed_every_batch(0.75, 0) == 1.0
    assert allowed_at_least_once(1.0, 3) == allowed_every_batch(1.0, 3) == 1.0
    assert allowed_at_least_once(0.75, 1) == allowed_every_batch(0.75, 1) == 0.75


def test_expected_dropped_mass_is_the_mean_over_masks(masks):
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(4 * torch.randn(3, V, generator=gen), dim=-1)  # (T, V)
    protected = torch.zeros(V, dtype=torch.bool)
    protected[PROTECTED] = True
    expected = expected_dropped_mass(probs, 0.75, protected)
    realised = torch.stack([(probs * (~m).float()).sum(-1) for m in masks])  # (400, T)
    assert expected.shape == (3,)
    assert realised.mean(0).tolist() == pytest.approx(expected.tolist(), abs=0.02)
    slow = [(1 - 0.75) * sum(float(probs[t, v]) for v in range(V) if v not in PROTECTED)
            for t in range(3)]
    assert expected.tolist() == pytest.approx(slow, rel=1e-4)


def test_expected_dropped_mass_counts_always_dropped_ids():
    p = torch.tensor([0.1, 0.2, 0.3, 0.4])
    protected = torch.tensor([True, False, False, False])
    always = torch.tensor([True, False, False, True])  # a protected id is never dropped
    assert float(expected_dropped_mass(p, 0.5, protected, always)) == pytest.approx(
        0.5 * 0.5 + 0.4)
    assert float(expected_dropped_mass(p, 1.0, protected)) == 0.0


def test_bad_input_fails_with_the_key():
    with pytest.raises(ValueError, match="alpha"):
        template_survival(1.5, 3)
    with pytest.raises(ValueError, match="batches"):
        allowed_at_least_once(0.75, -1)
    with pytest.raises(ValueError, match="length"):
        template_survival(0.75, 2.5)
    with pytest.raises(ValueError, match="protected"):
        expected_dropped_mass(torch.ones(4) / 4, 0.75, torch.zeros(3, dtype=torch.bool))
