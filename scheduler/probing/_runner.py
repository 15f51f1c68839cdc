"""The probe runner: calls the user's probe function for the families that most need it.

A round picks up to ``budget`` families by a vectorised priority (stale, changing and
high-weight families first; a family whose last probe failed jumps the queue once its backoff
has passed, until it has failed ``max_attempts`` times in a row) and runs them in a thread
pool. Rounds come every N training steps (:meth:`ProbeRunner.maybe_run`, called by the
training thread) or on the wall clock (:meth:`ProbeRunner.start` with an APScheduler 3
interval or cron trigger). Results land in a lock-protected inbox; the training thread takes
them between steps with :meth:`drain`.

Failure isolation: a probe that raises, returns something other than a score in [0, 1], or
runs past ``timeout_s`` is a failed result, and its family backs off exponentially
(``retry_backoff_s * 2**(k-1)``, capped). Python cannot kill a thread, so an overrunning
probe is *abandoned*: its result is ignored, its worker stays busy until the function
returns, and its family is not probed again until then. Nothing here ever blocks the
training thread: ``maybe_run``, ``run_round`` and ``drain`` only submit, read and copy.

The runner does not import the Scheduler; the caller passes a :class:`ProbeSnapshot` of the
priority inputs.
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ConfigError
from ._executors import ProbeExecutor, ThreadProbeExecutor
from ._handover import ProbeFn, ProbeResults, ProbeSnapshot, empty_results

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_COUNTERS = ("rounds", "submitted", "succeeded", "failed", "timed_out", "skipped", "late")


@dataclass(frozen=True)
class PriorityWeights:
    """How much each reason to probe a family counts (each term is scaled to [0, 1])."""

    stale: float = 1.0  # steps since the last probe; a family never probed counts double
    change: float = 1.0  # how fast its curve moves
    weight: float = 1.0  # how much of the batch it gets


def priority_scores(snapshot: ProbeSnapshot, weights: PriorityWeights | None = None) -> FloatArray:
    """float64 [n_families]: higher means probe sooner. Each term is divided by its maximum."""
    w = weights or PriorityWeights()
    last = np.asarray(snapshot.last_probe_step, dtype=np.int64)
    stale = np.maximum(snapshot.step - last, 0).astype(np.float64)
    probed = last >= 0
    top = stale[probed].max(initial=0.0)
    stale_term = np.where(probed, stale / max(top, 1.0), 2.0)
    change = np.nan_to_num(np.abs(np.asarray(snapshot.change, dtype=np.float64)), nan=0.0)
    weight = np.maximum(np.asarray(snapshot.weights, dtype=np.float64), 0.0)
    change_term = change / max(float(change.max(initial=0.0)), 1e-12)
    weight_term = weight / max(float(weight.max(initial=0.0)), 1e-12)
    return np.asarray(
        w.stale * stale_term + w.change * change_term + w.weight * weight_term, dtype=np.float64
    )


@dataclass
class _Call:
    family: int
    tier: int
    step: int
    submitted: float
    started: float | None = None
    future: Future[Any] | None = None
    abandoned: bool = False


class ProbeRunner:
    """Runs ``probe_fn(family_name, tier) -> score | (score, n)`` in rounds, in threads
    (or on any ``executor``, such as ``RayProbeExecutor``: the same timeouts and backoff).

    Each round probes up to ``budget`` families at their snapshot tier, by priority.

    >>> runner = ProbeRunner(probe_fn, catalog.family_names, budget=8, every_steps=50)
    >>> runner.maybe_run(snapshot)          # training thread, between steps
    >>> results = runner.drain()            # then sched.record_probes / breakers.record_...
    >>> runner.stop()
    """

    def __init__(
        self,
        probe_fn: ProbeFn,
        family_names: Sequence[str],
        *,
        budget: int,
        max_workers: int = 4,
        timeout_s: float = 60.0,
        retry_backoff_s: float = 5.0,
        max_backoff_s: float = 600.0,
        max_attempts: int = 3,
        every_steps: int | None = None,
        priority: PriorityWeights | None = None,
        executor: ProbeExecutor | None = None,
    ) -> None:
        checks: tuple[tuple[str, object, bool, str], ...] = (
            ("budget", budget, budget >= 1, "must be >= 1"),
            ("max_workers", max_workers, max_workers >= 1, "must be >= 1"),
            ("timeout_s", timeout_s, timeout_s > 0, "must be > 0"),
            ("retry_backoff_s", retry_backoff_s, retry_backoff_s >= 0, "must be >= 0"),
            (
                "max_backoff_s",
                max_backoff_s,
                max_backoff_s >= retry_backoff_s,
                "must be >= retry_backoff_s",
            ),
            ("max_attempts", max_attempts, max_attempts >= 1, "must be >= 1"),
            ("every_steps", every_steps, every_steps is None or every_steps >= 1, "must be >= 1"),
        )
        for name, value, ok, rule in checks:
            if not ok:
                raise ConfigError(f"probes.{name}: {rule}, got {value!r}")
        self.probe_fn = probe_fn
        self.family_names = tuple(family_names)
        self.budget = int(budget)
        self.timeout_s = float(timeout_s)
        self.retry_backoff_s = float(retry_backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_attempts = int(max_attempts)
        self.every_steps = every_steps
        self.priority = priority or PriorityWeights()
        n = len(self.family_names)
        self._lock = threading.RLock()  # guards everything below; callbacks may run inline
        self._fail_streak = np.zeros(n, dtype=np.int64)  # int64 [n_families], failed in a row
        self._next_ok = np.zeros(n, dtype=np.float64)  # float64 [n_f], monotonic time eligible
        self._in_flight = np.zeros(n, dtype=bool)  # bool [n_families], a call not yet returned
        self._calls: dict[int, _Call] = {}
        self._next_id = 0
        self._inbox: list[tuple[int, int, float, int, bool, str, int, float]] = []
        self._snapshot: ProbeSnapshot | None = None
        self._last_round_step: int | None = None
        self._stopped = False
        self._counters = dict.fromkeys(_COUNTERS, 0)
        self._executor: ProbeExecutor = executor or ThreadProbeExecutor(max_workers)
        self._aps: Any = None  # apscheduler BackgroundScheduler while started

    # ------------------------------------------------------------------ rounds
    def maybe_run(self, snapshot: ProbeSnapshot) -> IntArray | None:
        """Every-N-steps mode: start a round if ``every_steps`` have passed since the last."""
        if self.every_steps is None:
            raise ConfigError("probes.every_steps: not set; use start() for wall-clock rounds")
        last = self._last_round_step
        if last is not None and snapshot.step - last < self.every_steps:
            return None
        return self.run_round(snapshot)

    def run_round(self, snapshot: ProbeSnapshot) -> IntArray:
        """Start one round now, without waiting for it; returns the families submitted in
        priority order."""
        n = len(self.family_names)
        snapshot.validate(n)
        self._reap()
        now = time.monotonic()
        with self._lock:
            if self._stopped:
                return np.zeros(0, dtype=np.int64)
            self._last_round_step = int(snapshot.step)
            self._counters["rounds"] += 1
            ready = self._next_ok <= now
            if snapshot.allowed is not None:
                ready &= np.asarray(snapshot.allowed, dtype=bool)
            eligible = ready & ~self._in_flight
            self._still_hung(ready, now)
            score = priority_scores(snapshot, self.priority)
            retry = (self._fail_streak > 0) & (self._fail_streak < self.max_attempts)
            key = score + retry * (float(np.ptp(score)) + 1.0)  # pending retries go first
            chosen = np.flatnonzero(eligible)
            if chosen.shape[0] > self.budget:
                top = np.argpartition(-key[chosen], self.budget - 1)[: self.budget]
                chosen = chosen[top]
            chosen = chosen[np.lexsort((chosen, -key[chosen]))]
            tiers = np.asarray(snapshot.tiers, dtype=np.int64)[chosen]
            self._in_flight[chosen] = True
            ids = []
            for f, t in zip(chosen.tolist(), tiers.tolist(), strict=True):
                self._calls[self._next_id] = _Call(f, t, int(snapshot.step), now)
                ids.append(self._next_id)
                self._next_id += 1
        for call_id in ids:
            self._submit(call_id)
        return chosen

    def _still_hung(self, ready: BoolArray, now: float) -> None:
        """A family whose abandoned call has still not returned fails again each round it
        would be probed (lock held): it is not probed twice at once, so without this a
        hung verifier would count one failure however long it hangs, and its breaker
        would never open."""
        for call in self._calls.values():
            if call.abandoned and ready[call.family]:
                self._counters["timed_out"] += 1
                hung = now - (call.started if call.started is not None else call.submitted)
                self._post(call, None, f"timeout: still no result after {hung:.3g}s", now)

    def _submit(self, call_id: int) -> None:
        call = self._calls[call_id]
        try:
            future = self._executor.submit(
                self.probe_fn,
                self.family_names[call.family],
                call.tier,
                lambda: self._mark_started(call_id),
            )
        except RuntimeError:  # the pool was shut down by stop() meanwhile
            with self._lock:
                self._calls.pop(call_id, None)
                self._release(call)
            return
        with self._lock:
            call.future = future
            self._counters["submitted"] += 1
        future.add_done_callback(lambda fut: self._on_done(call_id, fut))

    def _mark_started(self, call_id: int) -> None:
        with self._lock:
            call = self._calls.get(call_id)
            if call is not None:
                call.started = time.monotonic()

    def _on_done(self, call_id: int, future: Future[Any]) -> None:
        now = time.monotonic()
        with self._lock:
            call = self._calls.pop(call_id, None)
            if call is None:
                return
            self._release(call)
            if future.cancelled():
                self._counters["skipped"] += 1
                return
            if call.abandoned:
                self._counters["late"] += 1
                return
            started = call.started if call.started is not None else call.submitted
            elapsed = now - started
            exc = future.exception()
            if elapsed > self.timeout_s:  # finished late, before _reap noticed
                self._counters["timed_out"] += 1
                self._post(call, None, f"timeout: ran {elapsed:.3g}s > {self.timeout_s:g}s", now)
            elif exc is not None:
                self._post(call, None, f"{type(exc).__name__}: {exc}", now)
            else:
                try:
                    self._post(call, _parse(future.result()), "", now)
                except (TypeError, ValueError) as bad:
                    self._post(call, None, f"bad return value: {bad}", now)

    def _release(self, call: _Call) -> None:
        """The call no longer occupies its family; lock held."""
        self._in_flight[call.family] = False

    def _post(self, call: _Call, value: tuple[float, int] | None, error: str, now: float) -> None:
        """Put one result in the inbox and update the family's backoff (lock held)."""
        f = call.family
        elapsed = now - (call.started if call.started is not None else call.submitted)
        if value is not None:
            self._fail_streak[f] = 0
            self._next_ok[f] = 0.0
            self._counters["succeeded"] += 1
            score, n = value
        else:
            self._fail_streak[f] += 1
            k = int(self._fail_streak[f])
            wait = min(self.retry_backoff_s * 2.0 ** (k - 1), self.max_backoff_s)
            self._next_ok[f] = now + wait
            self._counters["failed"] += 1
            score, n = math.nan, 0
            log.warning(
                "probe %s tier %d failed (%d in a row, retry in %.3gs): %s",
                self.family_names[f],
                call.tier,
                k,
                wait,
                error,
            )
        row = (f, call.tier, score, n, value is not None, error, call.step, elapsed)
        self._inbox.append(row)

    def _reap(self) -> None:
        """Give up on calls past their deadline (the thread runs on; its result is ignored)."""
        now = time.monotonic()
        with self._lock:
            for call in list(self._calls.values()):
                if call.abandoned or call.future is None:
                    continue
                if call.started is not None and now - call.started > self.timeout_s:
                    call.abandoned = True
                    self._executor.abandon(call.future)
                    self._counters["timed_out"] += 1
                    error = f"timeout: no result after {self.timeout_s:g}s (thread abandoned)"
                    self._post(call, None, error, now)
                elif (
                    call.started is None
                    and now - call.submitted > self.timeout_s
                    and call.future.cancel()  # every worker busy (hung probes): not its fault
                ):
                    log.warning("probe %s skipped: no free worker", self.family_names[call.family])

    # ------------------------------------------------------------------ results
    def drain(self) -> ProbeResults:
        """Everything that arrived since the last call (timeouts included). Never blocks on a
        running probe."""
        self._reap()
        with self._lock:
            rows, self._inbox = self._inbox, []
        if not rows:
            return empty_results()
        f, t, s, n, ok, err, step, el = zip(*rows, strict=True)
        return ProbeResults(
            families=np.array(f, dtype=np.int64),
            tiers=np.array(t, dtype=np.int64),
            scores=np.array(s, dtype=np.float64),
            n=np.array(n, dtype=np.int64),
            ok=np.array(ok, dtype=bool),
            errors=tuple(err),
            step=np.array(step, dtype=np.int64),
            elapsed_s=np.array(el, dtype=np.float64),
        )

    @property
    def counters(self) -> dict[str, int]:
        """rounds, submitted, succeeded, failed, timed_out, skipped, late (after a timeout)."""
        with self._lock:
            return dict(self._counters)

    @property
    def in_flight(self) -> BoolArray:
        """bool [n_families]: a call for the family has not returned yet."""
        with self._lock:
            return self._in_flight.copy()

    def backoff_remaining(self) -> FloatArray:
        """float64 [n_families]: seconds until each family may be probed again (0 = now)."""
        with self._lock:
            return np.maximum(self._next_ok - time.monotonic(), 0.0)

    # ------------------------------------------------------------------ wall clock
    def publish(self, snapshot: ProbeSnapshot) -> None:
        """Hand the latest priority inputs to wall-clock rounds (call between steps)."""
        snapshot.validate(len(self.family_names))
        copy = ProbeSnapshot(
            step=int(snapshot.step),
            tiers=np.array(snapshot.tiers, dtype=np.int64),
            weights=np.array(snapshot.weights, dtype=np.float64),
            last_probe_step=np.array(snapshot.last_probe_step, dtype=np.int64),
            change=np.array(snapshot.change, dtype=np.float64),
            allowed=None if snapshot.allowed is None else np.array(snapshot.allowed, dtype=bool),
        )
        with self._lock:
            self._snapshot = copy

    def start(
        self,
        *,
        interval_s: float | None = None,
        cron: str | Mapping[str, Any] | None = None,
        snapshot: ProbeSnapshot | None = None,
    ) -> None:
        """Run rounds on the wall clock with an APScheduler 3 BackgroundScheduler.

        ``cron`` is a crontab line (``"*/10 * * * *"``) or CronTrigger fields
        (``{"second": "*/30"}``). Rounds use the snapshot last given to :meth:`publish`.
        """
        from apscheduler.schedulers.background import BackgroundScheduler
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        if (interval_s is None) == (cron is None):
            raise ConfigError("probes: give exactly one of interval_s and cron")
        if self._aps is not None or self._stopped:
            raise ConfigError("probes: already started or stopped")
        trigger: Any
        if interval_s is not None:
            if not interval_s > 0:
                raise ConfigError(f"probes.interval_s: must be > 0, got {interval_s!r}")
            trigger = IntervalTrigger(seconds=interval_s, timezone=UTC)
        else:
            try:
                if isinstance(cron, str):
                    trigger = CronTrigger.from_crontab(cron, timezone=UTC)
                else:
                    trigger = CronTrigger(timezone=UTC, **dict(cron or {}))
            except (ValueError, TypeError) as exc:
                raise ConfigError(
                    f"probes.cron: {cron!r} is not a valid cron schedule ({exc}); "
                    "use a crontab line such as '*/10 * * * *' or fields such as "
                    "{'second': '*/30'}"
                ) from None
        if snapshot is not None:
            self.publish(snapshot)
        aps = BackgroundScheduler(
            timezone=UTC,
            executors={"default": {"type": "threadpool", "max_workers": 1}},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        aps.add_job(self._scheduled_round, trigger, id="probe_round", name="probe round")
        aps.start()
        self._aps = aps
        log.info("probe rounds scheduled: %s", trigger)

    @property
    def trigger(self) -> Any:
        """The APScheduler trigger of the wall-clock job, or None."""
        return None if self._aps is None else self._aps.get_job("probe_round").trigger

    def _scheduled_round(self) -> None:
        with self._lock:
            snapshot = self._snapshot
        if snapshot is None:
            log.debug("probe round skipped: no snapshot published yet")
            return
        self.run_round(snapshot)

    # ------------------------------------------------------------------ shutdown
    def stop(self, timeout_s: float = 5.0) -> bool:
        """Stop rounds, cancel queued probes and wait up to ``timeout_s`` for running ones.

        Returns False when a probe thread is still running (a hung probe cannot be killed;
        the thread ends when the function returns)."""
        with self._lock:
            self._stopped = True
            aps, self._aps = self._aps, None
        if aps is not None:
            aps.shutdown(wait=True)  # its one job only submits, so this returns at once
        closer = threading.Thread(
            target=self._executor.shutdown,
            kwargs={"wait": True, "cancel_futures": True},
            name="probe-shutdown",
            daemon=True,
        )
        closer.start()
        closer.join(timeout_s)
        if closer.is_alive():
            log.warning("probe runner stopped with probes still running (hung probe functions)")
        return not closer.is_alive()

    def __enter__(self) -> ProbeRunner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _parse(value: Any) -> tuple[float, int]:
    """A probe's return value as (score in [0, 1], n >= 1)."""
    if isinstance(value, tuple) and len(value) != 2:
        raise ValueError(f"expected a score or (score, n), got a tuple of {len(value)}")
    score, n = value if isinstance(value, tuple) else (value, 1)
    # Strict: "0.5", True or n=2.7 is a broken probe function, not a score to round.
    if isinstance(score, bool | str | bytes) or not isinstance(score, numbers.Real):
        raise ValueError(f"score must be a number in [0, 1], got {type(score).__name__}")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    score, n = float(score), int(n)
    if not (math.isfinite(score) and 0.0 <= score <= 1.0):
        raise ValueError(f"score must be a number in [0, 1], got {score!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    return score, n
