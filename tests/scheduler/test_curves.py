"""ProbeCurves and the vectorised Theil–Sen: exact against scipy, exact across resumes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from domains import Catalog, CurriculumError
from scheduler._errors import ConfigError, ReportError
from scheduler._serialize import dumps_state, loads_state
from scheduler._variants import occurrence_rank
from scheduler.probing._curves import ProbeCurves, theil_sen


def _scipy_row(x: np.ndarray, y: np.ndarray, min_points: int, alpha: float) -> tuple[float, ...]:
    ok = np.isfinite(x) & np.isfinite(y)
    xv, yv = x[ok], y[ok]
    if len(xv) < max(min_points, 2) or np.all(xv == xv[0]):
        return (np.nan, np.nan, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = stats.theilslopes(yv, xv, alpha=alpha)
    return (r.slope, r.low_slope, r.high_slope)


def _same(a: float, b: float) -> bool:
    return bool((np.isnan(a) and np.isnan(b)) or a == b)


@st.composite
def _rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n_rows = draw(st.integers(1, 6))
    k = draw(st.integers(1, 12))
    tied = draw(st.booleans())  # binomial-like scores with many ties, or arbitrary floats
    value = (
        st.integers(0, 4).map(lambda v: v / 4)
        if tied
        else st.floats(-5, 5, allow_nan=False, allow_subnormal=False)
    )
    x = np.array(draw(st.lists(st.integers(0, 6 if tied else 1000), min_size=n_rows * k,
                               max_size=n_rows * k)), dtype=float)  # fmt: skip
    y = np.array(draw(st.lists(value, min_size=n_rows * k, max_size=n_rows * k)), dtype=float)
    missing = np.array(draw(st.lists(st.booleans(), min_size=n_rows * k, max_size=n_rows * k)))
    y[missing & (np.arange(n_rows * k) % 2 == 0)] = np.nan
    x[missing & (np.arange(n_rows * k) % 2 == 1)] = np.nan
    return x.reshape(n_rows, k), y.reshape(n_rows, k)


@settings(max_examples=150, deadline=None)
@given(_rows(), st.integers(2, 6), st.sampled_from([0.95, 0.9, 0.8]))
def test_theil_sen_equals_scipy_per_row(
    rows: tuple[np.ndarray, np.ndarray], min_points: int, alpha: float
) -> None:
    x, y = rows
    slope, low, high = theil_sen(x, y, alpha=alpha, min_points=min_points)
    for r in range(x.shape[0]):
        want = _scipy_row(x[r], y[r], min_points, alpha)
        got = (slope[r], low[r], high[r])
        assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (x[r], y[r], got, want)


def _random_curves(seed: int, n_families: int = 7, window: int = 6) -> ProbeCurves:
    rng = np.random.default_rng(seed)
    c = ProbeCurves(n_families, window=window, chance=rng.uniform(0, 0.5, n_families))
    step = 0
    for _ in range(12):
        k = int(rng.integers(1, 2 * n_families))
        fam = rng.integers(0, n_families, k)
        step += int(rng.integers(0, 3))  # repeated steps happen: ties in x
        c.record(fam, rng.integers(0, 9, k) / 8, rng.integers(1, 40, k), np.full(k, step))
        if rng.random() < 0.2:
            c.tier_reset(rng.integers(0, n_families, 2))
    return c


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 6))
def test_slope_equals_theilslopes_on_each_history(seed: int, min_points: int) -> None:
    c = _random_curves(seed)
    slope, low, high = c.slope(min_points)
    for f in range(c.n_families):
        steps, scores, _ = c.history(f)
        want = _scipy_row(steps.astype(float), scores, min_points, 0.95)
        assert all(_same(g, w) for g, w in zip((slope[f], low[f], high[f]), want, strict=True))
        assert len(steps) == min(int(c.since_reset[f]), c.window)


def test_occurrence_rank_counts_earlier_equal_values() -> None:
    idx = np.array([3, 1, 3, 3, 0, 1])
    np.testing.assert_array_equal(occurrence_rank(idx), [0, 0, 1, 2, 0, 1])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_batched_record_equals_sequential(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_fam, k = 5, 30  # far more points than families: heavy repetition, ring wraps in a call
    fam = rng.integers(0, n_fam, k)
    scores = rng.integers(0, 17, k) / 16
    n = rng.integers(1, 20, k)
    steps = np.arange(k) * 10
    tiers = rng.integers(0, 2, k)
    batched = ProbeCurves(n_fam, window=4)
    batched.record(fam, scores, n, steps, tiers)
    one_by_one = ProbeCurves(n_fam, window=4)
    for i in range(k):
        one_by_one.record([fam[i]], [scores[i]], [n[i]], [steps[i]], [tiers[i]])
    a, b = batched.state_dict(), one_by_one.state_dict()
    assert a.keys() == b.keys()
    for key in ("latest", "latest_n", "latest_step", "ema_fast", "ema_slow", "tier", "resets"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    for key in a["ring"]:
        np.testing.assert_array_equal(a["ring"][key], b["ring"][key], err_msg=key)


def test_ring_buffer_wraps_and_keeps_order() -> None:
    c = ProbeCurves(2, window=4)
    for t in range(10):
        c.record([0], [t / 10], [10], [t * 100])
    steps, scores, n = c.history(0)
    np.testing.assert_array_equal(steps, [600, 700, 800, 900])
    np.testing.assert_allclose(scores, [0.6, 0.7, 0.8, 0.9])
    np.testing.assert_array_equal(n, [10] * 4)
    assert c.count[0] == 10 and c.count[1] == 0
    assert c.latest_step[0] == 900 and c.latest_step[1] == -1
    # EMAs over all ten points, not just the window.
    e = 0.0
    for t in range(10):
        e = t / 10 if t == 0 else e + 0.3 * (t / 10 - e)
    assert c.ema_fast[0] == pytest.approx(e)
    assert np.isnan(c.ema_fast[1])


def test_tier_change_restarts_the_curve() -> None:
    c = ProbeCurves(1, window=8)
    c.record([0] * 5, [0.5, 0.6, 0.7, 0.8, 0.9], [10] * 5, [1, 2, 3, 4, 5], [0] * 5)
    assert c.since_reset[0] == 5
    c.record([0], [0.1], [10], [6], [1])  # promoted: the old tier's points no longer compare
    steps, scores, _ = c.history(0)
    np.testing.assert_array_equal(steps, [6])
    np.testing.assert_array_equal(scores, [0.1])
    assert c.ema_fast[0] == 0.1 and c.ema_slow[0] == 0.1
    assert c.count[0] == 6 and c.since_reset[0] == 1 and c.resets[0] == 1 and c.tier[0] == 1
    assert np.isnan(c.slope(2)[0][0])
    c.tier_reset([0])
    assert c.history(0)[0].size == 0 and c.latest[0] == 0.1


def test_state_dict_round_trip_is_exact() -> None:
    c = _random_curves(3)
    state = loads_state(dumps_state(c.state_dict()))
    d = ProbeCurves(c.n_families, window=c.window, chance=c.chance)
    d.load_state_dict(state)
    for curves in (c, d):  # the same continuation gives the same state
        r = np.random.default_rng(9)
        curves.record(r.integers(0, 7, 20), r.random(20), r.integers(1, 9, 20), np.full(20, 99))
    for name in ("latest", "ema_fast", "ema_slow", "count", "since_reset", "stderr"):
        np.testing.assert_array_equal(getattr(c, name), getattr(d, name), err_msg=name)
    for a, b in zip(c.slope(), d.slope(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_state_dict_of_another_shape_is_refused_without_change() -> None:
    c = _random_curves(4)
    before = c.state_dict()
    with pytest.raises(ConfigError, match="window: expected 6, got 16"):
        c.load_state_dict(ProbeCurves(7).state_dict())
    np.testing.assert_array_equal(c.state_dict()["ring"]["value"], before["ring"]["value"])


def test_stderr_interval_and_normalisation() -> None:
    c = ProbeCurves(4, chance=[0.0, 0.25, 0.5, 0.0])
    c.record([0, 1, 2, 3], [0.5, 0.25, 0.2, 1.0], [32, 40, 10, 8], [1, 1, 1, 1])
    np.testing.assert_allclose(c.stderr, np.sqrt([0.25 / 32, 0.1875 / 40, 0.16 / 10, 0.0]))
    np.testing.assert_allclose(c.normalized, [0.5, 0.0, 0.0, 1.0])
    k = c.latest * c.latest_n
    for f in range(3):
        lo = stats.beta.ppf(0.025, k[f] + 0.5, c.latest_n[f] - k[f] + 0.5)
        hi = stats.beta.ppf(0.975, k[f] + 0.5, c.latest_n[f] - k[f] + 0.5)
        assert c.ci_low[f] == pytest.approx(lo) and c.ci_high[f] == pytest.approx(hi)
        assert c.ci_low[f] < c.latest[f] < c.ci_high[f]
    assert c.ci_high[3] == 1.0 and 0.5 < c.ci_low[3] < 1.0


def test_domain_curve_matches_per_domain_statistics() -> None:
    cat = Catalog.synthetic(n_domains=3, families_per_domain=4, chance_success=0.2)
    c = ProbeCurves.from_catalog(cat)
    fams = np.array([0, 1, 2, 4, 5, 6, 7])  # domain 2 never probed, domain 0 misses one family
    scores = np.array([0.2, 0.6, 1.0, 0.5, 0.4, 0.9, 0.3])
    c.record(fams, scores, np.full(7, 16), np.zeros(7, dtype=int))
    mean, se = c.domain_curve()
    for d, members in ((0, [0, 1, 2]), (1, [3, 4, 5, 6])):
        x = (scores[members] - 0.2) / 0.8
        assert mean[d] == pytest.approx(x.mean())
        assert se[d] == pytest.approx(x.std(ddof=1) / np.sqrt(len(x)))
    assert np.isnan(mean[2]) and np.isnan(se[2])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([0, 9], [0.5, 0.5], [4, 4], [1, 1]), r"record: families\[1\]: must be in \[0, 3\)"),
        (([0, 1], [0.5, 1.5], [4, 4], [1, 1]), r"record: scores\[1\]: must be a finite rate"),
        (([0, 1], [np.nan, 0.5], [4, 4], [1, 1]), r"record: scores\[0\]"),
        (([0, 1], [0.5, 0.5], [4, 0], [1, 1]), r"record: n\[1\]: must be >= 1"),
        (([0, 1], [0.5, 0.5], [4, 4], [1, -3]), r"record: steps\[1\]: must be >= 0"),
        (([0, 1], [0.5], [4, 4], [1, 1]), r"record: scores: must have 2 elements"),
        (([0.5], [0.5], [4], [1]), r"record: families\[0\]: must be an integer"),
    ],
)
def test_bad_input_names_the_field_and_changes_nothing(
    args: tuple[list[float], ...], match: str
) -> None:
    c = ProbeCurves(3)
    c.record([0], [0.25], [4], [0])
    before = c.state_dict()
    with pytest.raises(ReportError, match=match) as info:
        c.record(*args)
    assert isinstance(info.value, CurriculumError)
    after = c.state_dict()
    np.testing.assert_array_equal(before["ring"]["value"], after["ring"]["value"])
    np.testing.assert_array_equal(before["latest"], after["latest"])


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ConfigError, match=r"ProbeCurves.chance\[1\]: must be in \[0, 1\)"):
        ProbeCurves(2, chance=[0.0, 1.0])
    with pytest.raises(ConfigError, match=r"ProbeCurves\.window: must be >= 2, got 1"):
        ProbeCurves(2, window=1)


def test_views_are_read_only() -> None:
    c = ProbeCurves(2)
    c.record([0], [0.5], [4], [0])
    with pytest.raises(ValueError, match="read-only"):
        c.latest[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        c.count[1] = 3


def test_a_checkpoint_whose_mask_marks_a_slot_empty_loads_it_empty() -> None:
    """The ring keeps no mask (an empty slot holds NaN); an older checkpoint's ``valid``
    still decides which slots hold points, and a mask of the wrong shape changes nothing."""
    c = _random_curves(5)
    state = c.state_dict()
    assert np.array_equal(state["ring"]["valid"], ~np.isnan(state["ring"]["value"]))
    row = int(np.flatnonzero(state["ring"]["valid"].any(axis=1))[0])
    kept = c.history(row)[1].size
    old = {**state, "ring": {**state["ring"], "valid": state["ring"]["valid"].copy()}}
    old["ring"]["value"] = np.nan_to_num(old["ring"]["value"], nan=0.5)  # the old layout's fill
    old["ring"]["valid"][row, np.flatnonzero(old["ring"]["valid"][row])[0]] = False
    d = ProbeCurves(c.n_families, window=c.window, chance=c.chance)
    d.load_state_dict(old)
    assert d.history(row)[1].size == kept - 1
    assert np.all(np.isnan(d.state_dict()["ring"]["value"]) == ~old["ring"]["valid"])
    before = d.state_dict()["ring"]["value"]
    bad = {**state, "ring": {**state["ring"], "valid": np.ones((1, 1), dtype=bool)}}
    with pytest.raises(ConfigError, match=r"ring\.valid: expected shape"):
        d.load_state_dict(bad)
    np.testing.assert_array_equal(d.state_dict()["ring"]["value"], before)
