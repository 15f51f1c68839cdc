"""The event log: events kept as arrays until read, bounded where nobody drains them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from domains import Catalog
from scheduler import Scheduler
from scheduler._events import Event, EventLog


@dataclass
class _Deferred:
    step: int
    count: int
    built: int = 0

    def __len__(self) -> int:
        return self.count

    def build(self) -> list[Event]:
        self.built += 1
        return [Event(step=self.step, kind="k", payload={"i": i}) for i in range(self.count)]


def test_deferred_parts_are_built_only_when_read_and_keep_their_order() -> None:
    log = EventLog()
    part = _Deferred(step=2, count=3)
    log += [Event(step=1, kind="first")]
    log += part
    log += [Event(step=3, kind="last")]
    assert part.built == 0 and len(log) == 5
    events = log.drain()
    assert [e.step for e in events] == [1, 2, 2, 2, 3]
    assert [e.payload.get("i") for e in events[1:4]] == [0, 1, 2]
    assert part.built == 1 and len(log) == 0 and log.drain() == []


def test_a_log_nobody_drains_keeps_the_newest_and_counts_what_it_dropped() -> None:
    log = EventLog(limit=10)
    for step in range(8):
        log += [Event(step=step, kind="a"), Event(step=step, kind="b")]
    events = log.drain()
    assert events[0].kind == "events_dropped" and events[0].payload == {"count": 6}
    assert [e.step for e in events[1:]] == [3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    log += [Event(step=9, kind="a")]
    assert [e.kind for e in log.drain()] == ["a"]  # the count starts again after a drain


def test_a_copy_is_left_apart_from_later_additions() -> None:
    log = EventLog([Event(step=0, kind="a")])
    copy = log.copy()
    log += [Event(step=1, kind="b")]
    assert [e.kind for e in copy.peek()] == ["a"]
    assert [e.kind for e in log.peek()] == ["a", "b"]


def test_tier_moves_read_as_the_same_events_after_a_checkpoint() -> None:
    cat = Catalog.synthetic(2, 3, 3)
    sched = Scheduler(cat, "uniform", seed=0)
    for _ in range(20):
        batch = sched.next_batch(64)
        sched.report(batch, rewards=np.ones(64), success=np.ones(64))
    again = Scheduler(cat, "uniform", seed=0)
    again.load_state_dict(sched.state_dict())
    moves = [e for e in sched.drain_events() if e.kind == "tier_promoted"]
    assert moves, "a learner that passes everything is promoted"
    assert [e for e in again.drain_events() if e.kind == "tier_promoted"] == moves
    assert all(e.family in cat.family_names and e.domain in cat.domain_names for e in moves)
    assert all(e.payload["new_tier"] > e.payload["old_tier"] for e in moves)
