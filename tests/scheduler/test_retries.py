from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domains import Catalog
from scheduler import ConfigError, dumps_state, loads_state
from scheduler._retries import RetryQueue

CAT = Catalog.synthetic(n_domains=2, families_per_domain=2, n_tiers=3)  # 4 families, 12 arms


def _queue(**kw: float) -> RetryQueue:
    return RetryQueue(CAT.family_of_arm, **kw)  # type: ignore[arg-type]


def test_oldest_first_within_the_share_limit() -> None:
    q = _queue(max_share=0.25)
    q.push([5, 6, 7], [50, 60, 70], 0, step=1)
    q.push([8, 9], [80, 90], [1, 0], step=2)
    assert q.limit(8) == 2
    arm, variant, attempts = q.pop(8)
    assert arm.tolist() == [5, 6] and variant.tolist() == [50, 60]
    assert attempts.tolist() == [1, 1]  # the attempt number these retries run as
    assert q.pop(3)[0].tolist() == []  # floor(0.25 * 3) == 0: retries never crowd a batch out
    arm, variant, attempts = q.pop(100)
    assert arm.tolist() == [7, 8, 9] and variant.tolist() == [70, 80, 90]
    assert attempts.tolist() == [1, 2, 1]
    assert len(q) == 0
    assert q.counters["pushed"] == 5 and q.counters["popped"] == 5


def test_retries_are_bounded_and_abandoned_rows_counted() -> None:
    q = _queue(max_retries=2, max_share=1.0)
    attempts = np.array([0])
    runs = 0
    while True:  # a task that faults every time it runs
        runs += 1
        if q.push([3], [7], attempts, step=runs) == 0:
            break
        arm, variant, attempts = q.pop(4)
        assert (arm.tolist(), variant.tolist()) == ([3], [7])  # same variant every time
    assert runs == 3  # the first run plus max_retries retries
    assert q.counters["abandoned"] == 1 and len(q) == 0
    assert _queue(max_retries=0).push([1, 2], [0, 0], 0, step=0) == 0


def test_rows_of_open_families_are_dropped() -> None:
    q = _queue(max_share=1.0)
    q.push(np.arange(12), np.arange(12) * 10, 0, step=0)  # arms 3k..3k+2 belong to family k
    open_mask = np.array([False, True, False, True])
    arm, variant, _ = q.pop(12, blocked=open_mask)
    assert arm.tolist() == [0, 1, 2, 6, 7, 8]
    assert variant.tolist() == [0, 10, 20, 60, 70, 80]
    assert q.counters["dropped_open"] == 6
    q.push([4, 0], [1, 1], 0, step=1)
    assert q.drop_families(open_mask) == 1 and q.arm.tolist() == [0]


def test_capacity_drops_the_oldest() -> None:
    q = _queue(capacity=3, max_share=1.0)
    q.push([1, 2, 3, 4, 5], [0, 0, 0, 0, 0], 0, step=0)
    assert q.arm.tolist() == [3, 4, 5] and q.counters["dropped_overflow"] == 2


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"max_retries": -1}, "retries.max_retries: must be >= 0"),
        ({"max_share": 1.5}, "retries.max_share: must be in [0, 1], got 1.5"),
        ({"capacity": 0}, "retries.capacity: must be >= 1"),
    ],
)
def test_bad_config_names_the_field(kw: dict[str, float], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        _queue(**kw)
    assert needle in str(err.value)


@settings(max_examples=20, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 12), st.integers(1, 16)), min_size=1, max_size=20))
def test_state_round_trip_is_exact(ops: list[tuple[int, int]]) -> None:
    rng = np.random.default_rng(len(ops))
    a = _queue(max_share=0.5, capacity=20)
    for step, (k, batch) in enumerate(ops):
        a.push(rng.integers(0, 12, k), rng.integers(0, 16, k), rng.integers(0, 3, k), step=step)
        a.pop(batch)
    b = _queue(max_share=0.5, capacity=20)
    b.load_state_dict(loads_state(dumps_state(a.state_dict())))
    assert b.counters == a.counters and len(a) == len(b)
    blocked = np.array([False, False, True, False])
    for x, y in zip(a.pop(64, blocked=blocked), b.pop(64, blocked=blocked), strict=True):
        np.testing.assert_array_equal(x, y)
    assert b.counters == a.counters


def test_load_rejects_foreign_rows() -> None:
    state = _queue().state_dict()
    state["arm"] = np.array([99])
    with pytest.raises(ConfigError, match="retries: row arrays differ in length"):
        _queue().load_state_dict(state)
    state["variant"] = state["attempts"] = state["first_step"] = np.array([0])
    with pytest.raises(ConfigError, match="arm ids outside this catalog"):
        _queue().load_state_dict(state)
