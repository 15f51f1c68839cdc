from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from policies import project_quotas, smooth, waterfill


def _reference(score: np.ndarray, lo: np.ndarray, hi: np.ndarray, total: float) -> np.ndarray:
    """One group solved by root finding on the multiplier (scipy's brentq)."""
    pos = score > 0

    def excess(log_c: float) -> float:
        x = np.where(pos, np.clip(np.exp(log_c) * score, lo, hi), lo)
        return float(x.sum() - total)

    if excess(60.0) < 0:  # the positive items saturate; zero-score items take the rest
        x = np.where(pos, hi, lo)
        zero = ~pos
        x[zero] = _reference(np.ones(zero.sum()), lo[zero], hi[zero], total - x[pos].sum())
        return x
    log_c = optimize.brentq(excess, -60.0, 60.0, xtol=1e-14)
    return np.where(pos, np.clip(np.exp(log_c) * score, lo, hi), lo)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_waterfill_matches_root_finding(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 12))
    seed = data.draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    score = rng.random(n) * (rng.random(n) > 0.3)
    lo = rng.random(n) * 0.1
    hi = lo + rng.random(n) * 0.5
    total = float(lo.sum() + rng.random() * (hi.sum() - lo.sum()))
    x = waterfill(score, lo, hi, np.array([total]), np.zeros(n, dtype=np.int64))
    assert x.sum() == pytest.approx(total, abs=1e-9)
    assert (x >= lo - 1e-12).all() and (x <= hi + 1e-12).all()
    np.testing.assert_allclose(x, _reference(score, lo, hi, total), atol=1e-7)


def test_waterfill_solves_every_group_independently() -> None:
    rng = np.random.default_rng(0)
    group = np.sort(rng.integers(0, 5, 40))
    score, lo = rng.random(40), np.zeros(40)
    hi = np.full(40, 0.2)
    total = np.bincount(group, hi, 5) * 0.5
    x = waterfill(score, lo, hi, total, group)
    for g in range(5):
        m = group == g
        np.testing.assert_allclose(x[m], _reference(score[m], lo[m], hi[m], total[g]), atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 8), st.integers(1, 8))
def test_projection_respects_every_quota(seed: int, n_domains: int, per_domain: int) -> None:
    rng = np.random.default_rng(seed)
    n = n_domains * per_domain
    dof = np.repeat(np.arange(n_domains), per_domain)
    lo = rng.dirichlet(np.ones(n_domains)) * rng.uniform(0, 1)
    hi = np.minimum(1.0, lo + rng.uniform(0, 1, n_domains))
    if hi.sum() < 1:
        hi = hi / hi.sum() * 1.0001
    hi = np.minimum(hi, 1.0)
    cap = np.ones(n)
    w = rng.random(n) ** 3
    p = project_quotas(w, dof, lo, hi, cap)
    share = np.bincount(dof, p, n_domains)
    assert p.sum() == pytest.approx(1.0)
    assert (share >= lo - 1e-9).all() and (share <= hi + 1e-9).all()


def test_projection_is_identity_when_feasible_and_caps_bind() -> None:
    dof = np.array([0, 0, 1, 1])
    w = np.array([0.1, 0.2, 0.3, 0.4])
    ones = np.ones(2)
    np.testing.assert_allclose(project_quotas(w, dof, 0 * ones, ones, np.ones(4)), w)
    capped = project_quotas(w, dof, 0 * ones, ones, np.array([1, 1, 1, 0.25]))
    assert capped[3] == pytest.approx(0.25)
    # The excess goes to the others in proportion to their weights (KL projection).
    np.testing.assert_allclose(capped[:3] / capped[:3].sum(), w[:3] / w[:3].sum())


def test_blocked_domain_gives_up_its_minimum() -> None:
    dof = np.array([0, 1, 1])
    p = project_quotas(
        np.ones(3), dof, np.array([0.3, 0.0]), np.array([1.0, 1.0]), np.array([0.0, 1, 1])
    )
    assert p[0] == 0.0 and p.sum() == pytest.approx(1.0)


def test_infeasible_quotas_raise() -> None:
    with pytest.raises(ValueError, match="infeasible"):
        project_quotas(np.ones(2), np.array([0, 1]), np.array([0.7, 0.7]), np.ones(2), np.ones(2))


