"""vdlib.method.grpo against slow, obvious references (Python loops over tokens and groups)."""

import inspect
import math
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vdlib.method import grpo

SHAPES = [(1, 1), (2, 3), (3, 7), (5, 16), (8, 40)]


def make_batch(b, t, seed, spread=0.4):
    """Random float64 batch with right padding; row 1 (when b > 2) is fully masked."""
    g = torch.Generator().manual_seed(seed)
    logp = -4 * torch.rand(b, t, generator=g, dtype=torch.float64)
    old = logp + spread * torch.randn(b, t, generator=g, dtype=torch.float64)
    ref = logp + spread * torch.randn(b, t, generator=g, dtype=torch.float64)
    adv = 2 * torch.randn(b, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    if b > 2:
        lengths[1] = 0
    mask = torch.arange(t)[None, :] < lengths[:, None]
    return logp, old, ref, adv, mask


def cells(mask):
    return [(i, j) for i in range(mask.shape[0]) for j in range(mask.shape[1]) if mask[i, j]]


def ref_surrogate(lp, old, a, e_lo, e_hi):
    r = math.exp(lp - old)
    return -min(r * a, min(max(r, 1 - e_lo), 1 + e_hi) * a)


def ref_cov(logp, adv, mask):
    vs = cells(mask)
    ma = sum(float(adv[i]) for i, _ in vs) / len(vs)
    ml = sum(float(logp[i, j]) for i, j in vs) / len(vs)
    return {(i, j): (float(adv[i]) - ma) * (float(logp[i, j]) - ml) for i, j in vs}


def grad_of(fn, logp):
    x = logp.clone().requires_grad_(True)
    fn(x).backward()
    return x.grad


# --------------------------------------------------------------------------- advantages
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.data())
def test_group_advantages_matches_loop(group_size, n_groups, data):
    rewards = data.draw(st.lists(st.floats(-3, 3), min_size=group_size * n_groups,
                                 max_size=group_size * n_groups))
    got = grpo.group_advantages(torch.tensor(rewards, dtype=torch.float64), group_size)
    got_centred = grpo.group_advantages(torch.tensor(rewards, dtype=torch.float64), group_size,
                                        scale=False)
    for k in range(n_groups):
        grp = rewards[k * group_size:(k + 1) * group_size]
        mu = statistics.fmean(grp)
        sd = statistics.stdev(grp) if group_size > 1 else None  # unbiased (n - 1)
        for j, r in enumerate(grp):
            expect = 0.0 if sd is None else (r - mu) / (sd + 1e-6)
            assert got[k * group_size + j].item() == pytest.approx(expect, abs=1e-9, rel=1e-9)
            assert got_centred[k * group_size + j].item() == pytest.approx(r - mu, abs=1e-12)


def test_group_advantages_constant_group_eps_and_errors():
    adv = grpo.group_advantages(torch.tensor([0.5, 0.5, 0.5, 1.0, 0.0, 0.0]), 3)
    assert torch.equal(adv[:3], torch.zeros(3))
    assert adv[3] > 0 > adv[4]
    # eps is added to the (unbiased) std: TRL's 1e-4 gives a visibly different value
    r = torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert grpo.group_advantages(r, 2, eps=1e-4)[0].item() == pytest.approx(0.5 / (0.5**0.5 + 1e-4))
    assert grpo.group_advantages(torch.tensor([1, 0]), 2).dtype == torch.float32
    with pytest.raises(ValueError, match="multiple of group_size"):
        grpo.group_advantages(torch.zeros(5), 2)


# --------------------------------------------------------------------------- aggregation, k3
@pytest.mark.parametrize("b,t", SHAPES)
def test_token_and_seq_means_match_loops(b, t):
    logp, _, _, _, mask = make_batch(b, t, seed=b * 100 + t)
    vs = cells(mask)
    expect = sum(float(logp[i, j]) for i, j in vs) / max(len(vs), 1)
    assert grpo.token_mean(logp, mask).item() == pytest.approx(expect, abs=1e-12)
    assert grpo.token_mean(logp, mask.double()).item() == pytest.approx(expect, abs=1e-12)
    rows = [[float(logp[i, j]) for j in range(t) if mask[i, j]] for i in range(b)]
    rows = [sum(r) / len(r) for r in rows if r]
    expect_seq = sum(rows) / len(rows) if rows else 0.0
    assert grpo.seq_mean_token_mean(logp, mask).item() == pytest.approx(expect_seq, abs=1e-12)


