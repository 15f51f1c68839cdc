"""StepWriter: buffer a run's rows step by step and commit them with a checkpoint.

A commit costs a transaction (on SQLite, a WAL append of every page the step touched), so
committing every step is the slowest choice. The writer commits every ``every_steps`` steps
or ``every_seconds`` seconds, whichever comes first, and each commit carries the checkpoint
of its last step in the same transaction. A crash loses at most the uncommitted tail, and
the latest checkpoint always matches the rows before it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._events import Event
from ._protocol import FloatArray, OutcomeRows, ProbePoints, Store, StoreError

log = logging.getLogger(__name__)


@dataclass
class _Buffer:
    probes: list[ProbePoints] = field(default_factory=list)
    outcomes: list[OutcomeRows] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    weights: list[tuple[int, FloatArray]] = field(default_factory=list)
    steps: int = 0


class StepWriter:
    """Buffered, checkpointed writes of one run (not thread-safe: one writer per run)."""

    def __init__(
        self,
        store: Store,
        run_id: int,
        *,
        every_steps: int = 1,
        every_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if every_steps < 1:
            raise StoreError(f"checkpoint every_steps: must be at least 1, got {every_steps}")
        if every_seconds is not None and every_seconds <= 0:
            raise StoreError(f"checkpoint every_seconds: must be positive, got {every_seconds}")
        self.store, self.run_id = store, run_id
        self.every_steps, self.every_seconds = every_steps, every_seconds
        self._clock = clock
        self._last_commit = clock()
        self._buf = _Buffer()
        self.commits = 0

    @property
    def pending_steps(self) -> int:
        return self._buf.steps

    def step(
        self,
        step: int,
        state: Callable[[], bytes],
        *,
        probe_points: ProbePoints | None = None,
        events: Sequence[Event] = (),
        weights: FloatArray | None = None,
        outcomes: OutcomeRows | None = None,
    ) -> bool:
        """Buffer one step's rows; commit them and ``state()`` if a checkpoint is due.

        ``state`` is called only when committing (it serialises the whole scheduler).
        Returns True when this step was committed.
        """
        buf = self._buf
        if probe_points is not None and len(probe_points):
            buf.probes.append(probe_points)
        if outcomes is not None and len(outcomes):
            buf.outcomes.append(outcomes)
        buf.events.extend(events)
        if weights is not None:
            buf.weights.append((int(step), weights))
        buf.steps += 1
        due = buf.steps >= self.every_steps or (
            self.every_seconds is not None
            and self._clock() - self._last_commit >= self.every_seconds
        )
        if due:
            self.commit(step, state())
        return due

    def commit(self, step: int, state: bytes | None) -> None:
        """Write everything buffered (and the checkpoint, if given) in one transaction."""
        buf, self._buf = self._buf, _Buffer()
        try:
            self.store.write(
                self.run_id,
                probe_points=ProbePoints.concat(buf.probes) if buf.probes else None,
                outcomes=OutcomeRows.concat(buf.outcomes) if buf.outcomes else None,
                events=buf.events,
                weights=buf.weights or None,
                checkpoint=(step, state) if state is not None else None,
            )
        except BaseException:
            self._buf = buf  # nothing was written: keep the rows for a retry
            raise
        self._last_commit = self._clock()
        self.commits += 1
        log.debug("committed %d step(s) of run %d up to step %d", buf.steps, self.run_id, step)
