"""StepWriter: buffer a run's rows step by step and commit them with a checkpoint.

A commit costs a transaction (on SQLite, a WAL append of every page the step touched), so
committing every step is the slowest choice. The writer commits every ``every_steps`` steps
or ``every_seconds`` seconds, whichever comes first, and each commit carries the checkpoint
of its last step in the same transaction. A crash loses at most the uncommitted tail, and
the latest checkpoint always matches the rows before it.
"""

from __future__ import annotations

import logging
import queue
import threading
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
        background: bool = False,
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
        # With background=True a worker thread runs the transactions; the caller only hands
        # over a buffer and the checkpoint bytes (queue of one: at most one commit waits).
        self._queue: queue.Queue[tuple[int, bytes | None, _Buffer] | None] | None = None
        self._worker: threading.Thread | None = None
        self._error: BaseException | None = None
        if background:
            self._queue = queue.Queue(maxsize=1)
            self._worker = threading.Thread(
                target=self._drain, name=f"store-writer-{run_id}", daemon=True
            )
            self._worker.start()

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
        """Write everything buffered (and the checkpoint, if given) in one transaction.

        In background mode the transaction runs on the worker; an error it met is raised
        here, at the next commit (or at ``close``), so a failed write is never silent.
        """
        self._raise_worker_error()
        if self._queue is not None:
            buf, self._buf = self._buf, _Buffer()
            self._queue.put((step, state, buf))
            return
        self._write(step, state)

    def close(self) -> None:
        """Wait for a background commit to finish; raise its error if it failed."""
        if self._queue is not None and self._worker is not None:
            self._queue.put(None)
            self._worker.join()
            self._queue = None
        self._raise_worker_error()

    def _raise_worker_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise StoreError(f"a background commit of run {self.run_id} failed: {error}") from error

    def _drain(self) -> None:
        assert self._queue is not None
        while (item := self._queue.get()) is not None:
            step, state, buf = item
            if self._error is not None:
                continue  # after a failure, later commits would leave a gap: drop them
            try:
                self._write(step, state, buf)
            except BaseException as exc:
                log.error("background commit of run %d up to step %d failed: %s",
                          self.run_id, step, exc)  # fmt: skip
                self._error = exc

    def _write(self, step: int, state: bytes | None, buf: _Buffer | None = None) -> None:
        background = buf is not None
        if buf is None:
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
            if not background:
                self._buf = buf  # nothing was written: keep the rows for a retry
            raise
        self._last_commit = self._clock()
        self.commits += 1
        log.debug("committed %d step(s) of run %d up to step %d", buf.steps, self.run_id, step)
