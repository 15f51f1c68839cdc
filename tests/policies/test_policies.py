from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from domains import Catalog
from policies import (
    LearningProgress,
    PolicyConfigError,
    available_policies,
    binomial_interval,
    make_policy,
    policy_params,
    smooth,
)
from scheduler import Outcome, Scheduler, SchedulerConfig


def test_registry_builds_by_name_and_mapping() -> None:
    assert {"uniform", "static", "learning_progress"} <= set(available_policies())
    lp = make_policy({"name": "learning_progress", "min_samples": 4})
    assert isinstance(lp, LearningProgress) and lp.min_samples == 4
    assert policy_params(lp)["name"] == "learning_progress"


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("nope", "unknown policy 'nope'"),
        ({"min_samples": 3}, "needs a 'name'"),
        ({"name": "learning_progress", "speed": 3}, r"unknown option\(s\) \['speed'\]"),
        ({"name": "learning_progress", "signal": "vibes"}, "signal must be"),
    ],
)
def test_registry_errors_are_clear(spec: object, match: str) -> None:
    with pytest.raises(PolicyConfigError, match=match):
        make_policy(spec)  # type: ignore[arg-type]


def test_smooth_floor_and_temperature() -> None:
    w = np.array([0.0, 1.0, 3.0])
    p = smooth(w, floor=0.3)
    assert p.sum() == pytest.approx(1.0) and p.min() == pytest.approx(0.1)
    sharp = smooth(w, temperature=0.5)
    assert sharp[2] / sharp[1] == pytest.approx(9.0)
    np.testing.assert_allclose(smooth(np.zeros(4)), 0.25)


def _view_after(success_by_family: dict[int, np.ndarray], chance: float = 0.0) -> np.ndarray:
    """LP scores after feeding each family a success sequence, one outcome per step."""
    cat = Catalog.synthetic(1, len(success_by_family), 1, chance_success=chance)
    sched = Scheduler(cat, "uniform", seed=0)
    steps = len(next(iter(success_by_family.values())))
    for t in range(steps):
        sched.record_outcomes(
            [
                Outcome(arm=f, variant=0, reward=float(s[t]), success=float(s[t]))
                for f, s in success_by_family.items()
            ]
        )
    return LearningProgress(min_samples=0).weights(sched.view(), {})


def test_learning_progress_prefers_learning_over_noise_and_mastery() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(300)
    learning = (rng.random(300) < np.clip(t / 300, 0, 1)).astype(float)
    coin = (rng.random(300) < 0.5).astype(float)
    mastered = np.ones(300)
    impossible = np.zeros(300)
    lp = _view_after({0: learning, 1: coin, 2: mastered, 3: impossible}, chance=0.0)
    assert lp[0] > lp[2] and lp[0] > lp[3]
    assert lp[2] == 0.0 and lp[3] == 0.0


def test_chance_normalisation_silences_guessing() -> None:
    rng = np.random.default_rng(1)
    guess = (rng.random(400) < 0.25).astype(float)  # 4-way multiple choice at chance
    lp = _view_after({0: guess}, chance=0.25)
    raw = _view_after({0: guess}, chance=0.0)
    assert lp[0] < raw[0]


def test_unexplored_arms_get_optimism() -> None:
    cat = Catalog.synthetic(1, 3, 1)
    sched = Scheduler(cat, "uniform")
    w = LearningProgress(min_samples=5, optimism=2.0).weights(sched.view(), {})
    np.testing.assert_allclose(w, 2.0)


def test_binomial_interval_is_jeffreys() -> None:
    s = np.array([0.0, 3.0, 10.0, 50.0])
    n = np.array([10.0, 10.0, 10.0, 60.0])
    low, high = binomial_interval(s, n, 0.9)
    expected_low = stats.beta.ppf(0.05, s + 0.5, n - s + 0.5)
    expected_high = stats.beta.ppf(0.95, s + 0.5, n - s + 0.5)
    np.testing.assert_allclose(low[1:], expected_low[1:])
    np.testing.assert_allclose(high[:2], expected_high[:2])
    assert low[0] == 0.0 and high[2] == 1.0


def test_progress_noise_matches_simulated_emas() -> None:
    """The closed-form SD of fast - slow on a stationary Bernoulli arm equals simulation."""
    rng = np.random.default_rng(0)
    a, b, p = 0.1, 0.02, 0.3
    x = (rng.random((400, 3000)) < p).astype(float)
    fast = np.full(400, p)
    slow = np.full(400, p)
    diffs = []
    for t in range(3000):
        fast += a * (x[:, t] - fast)
        slow += b * (x[:, t] - slow)
        if t > 500:
            diffs.append(fast - slow)
    empirical = float(np.std(np.concatenate(diffs)))
    cat = Catalog.synthetic(1, 1, 1)
    view = Scheduler(cat, "uniform", config=SchedulerConfig(ema_fast=a, ema_slow=b)).view()
    assert view.progress_noise(np.array([p]))[0] == pytest.approx(empirical, rel=0.05)


def test_noise_debiased_progress_silences_coin_flips() -> None:
    rng = np.random.default_rng(3)
    coin = (rng.random(400) < 0.5).astype(float)
    raw = _view_after({0: coin})
    cat = Catalog.synthetic(1, 1, 1)
    sched = Scheduler(cat, "uniform", seed=0)
    for t in range(400):
        sched.record_outcomes([Outcome(arm=0, variant=0, reward=coin[t], success=coin[t])])
    debiased = LearningProgress(min_samples=0, noise_z=2.0).weights(sched.view(), {})
    assert debiased[0] < raw[0]


def test_learning_progress_fades_near_the_ceiling() -> None:
    t = np.arange(300)
    rising = np.clip(0.5 + t / 300, 0, 1)  # reaches 1.0 half-way, still lagging EMAs
    rng = np.random.default_rng(3)
    ceiling = (rng.random(300) < rising).astype(float)
    low = (rng.random(300) < np.clip(t / 600, 0, 1)).astype(float)
    faded = LearningProgress(min_samples=0, mastery=0.9)
    raw = LearningProgress(min_samples=0, mastery=1.0)
    cat = Catalog.synthetic(1, 2, 1)
    sched = Scheduler(cat, "uniform", seed=0)
    for i in range(300):
        sched.record_outcomes(
            [
                Outcome(arm=0, variant=0, reward=ceiling[i], success=ceiling[i]),
                Outcome(arm=1, variant=0, reward=low[i], success=low[i]),
            ]
        )
    view = sched.view()
    assert faded.weights(view, {})[0] < 0.5 * raw.weights(view, {})[0]
    assert faded.weights(view, {})[1] == pytest.approx(raw.weights(view, {})[1])


def test_probe_optimism_skips_arms_a_probe_shows_mastered() -> None:
    cat = Catalog.synthetic(1, 3, 1)
    sched = Scheduler(cat, "uniform")
    sched.record_probes([0, 1], [1.0, 0.5], n=[32, 32])
    w = LearningProgress(min_samples=5, optimism=2.0).weights(sched.view(), {})
    np.testing.assert_allclose(w, [0.0, 2.0, 2.0])  # unprobed family 2 keeps full optimism
    blind = LearningProgress(min_samples=5, optimism=2.0, probe_optimism=False)
    np.testing.assert_allclose(blind.weights(sched.view(), {}), 2.0)