def test_means_of_all_padding_are_zero_not_nan():
    x = torch.randn(3, 4)
    none = torch.zeros(3, 4, dtype=torch.bool)
    assert grpo.token_mean(x, none).item() == 0.0
    assert grpo.seq_mean_token_mean(x, none).item() == 0.0


@pytest.mark.parametrize("b,t", SHAPES)
def test_k3_matches_loop_and_is_nonnegative(b, t):
    logp, _, ref, _, _ = make_batch(b, t, seed=7 + b + t, spread=2.0)
    kl = grpo.k3_kl(logp, ref)
    for i in range(b):
        for j in range(t):
            d = float(ref[i, j] - logp[i, j])
            assert kl[i, j].item() == pytest.approx(math.exp(d) - d - 1, rel=1e-12, abs=1e-15)
    assert (kl >= 0).all()
    assert torch.equal(grpo.k3_kl(logp, logp), torch.zeros_like(logp))


# --------------------------------------------------------------------------- clipped surrogate
@pytest.mark.parametrize("b,t", SHAPES)
@pytest.mark.parametrize("e_lo,e_hi", [(0.2, 0.2), (0.2, 0.28)])
def test_clipped_surrogate_matches_loop(b, t, e_lo, e_hi):
    logp, old, _, adv, mask = make_batch(b, t, seed=b * t + 3)
    loss, frac = grpo.clipped_surrogate(logp, old, adv, mask, e_lo, e_hi)
    n_clip = 0
    for i in range(b):
        for j in range(t):
            if not mask[i, j]:
                assert loss[i, j].item() == 0.0
                continue
            a = float(adv[i])
            expect = ref_surrogate(float(logp[i, j]), float(old[i, j]), a, e_lo, e_hi)
            assert loss[i, j].item() == pytest.approx(expect, rel=1e-12, abs=1e-12)
            r = math.exp(float(logp[i, j] - old[i, j]))
            n_clip += (r > 1 + e_hi and a > 0) or (r < 1 - e_lo and a < 0)  # TRL's region clip
    assert frac.item() == pytest.approx(n_clip / max(len(cells(mask)), 1))
    # per-(B, T) advantages give the same as the broadcast (B,) ones
    loss2, _ = grpo.clipped_surrogate(logp, old, adv[:, None].expand(b, t), mask, e_lo, e_hi)
    assert torch.equal(loss, loss2)


def test_clipped_surrogate_gradient_and_on_policy():
    logp, old, _, adv, mask = make_batch(6, 20, seed=11)
    g = grad_of(lambda x: grpo.token_mean(grpo.clipped_surrogate(x, old, adv, mask)[0], mask), logp)
    n = mask.sum().item()
    n_zero_clipped = 0
    for i, j in cells(mask):
        r = math.exp(float(logp[i, j] - old[i, j]))
        a = float(adv[i])
        clipped = (r > 1.2 and a > 0) or (r < 0.8 and a < 0)
        n_zero_clipped += clipped
        assert g[i, j].item() == pytest.approx(0.0 if clipped else -a * r / n, abs=1e-12)
    assert n_zero_clipped > 0
    assert (g[~mask] == 0).all()
    _, frac = grpo.clipped_surrogate(logp, logp, adv, mask)
    assert frac.item() == 0.0


