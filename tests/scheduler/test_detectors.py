"""Detectors on simulated probe curves: what they must catch and what they must leave alone."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domains import Catalog
from scheduler._detectors import (
    DetectorConfig,
    Detectors,
    HackingConfig,
    RegressionConfig,
    UnlearnableConfig,
)
from scheduler._errors import ConfigError, ReportError
from scheduler._events import Event
from scheduler._serialize import dumps_state, loads_state
from scheduler.probing._curves import ProbeCurves

Rate = Callable[[int, np.random.Generator, int], np.ndarray]


def _names(n: int) -> list[str]:
    return [f"f{i}" for i in range(n)]


def simulate(
    probe: Rate,
    *,
    families: int = 200,
    rounds: int = 60,
    n: int = 32,
    chance: float = 0.0,
    train: Rate | None = None,
    config: DetectorConfig | None = None,
    seed: int = 0,
    tier_flat: bool = False,
) -> tuple[ProbeCurves, Detectors, list[tuple[int, Event]]]:
    """Probe every family once per round (binomial scores), update, collect (round, event)."""
    rng = np.random.default_rng(seed)
    curves = ProbeCurves(families, chance=np.full(families, chance))
    det = Detectors(_names(families), config=config)
    fams = np.arange(families)
    events: list[tuple[int, Event]] = []
    for t in range(rounds):
        step = 100 * (t + 1)
        if train is not None:
            det.record_training(
                fams, np.clip(train(t, rng, families), 0, 1), np.full(families, step)
            )
        p = np.clip(probe(t, rng, families), 0, 1)
        curves.record(fams, rng.binomial(n, p) / n, np.full(families, n), np.full(families, step))
        flat = np.full(families, tier_flat)
        events += [(t, e) for e in det.update(step, curves, tier_flat=flat)]
    return curves, det, events


def _fired(events: list[tuple[int, Event]], kind: str) -> dict[str, int]:
    """Family -> round of its first event of this kind."""
    first: dict[str, int] = {}
    for t, e in events:
        if e.kind == kind:
            assert e.family is not None
            first.setdefault(e.family, t)
    return first


def _const(level: float) -> Rate:
    return lambda t, rng, f: np.full(f, level)


# Regression -------------------------------------------------------------------------------
def _feed(
    det: Detectors, curves: ProbeCurves, scores: list[float], n: int, t0: int = 0
) -> list[list[Event]]:
    out = []
    for i, s in enumerate(scores):
        step = (t0 + i + 1) * 10
        curves.record([0], [s], [n], [step])
        out.append(det.update(step, curves))
    return out


def test_regression_fires_on_two_consecutive_drops_of_five_se_and_rearms() -> None:
    n, level = 64, 0.7
    se = np.sqrt(level * (1 - level) / n)
    curves, det = ProbeCurves(1), Detectors(["coding"], domain_names=["d"], domain_of_family=[0])
    per_update = _feed(det, curves, [level] * 10 + [level - 5 * se], n)
    assert not any(per_update) and not det.regressing[0]  # one drop is not enough
    (second,) = _feed(det, curves, [level - 5 * se], n, t0=11)
    assert [e.kind for e in second] == ["regression"] and det.regressing[0]
    e = second[0]
    assert (e.family, e.domain, e.step) == ("coding", "d", 120)
    assert e.payload["method"] == "kse" and e.payload["reference"] == pytest.approx(level)
    assert e.payload["statistic"] > 3.0 and e.payload["score"] == pytest.approx(level - 5 * se)
    assert not any(_feed(det, curves, [level - 5 * se] * 3, n, t0=12))  # once per episode
    _feed(det, curves, [level], n, t0=15)
    assert not det.regressing[0]  # recovered: re-armed
    later = _feed(det, curves, [level - 5 * se] * 2, n, t0=16)
    assert [e.kind for e in later[1]] == ["regression"]


@pytest.mark.parametrize("method", ["kse", "page_hinkley"])
@pytest.mark.parametrize("level", [0.15, 0.5, 0.85])
def test_regression_false_positive_rate_on_binomial_noise(method: str, level: float) -> None:
    cfg = DetectorConfig(regression=RegressionConfig(method=method))
    _, _, events = simulate(_const(level), families=300, rounds=60, config=cfg, seed=11)
    rate = len(_fired(events, "regression")) / 300
    assert rate <= 0.02, rate  # measured: 0.0 to 0.004 per family over 60 probes


@pytest.mark.parametrize(("method", "probes"), [("kse", 2), ("page_hinkley", 3)])
def test_abrupt_drop_of_five_se_is_detected(method: str, probes: int) -> None:
    """kse needs its two consecutive drops; Page–Hinkley (lambda 8 SE) two or three."""
    se = np.sqrt(0.7 * 0.3 / 32)
    drop: Rate = lambda t, rng, f: np.full(f, 0.7 if t < 30 else 0.7 - 5 * se)  # noqa: E731
    cfg = DetectorConfig(regression=RegressionConfig(method=method))
    _, _, events = simulate(drop, families=200, rounds=30 + probes, config=cfg, seed=5)
    fired = _fired(events, "regression")
    early = [f for f, t in fired.items() if t < 30]
    assert len(early) <= 2
    assert sum(1 for t in fired.values() if t >= 30) / 200 >= 0.95


def test_page_hinkley_on_a_noisy_series_then_collapse() -> None:
    cfg = DetectorConfig(regression=RegressionConfig(method="page_hinkley"))
    collapse: Rate = lambda t, rng, f: np.full(f, 0.8 if t < 25 else 0.3)  # noqa: E731
    _, det, events = simulate(collapse, families=100, rounds=28, config=cfg, seed=2)
    fired = _fired(events, "regression")
    assert len(fired) == 100 and all(25 <= t <= 27 for t in fired.values())
    assert det.regressing.all()
    payload = next(e.payload for _, e in events if e.kind == "regression")
    assert payload["method"] == "page_hinkley" and payload["statistic"] > 8.0


# Plateau ----------------------------------------------------------------------------------
def test_plateau_on_a_flat_curve_not_on_a_rising_one() -> None:
    rising: Rate = lambda t, rng, f: np.full(f, 0.1 + 0.02 * t)  # noqa: E731
    _, det, events = simulate(rising, families=200, rounds=40, n=64, seed=3)
    assert not _fired(events, "plateau") and not det.plateaued.any()
    _, det, events = simulate(_const(0.4), families=200, rounds=40, n=64, seed=3)
    fired = _fired(events, "plateau")
    assert len(fired) >= 190 and min(fired.values()) >= 15  # needs a full window first
    e = next(e for _, e in events if e.kind == "plateau")
    assert e.payload["change_bound"] < 0.15 and e.payload["span_steps"] == 1500


def test_mastered_flat_family_is_not_a_plateau() -> None:
    _, det, events = simulate(_const(0.97), families=50, rounds=30, n=64, seed=1)
    assert not _fired(events, "plateau") and not det.plateaued.any()


# Unlearnable ------------------------------------------------------------------------------
def test_chance_and_coin_flip_families_are_quarantined_after_n_probes() -> None:
    coin: Rate = lambda t, rng, f: rng.binomial(64, 0.5, f) / 64  # noqa: E731
    _, det, events = simulate(_const(0.25), chance=0.25, families=100, rounds=30, seed=4)
    fired = _fired(events, "quarantined")
    n_probes = UnlearnableConfig().min_probes
    assert len(fired) >= 95 and min(fired.values()) >= n_probes - 1
    assert {e.payload["reason"] for _, e in events if e.kind == "quarantined"} == {"chance"}
    np.testing.assert_allclose(det.weight_cap[det.quarantined], UnlearnableConfig().floor)

    _, det, events = simulate(_const(0.0), train=coin, families=100, rounds=30, seed=4)
    assert len(_fired(events, "quarantined")) == 100 and det.quarantined.all()
    reasons = [e.payload["reason"] for _, e in events if e.kind == "quarantined"]
    assert reasons.count("coin_flip") >= 95  # a spurious training trend may say "chance"


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.25, 0.5]))
def test_a_slow_steady_learner_is_never_quarantined(seed: int, chance: float) -> None:
    learner: Rate = lambda t, rng, f: np.full(f, chance + 0.01 * t)  # noqa: E731
    _, det, events = simulate(learner, chance=chance, families=50, rounds=50, seed=seed)
    assert not _fired(events, "quarantined") and not det.quarantined.any()


def test_a_coin_flip_is_caught_early_by_the_look_ahead() -> None:
    """Where the tier above passes as often (``tier_flat``: the scheduler says so only where
    a half is clear of chance), the verdict needs only ``flat_min_probes`` rounds."""
    coin: Rate = lambda t, rng, f: rng.binomial(64, 0.5, f) / 64  # noqa: E731
    flat_min = UnlearnableConfig().flat_min_probes
    _, _, events = simulate(
        _const(0.5), chance=0.0, train=coin, families=100, rounds=20, n=64, tier_flat=True
    )
    fired = _fired(events, "quarantined")
    slow = UnlearnableConfig().min_probes
    # Where the tier above passes as often, only real progress blocks the verdict (not the
    # weak-rise guard, which a coin trips one round in three): nine in ten are caught by
    # two rounds after the earliest.
    assert len(fired) == 100 and np.percentile(list(fired.values()), 90) <= flat_min + 2 < slow


def test_a_learner_rising_through_a_half_is_not_quarantined_even_with_flat_tiers() -> None:
    """Tiers of equal difficulty (tier_flat holds) and a family learning through a half:
    its training rise and its probe halves keep it out of quarantine."""
    rise: Rate = lambda t, rng, f: np.full(f, 0.35 + 0.01 * t)  # noqa: E731
    _, det, events = simulate(
        rise, train=rise, families=100, rounds=30, n=64, seed=4, tier_flat=True
    )
    assert not _fired(events, "quarantined") and not det.quarantined.any()


def test_a_family_falling_from_a_skill_is_not_unlearnable() -> None:
    """Forgetting (a score falling from credibly above chance to chance) calls for
    training, not quarantine; the same floor without the fall is quarantined."""
    fall: Rate = lambda t, rng, f: np.full(f, 0.6 if t < 12 else 0.0)  # noqa: E731
    _, det, events = simulate(fall, families=100, rounds=21, n=64, seed=2)
    assert not _fired(events, "quarantined") and not det.quarantined.any()
    _, det, events = simulate(_const(0.0), families=100, rounds=21, n=64, seed=2)
    assert len(_fired(events, "quarantined")) == 100


def test_quarantined_family_is_released_after_it_starts_learning() -> None:
    late: Rate = lambda t, rng, f: np.full(f, 0.0 if t < 25 else min(0.04 * (t - 25), 0.9))  # noqa: E731
    _, det, events = simulate(late, families=50, rounds=50, seed=6)
    q, r = _fired(events, "quarantined"), _fired(events, "released")
    assert len(q) == 50 and all(t < 25 for t in q.values())
    assert len(r) == 50 and all(r[f] > q[f] for f in r)
    assert not det.quarantined.any() and (det.weight_cap == 1.0).all()
    e = next(e for _, e in events if e.kind == "released")
    assert e.payload["level_lower"] > UnlearnableConfig().chance_margin


def test_coin_flips_are_caught_and_stay_caught() -> None:
    coin: Rate = lambda t, rng, f: rng.binomial(64, 0.5, f) / 64  # noqa: E731
    cfg = UnlearnableConfig()
    _, det, events = simulate(_const(0.5), train=coin, families=100, rounds=120, seed=5)
    fired = _fired(events, "quarantined")
    assert len(fired) == 100 and min(fired.values()) >= cfg.coin_min_probes - 1
    assert np.percentile(list(fired.values()), 90) <= 30
    # Reading far above chance, a coin flip's lucky rounds look like progress off the floor;
    # it is released only once its level rises credibly into the upper half of its band.
    assert not _fired(events, "released") and det.quarantined.all()


def test_flat_family_is_not_released_by_noise() -> None:
    _, det, events = simulate(_const(0.25), chance=0.25, families=200, rounds=80, seed=8)
    assert len(_fired(events, "released")) <= 4
    assert det.quarantined.sum() >= 190


# Reward hacking ---------------------------------------------------------------------------
def _rise(lo: float, hi: float, rounds: int = 20) -> Rate:
    return lambda t, rng, f: lo + (hi - lo) * min(t, rounds) / rounds + rng.normal(0, 0.03, f)


def test_gamed_training_reward_with_a_flat_probe_is_flagged() -> None:
    cfg = DetectorConfig(hacking=HackingConfig(cap=0.3))
    _, det, events = simulate(_const(0.2), train=_rise(0.2, 0.9), families=100, rounds=30,
                              config=cfg, seed=7)  # fmt: skip
    fired = _fired(events, "suspected_reward_hacking")
    assert len(fired) >= 95 and det.hacking.sum() >= 95
    np.testing.assert_allclose(det.weight_cap[det.hacking], 0.3)
    e = next(e for _, e in events if e.kind == "suspected_reward_hacking")
    p = e.payload
    assert p["train_slope_low"] > 0 and p["train_change"] >= 0.2
    assert p["probe_change_high"] <= 0.05 + 0.25 * p["train_change"]
    assert {"train_slope", "probe_slope", "probe_slope_low", "probe_slope_high"} <= p.keys()


def test_honest_family_whose_probe_rises_too_is_not_flagged() -> None:
    _, det, events = simulate(_rise(0.2, 0.8), train=_rise(0.2, 0.9), families=100, rounds=30,
                              seed=7)  # fmt: skip
    assert len(_fired(events, "suspected_reward_hacking")) <= 1
    assert det.hacking.sum() <= 1


# State, resets, config --------------------------------------------------------------------
def test_state_dict_round_trip_gives_the_same_future() -> None:
    coin: Rate = lambda t, rng, f: rng.binomial(64, 0.5, f) / 64  # noqa: E731
    curves, det, _ = simulate(_const(0.0), train=coin, families=20, rounds=12, seed=1)
    c2 = ProbeCurves(20)
    c2.load_state_dict(loads_state(dumps_state(curves.state_dict())))
    d2 = Detectors(_names(20))
    d2.load_state_dict(loads_state(dumps_state(det.state_dict())))
    rng = np.random.default_rng(0)
    for t in range(12, 30):
        scores = rng.binomial(32, 0.02, 20) / 32
        train = rng.binomial(64, 0.5, 20) / 64
        outs = []
        for c, d in ((curves, det), (c2, d2)):
            d.record_training(np.arange(20), train, np.full(20, t * 100))
            c.record(np.arange(20), scores, np.full(20, 32), np.full(20, t * 100))
            outs.append(d.update(t * 100, c))
        assert outs[0] == outs[1]
    for name in ("quarantined", "regressing", "plateaued", "hacking", "weight_cap"):
        np.testing.assert_array_equal(getattr(det, name), getattr(d2, name))


def test_tier_reset_restarts_detector_evidence() -> None:
    curves, det, _ = simulate(_const(0.4), families=10, rounds=40, n=64, seed=0)
    before = det.plateaued.copy()
    assert before[:5].any() and before[5:].any()
    curves.tier_reset(np.arange(5))
    curves.record(np.arange(10), np.full(10, 0.4), np.full(10, 64), np.full(10, 9999))
    assert det.update(9999, curves) == []
    assert not det.plateaued[:5].any()
    np.testing.assert_array_equal(det.plateaued[5:], before[5:])
    assert (curves.since_reset[:5] == 1).all()


def test_from_catalog_names_family_and_domain() -> None:
    cat = Catalog.synthetic(n_domains=2, families_per_domain=2)
    curves, det = ProbeCurves.from_catalog(cat), Detectors.from_catalog(cat)
    for t in range(12):
        curves.record([3], [0.9 if t < 10 else 0.3], [64], [t])
        events = det.update(t, curves)
    assert [(e.family, e.domain) for e in events] == [("domain_1.family_1", "domain_1")]


def test_bad_config_and_input_are_named() -> None:
    with pytest.raises(ConfigError, match=r"DetectorConfig.regression.method: must be"):
        RegressionConfig(method="cusum")
    with pytest.raises(ConfigError, match=r"DetectorConfig.hacking.cap: must be in \[0, 1\]"):
        HackingConfig(cap=2.0)
    with pytest.raises(ConfigError, match=r"DetectorConfig.plateau.epsilon: unknown field"):
        DetectorConfig.from_dict({"plateau": {"epsilon": 0.1}})
    cfg = DetectorConfig.from_dict({"alpha": 0.9, "unlearnable": {"min_probes": 8}})
    assert cfg.alpha == 0.9 and cfg.unlearnable.min_probes == 8
    det = Detectors(_names(3))
    with pytest.raises(ReportError, match=r"record_training: pass_rate\[1\]: must be a finite"):
        det.record_training([0, 1], [0.5, -0.1], [1, 1])
    with pytest.raises(ConfigError, match="curves have 4 families, the detectors 3"):
        det.update(0, ProbeCurves(4))


def test_a_state_saved_before_coin_flags_existed_still_loads() -> None:
    coin: Rate = lambda t, rng, f: rng.binomial(64, 0.5, f) / 64  # noqa: E731
    _, det, _ = simulate(_const(0.5), train=coin, families=10, rounds=12, seed=2)
    state = det.state_dict()
    del state["coin"]
    again = Detectors(_names(10))
    again.load_state_dict(state)
    np.testing.assert_array_equal(again.quarantined, det.quarantined)


def test_a_learner_crossing_a_half_is_rarely_taken_for_a_coin_flip() -> None:
    """Training and probes near 0.5, rising 0.01 a round: slow, but learning. The coin test
    must not mistake most of them for coin flips (it did for a third before coin_alpha)."""
    quarantined = 0
    for seed, start in enumerate((0.35, 0.4, 0.45)):
        rise: Rate = lambda t, rng, f, s=start: np.full(f, s + 0.01 * t)  # noqa: E731
        train: Rate = lambda t, rng, f, s=start: rng.binomial(64, min(s + 0.01 * t, 1), f) / 64  # noqa: E731
        _, _, events = simulate(rise, train=train, families=100, rounds=40, seed=seed)
        quarantined += len(_fired(events, "quarantined"))
    assert quarantined <= 30  # of 300 (about 6 % measured; a third without the weak-rise test)