def test_the_breakpoint_search_matches_root_finding_on_the_domain_shares() -> None:
    """The domain shares are where sum_d clip(S_d(c), lo_d, hi_d) crosses 1; scipy's
    root finder on log c gives the same shares."""
    from scipy.optimize import brentq

    from policies._quota import _domain_shares

    checked = 0
    for seed in range(30):  # caps, minima and maxima that bind in different mixes
        rng = np.random.default_rng(seed)
        n_fam, n_dom = int(rng.integers(2, 400)), int(rng.integers(1, 30))
        dof = np.sort(rng.integers(0, n_dom, n_fam))
        w = rng.random(n_fam) ** 4 + 1e-9
        w /= w.sum()
        cap = np.full(n_fam, max(0.02, 1.5 / n_fam)) * rng.uniform(0.5, 2.0, n_fam)
        hi = np.minimum(np.full(n_dom, rng.uniform(1 / n_dom, 1)), np.bincount(dof, cap, n_dom))
        lo = np.minimum(np.full(n_dom, rng.uniform(0, 1 / n_dom)), hi)
        if lo.sum() > 1 or hi.sum() < 1:
            continue

        def held(
            log_c: float, dof: np.ndarray = dof, w: np.ndarray = w, cap: np.ndarray = cap,
            lo: np.ndarray = lo, hi: np.ndarray = hi, n_dom: int = n_dom,
        ) -> np.ndarray:  # fmt: skip
            s_d = np.bincount(dof, np.minimum(cap, np.exp(log_c) * w), n_dom)
            return np.clip(s_d, lo, hi)

        root = brentq(lambda x: held(x).sum() - 1.0, -60.0, 60.0, xtol=1e-14)
        want = held(root) / held(root).sum()
        np.testing.assert_allclose(
            _domain_shares(w, dof, lo, hi, cap), want, atol=1e-7, err_msg=f"seed {seed}"
        )
        checked += 1
    assert checked >= 20


def test_non_finite_weights_count_as_nan_to_num_makes_them() -> None:
    """A finite vector skips nan_to_num; one with NaN or inf goes through it, as before."""
    dom = np.array([0, 0, 1, 1])
    lo, hi, cap = np.array([0.3, 0.0]), np.array([1.0, 1.0]), np.full(4, 0.6)
    for weights in ([0.1, np.nan, 0.3, 0.6], [0.1, np.inf, 0.3, 0.6], [np.nan, 1.0, -np.inf, 0.5]):
        w = np.array(weights)
        with np.errstate(over="ignore", invalid="ignore"):  # inf becomes the largest float
            got = project_quotas(w, dom, lo, hi, cap)
            want = project_quotas(np.nan_to_num(w, nan=0.0), dom, lo, hi, cap)
        assert np.array_equal(got, want, equal_nan=True)
        want = smooth(np.nan_to_num(w, nan=0.0, posinf=0.0), floor=0.1)
        assert np.array_equal(smooth(w, floor=0.1), want)


def test_with_no_domain_bound_the_projection_is_one_water_fill_over_every_family() -> None:
    """Domains free to take any share (min 0, max 1): p = min(cap, c * w) with one c, as
    root finding gives it, whatever the caps and the domains."""
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n_fam, n_dom = int(rng.integers(1, 300)), int(rng.integers(1, 20))
        dof = np.sort(rng.integers(0, n_dom, n_fam))
        w = rng.random(n_fam) ** 3 * (rng.random(n_fam) > 0.1)
        if w.sum() == 0:
            continue
        cap = np.where(rng.random(n_fam) < 0.5, np.inf, rng.uniform(0.0, 3.0 / n_fam, n_fam))
        if np.minimum(cap, 1.0).sum() < 1.0:
            cap[rng.integers(0, n_fam)] = np.inf
        p = project_quotas(w, dof, np.zeros(n_dom), np.ones(n_dom), cap)
        want = _reference(w / w.sum(), np.zeros(n_fam), np.minimum(cap, 1.0), 1.0)
        np.testing.assert_allclose(p, want, atol=1e-9, err_msg=f"seed {seed}")
        assert (p <= cap + 1e-12).all() and p.sum() == pytest.approx(1.0)


def test_an_infinite_cap_is_no_cap_in_its_group_and_leaves_the_others_alone() -> None:
    """Group 0: a small finite cap and an uncapped item that must take the rest; group 1,
    after it, finite caps only. Each group solves as root finding says."""
    group = np.array([0, 0, 1, 1, 1])
    score = np.array([1.0, 0.1, 0.5, 0.3, 0.2])
    lo = np.zeros(5)
    hi = np.array([0.05, np.inf, 0.3, 0.3, 0.3])
    total = np.array([0.6, 0.4])
    with np.errstate(all="raise"):
        x = waterfill(score, lo, hi, total, group)
    for g in range(2):
        m = group == g
        want = _reference(score[m], lo[m], np.minimum(hi[m], total[g]), float(total[g]))
        np.testing.assert_allclose(x[m], want, atol=1e-9)
    assert x[1] == pytest.approx(0.55)