# --------------------------------------------------------------------------- grpo_loss
@pytest.mark.parametrize("b,t", SHAPES)
def test_grpo_loss_matches_loop(b, t):
    logp, old, ref, adv, mask = make_batch(b, t, seed=31 * b + t)
    beta = 0.05
    loss, stats = grpo.grpo_loss(logp, old, ref, adv, mask, 0.2, 0.28, beta)
    vs = cells(mask)
    tot = kl = 0.0
    for i, j in vs:
        d = float(ref[i, j] - logp[i, j])
        k3 = math.exp(d) - d - 1
        kl += k3
        tot += ref_surrogate(float(logp[i, j]), float(old[i, j]), float(adv[i]), 0.2, 0.28)
        tot += beta * k3
    n = max(len(vs), 1)
    assert loss.item() == pytest.approx(tot / n, rel=1e-10, abs=1e-12)
    assert stats["kl"].item() == pytest.approx(kl / n, rel=1e-10, abs=1e-12)
    assert set(stats) == {"kl", "clip_fraction", "policy_loss"}


def test_grpo_loss_options_and_errors():
    logp, old, ref, adv, mask = make_batch(4, 9, seed=5)
    no_ref, stats = grpo.grpo_loss(logp, old, None, adv, mask, beta=0.0)
    assert stats["kl"].item() == 0.0
    assert no_ref.item() == pytest.approx(
        grpo.token_mean(grpo.clipped_surrogate(logp, old, adv, mask)[0], mask).item())
    with_ref, _ = grpo.grpo_loss(logp, old, ref, adv, mask, beta=1.0)
    assert with_ref.item() > no_ref.item()  # k3 > 0 adds to the loss
    seq, _ = grpo.grpo_loss(logp, old, ref, adv, mask, loss_agg="seq_mean_token_mean")
    per_tok = grpo.clipped_surrogate(logp, old, adv, mask)[0] + 1e-2 * grpo.k3_kl(logp, ref)
    assert seq.item() == pytest.approx(grpo.seq_mean_token_mean(per_tok, mask).item())
    with pytest.raises(ValueError, match="needs ref_logp"):
        grpo.grpo_loss(logp, old, None, adv, mask, beta=0.1)
    with pytest.raises(ValueError, match="token_mean"):
        grpo.grpo_loss(logp, old, ref, adv, mask, loss_agg="sum")


def test_paper_defaults():
    def defaults(fn):
        return {k: p.default for k, p in inspect.signature(fn).parameters.items()}

    assert defaults(grpo.kl_cov_loss)["k_frac"] == 2e-3
    assert defaults(grpo.kl_cov_loss)["kl_coef"] == 1.0
    cc = defaults(grpo.clip_cov_loss)
    assert (cc["clip_ratio"], cc["cov_lb"], cc["cov_ub"]) == (2e-4, 1.0, 5.0)
    assert defaults(grpo.grpo_loss)["beta"] == 1e-2
    assert defaults(grpo.group_advantages)["eps"] == 1e-6


# --------------------------------------------------------------------------- covariance
@pytest.mark.parametrize("b,t", SHAPES)
def test_token_covariance_matches_loop(b, t):
    logp, _, _, adv, mask = make_batch(b, t, seed=b + 17 * t)
    cov = grpo.token_covariance(logp.clone().requires_grad_(True), adv, mask)
    assert not cov.requires_grad
    expect = ref_cov(logp, adv, mask)
    for i in range(b):
        for j in range(t):
            assert cov[i, j].item() == pytest.approx(expect.get((i, j), 0.0), abs=1e-12)


# --------------------------------------------------------------------------- KL-Cov
@pytest.mark.parametrize("b,t", SHAPES + [(16, 64)])
@pytest.mark.parametrize("k_frac", [2e-3, 0.1])
def test_kl_cov_selection_values_and_gradient(b, t, k_frac):
    logp, old, _, adv, mask = make_batch(b, t, seed=b * 7 + t)
    cov = ref_cov(logp, adv, mask)
    k = max(1, int(len(cov) * k_frac))
    top = set(sorted(cov, key=cov.get, reverse=True)[:k])
    loss, stats = grpo.kl_cov_loss(logp, old, adv, mask, k_frac=k_frac, kl_coef=0.7)
    assert set(cells(grpo.kl_cov_select(logp, adv, mask, k_frac))) == top
    assert stats["n_selected"].item() == k
    n = len(cov)
    for i in range(b):
        for j in range(t):
            if not mask[i, j]:
                assert loss[i, j].item() == 0.0
                continue
            lr = float(logp[i, j] - old[i, j])
            expect = -float(adv[i]) * math.exp(lr) + (0.7 * abs(lr) if (i, j) in top else 0.0)
            assert loss[i, j].item() == pytest.approx(expect, rel=1e-12, abs=1e-12)
    g = grad_of(lambda x: grpo.token_mean(grpo.kl_cov_loss(x, old, adv, mask, k_frac,
                                                           0.7)[0], mask), logp)
    for i, j in cells(mask):
        lr = float(logp[i, j] - old[i, j])
        expect = -float(adv[i]) * math.exp(lr) + (0.7 * math.copysign(1, lr) if (i, j) in top
                                                  else 0.0)
        assert g[i, j].item() == pytest.approx(expect / n, rel=1e-10, abs=1e-14)
    assert (g[~mask] == 0).all()


