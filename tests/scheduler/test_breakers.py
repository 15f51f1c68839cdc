from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domains import Catalog
from scheduler import ConfigError, Event, Status, dumps_state, loads_state
from scheduler._breakers import CLOSED, HALF_OPEN, OPEN, BreakerConfig, CircuitBreakers

CFG = BreakerConfig(
    probe_failures=3,
    fault_window=8,
    fault_threshold=4,
    cooldown_steps=10,
    half_open_successes=2,
    half_open_factor=0.25,
)


def _breakers(cfg: BreakerConfig = CFG) -> CircuitBreakers:
    return CircuitBreakers(Catalog.synthetic(n_domains=2, families_per_domain=3), cfg)


def _open_by_probes(br: CircuitBreakers, family: int, step: int = 0) -> list[Event]:
    events: list[Event] = []
    for _ in range(br.config.probe_failures):
        events += br.record_probe_results([family], [False], step)
    return events


def test_consecutive_probe_failures_open_only_that_family() -> None:
    br = _breakers()
    assert br.record_probe_results([1, 1], [False, False], 0) == []
    assert br.state[1] == CLOSED
    events = br.record_probe_results([2, 1, 3], [True, False, True], 1)
    assert [e.kind for e in events] == ["breaker_opened"]
    assert events[0].family == br.catalog.family_names[1]
    assert events[0].domain == "domain_0"
    assert events[0].payload["reason"] == "probe_failures"
    assert events[0].payload["consecutive_probe_failures"] == 3
    assert events[0].payload["until_step"] == 1 + CFG.cooldown_steps
    assert br.open_mask.tolist() == [False, True, False, False, False, False]
    assert br.probe_allowed.tolist() == [True, False, True, True, True, True]
    np.testing.assert_array_equal(br.sampling_factor, [1, 0, 1, 1, 1, 1])


def test_a_success_in_between_resets_the_probe_streak() -> None:
    br = _breakers()
    # failures, then a success, then two failures: streak 2, not 4 (order within a call counts)
    assert br.record_probe_results([0, 0, 0, 0, 0], [False, False, True, False, False], 0) == []
    assert br.probe_streak[0] == 2
    assert br.record_probe_results([0], [True], 1) == []
    assert br.probe_streak[0] == 0


def test_cooldown_half_open_then_closed_after_successes() -> None:
    br = _breakers()
    _open_by_probes(br, 4, step=5)
    assert br.tick(14) == []  # 9 steps < cool-down of 10
    events = br.tick(15)
    assert [(e.kind, e.payload["opened_at"]) for e in events] == [("breaker_half_open", 5)]
    assert br.state[4] == HALF_OPEN
    assert br.sampling_factor[4] == pytest.approx(0.25)
    assert br.probe_allowed[4]
    assert br.record_probe_results([4], [True], 16) == []  # one of two successes
    assert br.state[4] == HALF_OPEN
    events = br.record_outcomes([4, 4], [Status.OK, Status.FAILED], 17)  # non-faults are good
    assert [e.kind for e in events] == ["breaker_closed"]
    assert events[0].payload["trips"] == 1
    assert br.state[4] == CLOSED and br.sampling_factor[4] == 1.0
    assert br.probe_streak[4] == 0 and br.window_faults[4] == 0


def test_half_open_failure_reopens_with_a_longer_cooldown() -> None:
    br = _breakers()
    _open_by_probes(br, 0, step=0)
    br.tick(10)
    events = br.record_probe_results([0, 0], [True, False], 11)
    assert [e.kind for e in events] == ["breaker_opened"]
    assert events[0].payload["reason"] == "half_open_probe_failures"
    assert events[0].payload["previous_state"] == "half_open"
    assert events[0].payload["cooldown_steps"] == 20  # grown x2
    assert br.state[0] == OPEN and br.trips[0] == 2
    assert br.tick(30) == []
    assert [e.kind for e in br.tick(31)] == ["breaker_half_open"]
    br.record_probe_results([0, 0], [True, True], 32)
    assert br.state[0] == CLOSED
    assert br.cooldown[0] == CFG.cooldown_steps  # closing resets the cool-down


def test_outcome_faults_in_window_trip_and_model_failures_do_not() -> None:
    br = _breakers()
    fam = np.array([2] * 8 + [3] * 40)
    status = np.array(
        [Status.OK, Status.TIMEOUT, Status.OK, Status.ENV_ERROR, Status.OK, Status.TIMEOUT]
        + [Status.OK, Status.OK]
        + [Status.FAILED] * 40
    )
    assert br.record_outcomes(fam, status, 0) == []  # 3 faults of 8 < 4; FAILED is no fault
    assert br.window_faults[2] == 3 and br.window_faults[3] == 0
    events = br.record_outcomes([2, 5], [Status.ENV_ERROR, Status.OK], 1)
    assert [e.family for e in events] == [br.catalog.family_names[2]]
    payload = events[0].payload
    assert payload["reason"] == "outcome_faults"
    assert payload["window_faults"] == 4 and payload["window_outcomes"] == 8
    assert payload["fault_statuses"] == ["timeout", "env_error"]
    assert br.open_mask.tolist() == [False, False, True, False, False, False]


