"""Events: what the scheduler decided or detected, with the evidence."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Event:
    """Kinds: tier_promoted, tier_demoted, mastered, idle (payload reason: out_of_reach,
    flat or stalled), suspected_reward_hacking (and each of those three ``*_cleared``),
    breaker_opened, breaker_half_open, breaker_closed, quota_unreachable, cost_overrun, and
    events_dropped (payload count: events a run that never drained had to drop)."""

    step: int
    kind: str
    family: str | None = None
    domain: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)


class DeferredEvents(Protocol):
    """Events kept as arrays until read: ``len`` is how many, ``build`` makes them."""

    def __len__(self) -> int: ...

    def build(self) -> list[Event]: ...


class EventLog:
    """The events since the last drain, oldest first.

    A probe round at 100,000 arms can move thousands of tiers, and a run reads its events
    once a step if at all: parts hand their events over as arrays (``DeferredEvents``) and
    the Event objects are built only when read. A run that never drains keeps the newest
    ``limit`` events; the oldest parts beyond it are dropped and counted, and the next
    drain starts with one ``events_dropped`` event that says how many.
    """

    def __init__(self, events: Iterable[Event] = (), limit: int = 100_000) -> None:
        self.limit = limit
        self._parts: deque[list[Event] | DeferredEvents] = deque()
        self._size = 0
        self.dropped = 0
        self += list(events)

    def __iadd__(self, events: list[Event] | DeferredEvents) -> EventLog:
        if len(events):
            self._parts.append(events)
            self._size += len(events)
            while self._size > self.limit and len(self._parts) > 1:
                oldest = self._parts.popleft()
                self._size -= len(oldest)
                self.dropped += len(oldest)
        return self

    def __len__(self) -> int:
        return self._size + (1 if self.dropped else 0)

    def copy(self) -> EventLog:
        """An equal log that later additions to either leave apart (parts are never
        changed once added, so they are shared)."""
        other = EventLog(limit=self.limit)
        other._parts, other._size, other.dropped = deque(self._parts), self._size, self.dropped
        return other

    def peek(self) -> list[Event]:
        """Every pending event, oldest first, left pending."""
        events: list[Event] = []
        for part in self._parts:
            events += part if isinstance(part, list) else part.build()
        if self.dropped:
            step = events[0].step if events else 0
            dropped = Event(step=step, kind="events_dropped", payload={"count": self.dropped})
            events.insert(0, dropped)
        return events

    def drain(self) -> list[Event]:
        """Every pending event, oldest first; none is pending after."""
        events = self.peek()
        self._parts.clear()
        self._size = self.dropped = 0
        return events