def test_kl_cov_is_plain_policy_gradient_on_policy():
    logp, _, _, adv, mask = make_batch(8, 30, seed=3)
    loss, stats = grpo.kl_cov_loss(logp, logp.clone(), adv, mask, k_frac=0.2)
    plain = torch.where(mask, -adv[:, None] * torch.ones_like(logp), 0)
    assert stats["n_selected"].item() > 0
    assert torch.allclose(loss, plain)
    g = grad_of(lambda x: grpo.token_mean(grpo.kl_cov_loss(x, logp, adv, mask, 0.2)[0], mask),
                logp)
    g_plain = grad_of(lambda x: grpo.token_mean(-adv[:, None] * torch.exp(x - logp), mask), logp)
    assert torch.allclose(g, g_plain)
    assert stats["abs_log_ratio"].item() == 0.0


def test_cov_losses_on_all_padding():
    logp, old, _, adv, _ = make_batch(3, 4, seed=1)
    none = torch.zeros(3, 4, dtype=torch.bool)
    for loss, stats in (grpo.kl_cov_loss(logp, old, adv, none),
                        grpo.clip_cov_loss(logp, old, adv, none)):
        assert torch.equal(loss, torch.zeros_like(logp))
        assert stats["n_selected"].item() == 0


# --------------------------------------------------------------------------- Clip-Cov
def ref_clip_cov_candidates(logp, old, adv, mask, e_lo, e_hi, lb, ub):
    cov = ref_cov(logp, adv, mask)
    out = []
    for i, j in cells(mask):  # row-major order, as the implementation enumerates them
        a = float(adv[i])
        r = math.exp(float(logp[i, j] - old[i, j]))
        l1, l2 = -a * r, -a * min(max(r, 1 - e_lo), 1 + e_hi)
        if not l2 > l1 and lb < cov[(i, j)] < ub:
            out.append((i, j))
    return out


@pytest.mark.parametrize("b,t", SHAPES + [(16, 64)])
@pytest.mark.parametrize("rho,lb,ub", [(2e-4, 1.0, 5.0), (0.05, 0.5, 3.0)])
def test_clip_cov_selection_values_and_gradient(b, t, rho, lb, ub):
    logp, old, _, adv, mask = make_batch(b, t, seed=b * 13 + t)
    cands = ref_clip_cov_candidates(logp, old, adv, mask, 0.2, 0.28, lb, ub)
    n_valid = len(cells(mask))
    n_pick = min(max(int(rho * n_valid), 1), len(cands))
    perm = torch.randperm(len(cands), generator=torch.Generator().manual_seed(42)) if cands else []
    expect_sel = {cands[p] for p in list(perm)[:n_pick]}

    def run(x):
        return grpo.clip_cov_loss(x, old, adv, mask, 0.2, 0.28, rho, lb, ub,
                                  generator=torch.Generator().manual_seed(42))

    loss, stats = run(logp)
    sel = grpo.clip_cov_select(logp, old, adv, mask, 0.2, 0.28, rho, lb, ub,
                               generator=torch.Generator().manual_seed(42))
    assert set(cells(sel)) == expect_sel and stats["n_selected"].item() == n_pick
    assert stats["selected_fraction"].item() == pytest.approx(n_pick / max(n_valid, 1))
    surrogate, _ = grpo.clipped_surrogate(logp, old, adv, mask, 0.2, 0.28)
    for i in range(b):
        for j in range(t):
            expect = 0.0 if (i, j) in expect_sel else surrogate[i, j].item()
            assert loss[i, j].item() == expect
    # the selected tokens still count in the token-mean denominator
    kept = sum(surrogate[c].item() for c in cells(mask) if c not in expect_sel)
    assert grpo.token_mean(loss, mask).item() == pytest.approx(kept / max(n_valid, 1))
    g = grad_of(lambda x: grpo.token_mean(run(x)[0], mask), logp)
    g_sur = grad_of(lambda x: grpo.token_mean(
        grpo.clipped_surrogate(x, old, adv, mask, 0.2, 0.28)[0], mask), logp)
    for i in range(b):
        for j in range(t):
            expect = 0.0 if (i, j) in expect_sel else g_sur[i, j].item()
            assert g[i, j].item() == pytest.approx(expect, abs=1e-15)
    if (b, t) == (16, 64):
        assert n_pick > 1 if rho == 0.05 else n_pick == 1  # the cases above are not vacuous
        assert any(g_sur[c].item() != 0 for c in expect_sel)


