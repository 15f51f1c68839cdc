"""The bounded backlog: exact accounting, coalescing per (key, step), thinning of old steps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.tracking._buffer import MetricBuffer


def add(buf: MetricBuffer, step: int, keys: list[str], value: float = 0.0) -> None:
    buf.add(step, 0, tuple(keys), np.full(len(keys), value))


def test_take_splits_records_in_order() -> None:
    buf = MetricBuffer(max_values=1000)
    add(buf, 0, ["a", "b", "c"])
    add(buf, 1, ["a", "b"])
    first = buf.take(4)
    assert [(r.step, r.keys) for r in first] == [(0, ("a", "b", "c")), (1, ("a",))]
    assert buf.size == 1 and buf.front_seq == 2
    rest = buf.take(10)
    assert [(r.step, r.keys) for r in rest] == [(1, ("b",))]
    assert buf.size == 0 and buf.front_seq is None


def test_overflow_keeps_newest_value_per_key_and_step() -> None:
    buf = MetricBuffer(max_values=8)
    add(buf, 5, ["a", "b", "c", "d"], 1.0)
    add(buf, 5, ["a", "b", "c", "d"], 2.0)  # same step: supersedes the first four
    add(buf, 6, ["a"], 3.0)  # 9 > 8: shrink
    assert buf.coalesced == 4 and buf.dropped == 0 and buf.size == 5
    got = buf.take(100)
    assert [(r.step, r.values.tolist()) for r in got] == [(5, [2.0] * 4), (6, [3.0])]


def test_thinning_keeps_first_and_recent_steps() -> None:
    buf = MetricBuffer(max_values=100)
    for step in range(101):
        add(buf, step, ["loss"])
    assert buf.size <= 100 and buf.dropped == 101 - buf.size
    steps = [r.step for r in buf.take(1000)]
    assert steps[0] == 0 and steps[-1] == 100
    assert steps == sorted(steps)
    assert steps[-40:] == list(range(61, 101))  # the recent half is untouched


def test_a_single_record_larger_than_the_budget_is_kept() -> None:
    buf = MetricBuffer(max_values=10)
    add(buf, 0, [f"k{i}" for i in range(50)])
    assert buf.size == 50 and buf.dropped == 0


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.integers(0, 20), st.lists(st.sampled_from("abcdefgh"), unique=True)),
        max_size=80,
    ),
    takes=st.lists(st.integers(1, 30), max_size=10),
    max_values=st.integers(1, 40),
)
def test_every_value_is_accounted_for(
    calls: list[tuple[int, list[str]]], takes: list[int], max_values: int
) -> None:
    buf = MetricBuffer(max_values=max_values)
    taken = 0
    for i, (step, keys) in enumerate(calls):
        add(buf, step, keys)
        if takes and i % 7 == 0:
            taken += sum(len(r) for r in buf.take(takes[i % len(takes)]))
        largest = max((len(k) for _, k in calls[: i + 1]), default=0)
        assert buf.size <= max(max_values, largest)
    assert buf.queued == sum(len(k) for _, k in calls)
    assert buf.queued == taken + buf.size + buf.coalesced + buf.dropped
    rest = buf.take(10**6)
    assert sum(len(r) for r in rest) + taken + buf.coalesced + buf.dropped == buf.queued
    seqs = [r.seq for r in rest]
    assert seqs == sorted(seqs)