def test_window_slides_old_faults_out() -> None:
    br = _breakers()
    br.record_outcomes([1] * 3, [Status.TIMEOUT] * 3, 0)
    br.record_outcomes([1] * 8, [Status.OK] * 8, 1)  # pushes the three faults out of W=8
    assert br.window_faults[1] == 0
    assert br.record_outcomes([1] * 3, [Status.TIMEOUT] * 3, 2) == []
    assert br.state[1] == CLOSED
    # more than W outcomes of one family in one call: only the last W stay
    assert br.record_outcomes([0] * 20, [Status.TIMEOUT] * 12 + [Status.OK] * 8, 3) == []
    assert br.window_faults[0] == 0 and br.ring_filled[0] == 8
    assert len(br.record_outcomes([0] * 20, [Status.OK] * 15 + [Status.TIMEOUT] * 5, 4)) == 1


def test_fault_statuses_and_failed_streak_are_configurable() -> None:
    only_timeouts = _breakers(
        BreakerConfig(fault_window=4, fault_threshold=2, fault_statuses=("timeout",))
    )
    assert only_timeouts.record_outcomes([0, 0, 0], [Status.ENV_ERROR] * 3, 0) == []
    assert len(only_timeouts.record_outcomes([0, 0], [Status.TIMEOUT] * 2, 1)) == 1

    streak = _breakers(BreakerConfig(failed_streak=5))
    streak.record_outcomes([1] * 4 + [1], [Status.FAILED] * 4 + [Status.OK], 0)
    streak.record_outcomes([1] * 4, [Status.FAILED] * 4, 1)
    assert streak.state[1] == CLOSED  # the OK broke the run: 4 in a row
    # faults neither extend nor break a run of model failures
    events = streak.record_outcomes([1, 1], [Status.TIMEOUT, Status.FAILED], 2)
    assert [e.payload["reason"] for e in events] == ["failed_streak"]
    assert events[0].payload["failed_streak"] == 5


def test_results_for_an_open_family_are_ignored() -> None:
    br = _breakers()
    _open_by_probes(br, 0)
    assert br.record_outcomes([0] * 10, [Status.OK] * 10, 1) == []
    assert br.record_probe_results([0], [True], 1) == []
    assert br.state[0] == OPEN and br.window_faults[0] == 0


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("probe_failures", 0, "breakers.probe_failures: must be >= 1, got 0"),
        ("fault_threshold", 99, "must be in [1, fault_window=32]"),
        ("fault_statuses", ("oops",), "'oops' is not a status; use some of ok, failed"),
        ("fault_statuses", ("ok",), "must not contain ok"),
        ("half_open_factor", 0.0, "breakers.half_open_factor: must be in (0, 1]"),
    ],
)
def test_bad_config_names_the_field(field: str, value: object, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        BreakerConfig(**{field: value})  # type: ignore[arg-type]
    assert needle in str(err.value)


def _drive(br: CircuitBreakers, seed: int, steps: int) -> None:
    rng = np.random.default_rng(seed)
    n = br.catalog.n_families
    for step in range(steps):
        fam = rng.integers(0, n, 12)
        br.record_outcomes(fam, rng.choice([0, 1, 2, 3], 12, p=[0.5, 0.2, 0.15, 0.15]), step)
        pf = rng.integers(0, n, 3)
        br.record_probe_results(pf, rng.random(3) < 0.6, step)
        br.tick(step)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), cut=st.integers(1, 30))
def test_state_round_trip_is_exact(seed: int, cut: int) -> None:
    a = _breakers()
    _drive(a, seed, cut)
    b = _breakers()
    b.load_state_dict(loads_state(dumps_state(a.state_dict())))
    for name in ("state", "probe_streak", "ring", "opened_at", "cooldown", "trips"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    rng = np.random.default_rng(seed + 1)
    for step in range(cut, cut + 20):
        fam = rng.integers(0, 6, 10)
        status = rng.choice([0, 1, 2, 3], 10)
        ok = rng.random(10) < 0.5
        assert a.record_outcomes(fam, status, step) == b.record_outcomes(fam, status, step)
        assert a.record_probe_results(fam, ok, step) == b.record_probe_results(fam, ok, step)
        assert a.tick(step) == b.tick(step)
    np.testing.assert_array_equal(a.state, b.state)


def test_load_rejects_another_config_or_shape() -> None:
    state = _breakers().state_dict()
    with pytest.raises(ConfigError, match="breakers were saved with config"):
        _breakers(BreakerConfig()).load_state_dict(state)
    other = CircuitBreakers(Catalog.synthetic(n_domains=1, families_per_domain=2), CFG)
    with pytest.raises(ConfigError, match=r"breakers\.state: expected shape \(2,\), got \(6,\)"):
        other.load_state_dict(state)