def test_clip_cov_never_picks_clipped_tokens_and_is_seeded():
    logp, old, _, adv, mask = make_batch(16, 64, seed=99, spread=1.0)

    def pick(seed):
        return grpo.clip_cov_select(logp, old, adv, mask, clip_ratio=1.0, cov_lb=-1e9,
                                    cov_ub=1e9, generator=torch.Generator().manual_seed(seed))

    sel = pick(0)
    _, clipped = grpo.clipped_surrogate(logp, old, adv, mask)
    ratio = torch.exp(logp - old)
    is_clipped = ((ratio > 1.2) & (adv[:, None] > 0)) | ((ratio < 0.8) & (adv[:, None] < 0))
    assert clipped.item() > 0.1
    assert torch.equal(sel, mask & ~is_clipped)  # rho = 1, open band: every unclipped token
    few = [grpo.clip_cov_select(logp, old, adv, mask, clip_ratio=0.01, cov_lb=-1e9, cov_ub=1e9,
                                generator=torch.Generator().manual_seed(s)) for s in (0, 0, 1)]
    assert torch.equal(few[0], few[1]) and not torch.equal(few[0], few[2])


def test_select_cov_tokens_dispatch_and_precomputed_selection():
    logp, old, _, adv, mask = make_batch(8, 32, seed=4)
    sel = grpo.select_cov_tokens("kl_cov", logp, old, adv, mask, k_frac=0.1)
    assert torch.equal(sel, grpo.kl_cov_select(logp, adv, mask, 0.1))
    assert torch.equal(grpo.kl_cov_loss(logp, old, adv, mask, selected=sel)[0],
                       grpo.kl_cov_loss(logp, old, adv, mask, k_frac=0.1)[0])
    # mini-batch scope: select over the whole batch, apply per micro-batch slice
    sel = grpo.select_cov_tokens("clip_cov", logp, old, adv, mask, clip_ratio=0.05, cov_lb=0.0,
                                 generator=torch.Generator().manual_seed(1))
    full, _ = grpo.clip_cov_loss(logp, old, adv, mask, selected=sel)
    halves = [grpo.clip_cov_loss(logp[s], old[s], adv[s], mask[s], selected=sel[s])[0]
              for s in (slice(0, 4), slice(4, 8))]
    assert sel.sum() > 1 and torch.equal(torch.cat(halves), full)
    with pytest.raises(ValueError, match="clip_cov"):
        grpo.select_cov_tokens("entropy", logp, old, adv, mask)


# --------------------------------------------------------------------------- logits helpers
def ref_entropy(logits, mask):
    vals = []
    for i, j in cells(mask):
        p = torch.softmax(logits[i, j].double(), -1)
        vals.append(-sum(float(q) * math.log(float(q)) for q in p if q > 0))
    return sum(vals) / max(len(vals), 1)


@pytest.mark.parametrize("b,t", SHAPES)
@pytest.mark.parametrize("chunk", [1, 3, 1024])
def test_entropy_matches_loop(b, t, chunk):
    g = torch.Generator().manual_seed(b * t + chunk)
    logits = 3 * torch.randn(b, t, 11, generator=g, dtype=torch.float64)
    _, _, _, _, mask = make_batch(b, t, seed=b + t)
    got = grpo.entropy_from_logits(logits, mask, chunk_tokens=chunk)
    assert got.item() == pytest.approx(ref_entropy(logits, mask), rel=1e-10, abs=1e-12)
    hot = grpo.entropy_from_logits(logits, mask, temperature=2.0, chunk_tokens=chunk)
    assert hot.item() == pytest.approx(ref_entropy(logits / 2, mask), rel=1e-10, abs=1e-12)


def test_entropy_uniform_and_large_vocab():
    mask = torch.ones(2, 3, dtype=torch.bool)
    v = 151_936
    uniform = grpo.entropy_from_logits(torch.full((2, 3, v), 7.0), mask, chunk_tokens=2)
    assert uniform.item() == pytest.approx(math.log(v), rel=1e-6)
    peaked = torch.full((2, 3, v), -1e4)
    peaked[..., 5] = 0
    assert grpo.entropy_from_logits(peaked, mask).item() == pytest.approx(0.0, abs=1e-6)
    bf = grpo.entropy_from_logits(torch.zeros(2, 3, 64, dtype=torch.bfloat16), mask)
    assert bf.dtype == torch.float32 and bf.item() == pytest.approx(math.log(64), rel=1e-6)
    assert grpo.entropy_from_logits(torch.randn(2, 3, 8), ~mask).item() == 0.0


@pytest.mark.parametrize("b,t", SHAPES)
@pytest.mark.parametrize("chunk", [1, 4, 1024])
def test_selective_log_softmax_equals_full_log_softmax(b, t, chunk):
    g = torch.Generator().manual_seed(b * t + chunk)
    logits = 4 * torch.randn(b, t, 37, generator=g, dtype=torch.float64)
    ids = torch.randint(0, 37, (b, t), generator=g)
    got = grpo.selective_log_softmax(logits, ids, chunk_tokens=chunk)
    full = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    assert torch.allclose(got, full, rtol=0, atol=1e-12)
    hot = grpo.selective_log_softmax(logits, ids, temperature=0.7, chunk_tokens=chunk)
    assert torch.allclose(hot, torch.log_softmax(logits / 0.7, -1).gather(-1, ids[..., None])
                          .squeeze(-1), atol=1e-12)
    x1 = logits.clone().requires_grad_(True)
    x2 = logits.clone().requires_grad_(True)
    w = torch.randn(b, t, generator=g, dtype=torch.float64)
    (grpo.selective_log_softmax(x1, ids, chunk_tokens=chunk) * w).sum().backward()
    (torch.log_softmax(x2, -1).gather(-1, ids[..., None]).squeeze(-1) * w).sum().backward()
    assert torch.allclose(x1.grad, x2.grad, atol=1e-12)


def test_selective_log_softmax_full_vocab_and_bf16():
    # a token that masked sampling could never draw still gets its full-vocabulary log-prob
    logits = torch.randn(2, 5, 151_936, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[0, 151_935, 7, 7, 100_000]] * 2)
    got = grpo.selective_log_softmax(logits, ids, chunk_tokens=3)
    assert torch.allclose(got, torch.log_softmax(logits, -1).gather(-1, ids[..., None])
                          .squeeze(-1), atol=1e-5)
    bf = grpo.selective_log_softmax(logits[..., :50].bfloat16(), ids % 50)
    ref = torch.log_softmax(logits[..., :50].bfloat16().float(), -1).gather(
        -1, (ids % 50)[..., None]).squeeze(-1)
    assert bf.dtype == torch.float32 and torch.allclose(bf, ref, atol=1e-5)
    assert grpo.selective_log_softmax(logits[:, :0], ids[:, :0]).shape == (2, 0)
