"""MLflowTracker: batched, asynchronous and resilient logging to MLflow.

The training thread only appends to an in-memory buffer under a lock (no I/O). One
background thread owns the MlflowClient: it opens the run (``_start``), then drains the
buffer into ``log_batch`` calls of at most ``batch_size`` metrics, uploads artifacts, and
keeps ``events.jsonl`` current, each kind of work one lane (``_lanes``). When
MLflow fails, the batch is kept and retried with exponential backoff; the training thread
never waits. What is still unsent when :meth:`MLflowTracker.close` gives up is counted as
dropped, reported in a warning and, if the server answers again, in ``tracking/dropped``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from .._events import Event
from .._redact import mask_secrets
from ._errors import TrackingError
from ._lanes import ArtifactLane, EventLane, Lane, MetricLane, json_default
from ._names import sanitize_name
from ._params import flatten_params, package_versions
from ._protocol import TrackerStats
from ._sink import Sink, make_sink
from ._start import RunStart, is_permanent
from ._uri import is_http, prepare_environment, resolve_tracking_uri

if TYPE_CHECKING:
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

EVENTS_FILE = "events.jsonl"
MAX_METRICS_PER_BATCH = 1000  # mlflow.utils.validation.MAX_METRICS_PER_BATCH
MAX_TAG_VALUE_LENGTH = 8000
_HTTP_START_WAIT_S = 10.0  # how long start() waits for a tracking server to create the run


@dataclass
class _Work:
    lane: Lane
    payload: Any


class MLflowTracker:
    """One scheduler run as one MLflow run, logged from a background thread.

    ``max_queue`` bounds the metric values held in memory, about 16 bytes each plus one
    copy of each name (see ``_buffer`` for what is coalesced or dropped beyond it). MLflow
    on sqlite stores only ~3,000-10,000 values/s, so a fast run builds a backlog that
    close() drains; the default holds a 1,000-step simulate run of 300 families.

    The worker sends as soon as ``batch_size`` values wait, or when the oldest has waited
    ``flush_interval_s``. After a failure it retries after ``retry_backoff_s``, doubling up
    to ``max_retry_s``. ``close`` waits for the backlog while MLflow makes progress: it
    gives up after ``close_timeout_s`` in all, or after ``stall_timeout_s`` without a
    successful call. ``events.jsonl`` is re-uploaded at most every ``events_upload_s`` and
    on every flush. ``sink="process"`` makes the MLflow calls in a helper process, so
    their CPU work does not hold the training thread's GIL; ``"thread"`` makes them on the
    worker thread (see ``_sink``).
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment: str = "curriculum",
        *,
        max_queue: int = 1_000_000,
        batch_size: int = 1000,
        retry_backoff_s: float = 0.5,
        max_retry_s: float = 60.0,
        flush_interval_s: float = 1.0,
        events_upload_s: float = 30.0,
        close_timeout_s: float | None = None,
        stall_timeout_s: float = 60.0,
        sink: str = "process",
        start_wait_s: float | None = None,
    ) -> None:
        if not 1 <= batch_size <= MAX_METRICS_PER_BATCH:
            raise TrackingError(
                f"batch_size: must be between 1 and {MAX_METRICS_PER_BATCH}, got {batch_size}"
            )
        if sink not in ("process", "thread"):
            raise TrackingError(f"sink: must be 'process' or 'thread', got {sink!r}")
        if max_queue < 1:
            raise TrackingError(f"max_queue: must be at least 1, got {max_queue}")
        for name, value in (
            ("retry_backoff_s", retry_backoff_s),
            ("max_retry_s", max_retry_s),
            ("flush_interval_s", flush_interval_s),
            ("stall_timeout_s", stall_timeout_s),
        ):
            if not value > 0:
                raise TrackingError(f"{name}: must be a positive number of seconds, got {value}")
        self.tracking_uri = resolve_tracking_uri(tracking_uri)
        self.experiment = experiment
        self.batch_size = batch_size
        self.retry_backoff_s = retry_backoff_s
        self.max_retry_s = max(max_retry_s, retry_backoff_s)
        self.flush_interval_s = flush_interval_s
        self.events_upload_s = events_upload_s
        self.close_timeout_s = close_timeout_s
        self.stall_timeout_s = stall_timeout_s
        self.sink_kind = sink
        self.start_wait_s = start_wait_s
        self._booted = threading.Event()  # the run exists, or creating it failed for good
        self._boot_error: TrackingError | None = None
        self._detached = False  # start() returned before the run existed

        self._cv = threading.Condition(threading.Lock())
        self._flushing = 0  # threads waiting in flush(): send partial batches at once
        self._skip_backoff = False
        self._abandon = False
        self._names: dict[str, str] = {}  # interned metric names (caller thread only)
        self._closed = False
        self._failed_batches = 0
        self._retries = 0
        self._last_progress = time.monotonic()
        self._last_step = 0
        self._next_try = 0.0
        self._failures = 0

        self._sink: Sink | None = None  # owned by the worker thread
        self._run_id: str | None = None
        self._thread: threading.Thread | None = None
        self._staging = Path(tempfile.mkdtemp(prefix="curriculum-tracking-"))
        # Removed at close, or when an unclosed tracker is collected or the process exits.
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._staging, True)
        events_path = self._staging / "events" / EVENTS_FILE
        events_path.parent.mkdir()
        # the kinds of work, one object each, in the order the worker serves them
        self._metrics = MetricLane(max_queue, batch_size, flush_interval_s)
        self._artifacts = ArtifactLane(self._staging)
        self._events = EventLane(events_path, events_upload_s, self._cv)
        self._lanes: tuple[Lane, ...] = (self._metrics, self._artifacts, self._events)
        self._opener = RunStart(self.tracking_uri, experiment, events_path)

    # Public API ----------------------------------------------------------------------------
    @property
    def run_id(self) -> str | None:
        return self._run_id

    def start(
        self,
        run_name: str,
        *,
        params: Mapping[str, Any],
        tags: Mapping[str, str] | None = None,
        resume_run_id: str | None = None,
    ) -> str | None:
        """Create (or resume) the run and log its params, on the worker thread.

        Waits up to ``start_wait_s`` for it: the run id, or TrackingError if MLflow refused
        or is unreachable (or the run id is unknown); a server that answers with a status
        a retry may fix (busy: a 5xx, a 429) is retried meanwhile. A server that has not
        created the run by then does not hold the training loop: start returns None, the
        run is created in the background (retried with backoff), and values are buffered;
        :attr:`run_id` gives the id once it exists. Package versions are added as
        ``versions.<pkg>``."""
        if self._thread is not None:
            raise TrackingError(f"tracker already started run {self._run_id or '(starting)'}")
        prepare_environment(self.tracking_uri)
        import mlflow  # noqa: F401  (seconds of import here, so start_wait_s is network time)

        flat = flatten_params(params)
        for pkg, version in package_versions().items():
            flat.setdefault(f"versions.{pkg}", version)
        safe_tags = {
            sanitize_name(k): mask_secrets(str(v))[:MAX_TAG_VALUE_LENGTH]
            for k, v in (tags or {}).items()
        }
        self._thread = threading.Thread(
            target=self._run,
            args=(run_name, flat, safe_tags, resume_run_id),
            name="mlflow-tracker",
            daemon=True,
        )
        self._thread.start()
        wait = self.start_wait_s
        if wait is None:
            wait = _HTTP_START_WAIT_S if is_http(self.tracking_uri) else None
        self._booted.wait(wait)
        with self._cv:
            if self._booted.is_set():
                if self._boot_error is not None:
                    raise self._boot_error
                return self._run_id
            self._detached = True
        logger.warning(
            "MLflow at %s has not answered with a run in %.0f s; the run starts in the "
            "background and values are buffered until it does",
            mask_secrets(self.tracking_uri),
            wait or 0.0,
        )
        return None

    def _run(
        self,
        run_name: str,
        flat: dict[str, str],
        safe_tags: dict[str, str],
        resume_run_id: str | None,
    ) -> None:
        """The worker: create the run (retrying once start() has returned), then send."""
        failures = 0
        while True:
            try:
                run_id = self._opener.create(run_name, flat, safe_tags, resume_run_id)
                break
            except TrackingError as exc:
                with self._cv:
                    # A busy server is retried while start() still waits, as after it
                    if (not self._detached and not exc.busy) or self._abandon:
                        self._boot_error = exc
                        self._booted.set()
                        return
                    failures += 1
                    delay = min(self.retry_backoff_s * 2 ** (failures - 1), self.max_retry_s)
                    logger.warning("MLflow run not started yet, retrying in %.1fs: %s", delay, exc)
                    self._cv.wait(delay)
                    if self._abandon:
                        self._boot_error = exc
                        self._booted.set()
                        return
        self._sink = make_sink(self.tracking_uri, run_id, self.sink_kind)
        with self._cv:
            for kind, n in self._opener.event_counts.items():  # a resumed run's counts go on
                self._events.counts[kind] = n + self._events.counts.get(kind, 0)
            self._run_id = run_id
            self._last_progress = time.monotonic()
            self._booted.set()
            self._cv.notify_all()
        logger.info("tracking run %s at %s", run_id, mask_secrets(self.tracking_uri))
        self._work_loop()

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Queue one step's values: O(len(metrics)) in-memory work, no I/O, never blocks on
        MLflow. Raises TrackingError only for a value that is not a number."""
        if not metrics:
            return
        # One copy of each name however many steps hold it: bounded memory for the backlog.
        keys = tuple(map(self._names.setdefault, metrics, metrics))
        try:
            values = np.fromiter(metrics.values(), dtype=np.float64, count=len(keys))
        except (TypeError, ValueError) as exc:
            raise TrackingError(self._bad_value(metrics, step)) from exc
        stamp = time.time_ns() // 1_000_000
        with self._cv:
            if self._closed:
                logger.debug("log_metrics after close ignored (step %d)", step)
                return
            full = self._metrics.add(int(step), stamp, keys, values)
            self._last_step = max(self._last_step, int(step))
            if full:
                self._cv.notify_all()

    def log_events(self, events: Sequence[Event]) -> None:
        """Append to ``events.jsonl`` and log the running count of each kind as
        ``events/<kind>`` at the step of the event."""
        if not events:
            return
        lines = EventLane.lines(events)
        with self._cv:
            if self._closed:
                return
            counts = self._events.add(events, lines)
        for step, values in sorted(counts.items()):
            self.log_metrics(values, step)

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        """Snapshot a file or directory now (so it may change or vanish later) and upload it
        in the background under ``artifact_path``."""
        src = Path(path)
        if not src.exists():
            raise TrackingError(f"log_artifact: {src}: no such file or directory")
        dest = f"{artifact_path.strip('/')}/{src.name}" if artifact_path else src.name
        seq, local = self._stage_path(dest)
        if src.is_dir():
            shutil.copytree(src, local)
        else:
            shutil.copy2(src, local)
        self._enqueue_artifact(seq, dest, local, None)

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        """Serialise now (JSON, or YAML for .yaml/.yml) and upload in the background."""
        if artifact_file.endswith((".yaml", ".yml")):
            text = yaml.safe_dump(json.loads(json.dumps(obj, default=json_default)))
        else:
            text = json.dumps(obj, indent=2, default=json_default)
        self._enqueue_bytes(text.encode(), artifact_file)

    def log_figure(self, figure: Figure, artifact_file: str) -> None:
        """Render to bytes on this thread (matplotlib is not thread-safe); upload later.
        A newer figure for the same file replaces one not yet uploaded."""
        suffix = Path(artifact_file).suffix.lstrip(".").lower() or "png"
        buf = io.BytesIO()
        figure.savefig(buf, format=suffix)
        self._enqueue_bytes(buf.getvalue(), artifact_file)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued before this call is sent (or given up as dropped).

        Returns False on timeout, or at once when no run was started (nothing can be sent).
        A pending retry is tried immediately rather than after its backoff.
        """
        return self._flush(timeout, skip_backoff=True)

    def _flush(self, timeout: float | None, *, skip_backoff: bool) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            target = tuple(lane.mark() for lane in self._lanes)
            if self._done_through(target):
                return True
            if self._thread is None or not self._thread.is_alive():
                return False
            self._flushing += 1
            self._skip_backoff = self._skip_backoff or skip_backoff
            self._cv.notify_all()
            try:
                while not self._done_through(target):
                    if not self._thread.is_alive():
                        return False
                    wait = 0.5
                    if deadline is not None:
                        wait = min(wait, deadline - time.monotonic())
                        if wait <= 0:
                            return False
                    self._cv.wait(wait)
                return True
            finally:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> TrackerStats:
        """Flush (see the class doc for when it gives up), log ``tracking/*`` metrics, end
        the run, and warn about anything lost. Further log calls are ignored."""
        with self._cv:
            if self._closed:
                return self._stats_locked()
            self._closed = True
        timeout = self.close_timeout_s if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._thread is not None and not self._booted.is_set():  # still starting the run
            wait = self.stall_timeout_s
            if deadline is not None:
                wait = min(wait, max(deadline - time.monotonic(), 0.0))
            self._booted.wait(wait)
        drained = self._run_id is None
        first = True
        began = time.monotonic()
        while not drained:
            drained = self._flush(timeout=1.0, skip_backoff=first)
            first = False
            now = time.monotonic()
            with self._cv:
                stalled = now - max(self._last_progress, began) > self.stall_timeout_s
            if stalled or (deadline is not None and now >= deadline):
                break
        worker_done = self._stop_worker()
        with self._cv:
            lost = self._metrics.abandon()
            artifacts_lost = self._artifacts.abandon()
            events_lost = self._events.unsent
            stats = self._stats_locked()
        if stats.dropped or artifacts_lost or events_lost:
            logger.warning(
                "MLflow tracking at %s lost %d metric values (%d thinned from a full backlog or "
                "rejected, %d unsent at close), %d artifacts and %d events (failed batches %d, "
                "retries %d); the run's tracking/dropped metric says so if MLflow is reachable",
                mask_secrets(self.tracking_uri),
                stats.dropped,
                stats.dropped - lost,
                lost,
                artifacts_lost,
                events_lost,
                stats.failed_batches,
                stats.retries,
            )
        if self._run_id is not None:
            self._finish_run(self._run_id, stats)
        if worker_done:
            self._cleanup()
        return stats

    @property
    def stats(self) -> TrackerStats:
        with self._cv:
            return self._stats_locked()

    def __enter__(self) -> MLflowTracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Caller-side helpers -------------------------------------------------------------------
    def _bad_value(self, metrics: Mapping[str, float], step: int) -> str:
        for key, value in metrics.items():
            try:
                float(value)
            except (TypeError, ValueError):
                return f"log_metrics(step={step}): {key}: must be a number, got {value!r}"
        return f"log_metrics(step={step}): values must be numbers"

    def _stage_path(self, artifact_file: str) -> tuple[int, Path]:
        with self._cv:
            return self._artifacts.stage(artifact_file)

    def _enqueue_bytes(self, data: bytes, artifact_file: str) -> None:
        seq, local = self._stage_path(artifact_file)
        self._enqueue_artifact(seq, artifact_file, local, data)

    def _enqueue_artifact(
        self, seq: int, artifact_file: str, local: Path, data: bytes | None
    ) -> None:
        with self._cv:
            if self._closed:
                return
            self._artifacts.add(seq, artifact_file, local, data)
            self._cv.notify_all()

    # Worker --------------------------------------------------------------------------------
    def _work_loop(self) -> None:
        assert self._sink is not None
        try:
            while True:
                with self._cv:
                    work = self._wait_for_work()
                    if work is None:
                        return
                self._do(work)
        finally:
            self._sink.close()

    def _wait_for_work(self) -> _Work | None:
        """Block (holding the condition) until there is something to send; None to stop."""
        while True:
            if self._abandon:
                return None
            now = time.monotonic()
            if self._skip_backoff:
                self._skip_backoff = False
                self._next_try = 0.0
            work = self._pick(now, urgent=self._flushing > 0)
            if work is not None and now >= self._next_try:
                return self._claim(work)
            wait = self.flush_interval_s
            due = self._metrics.wait_s()
            if work is not None:
                wait = min(wait, self._next_try - now)
            elif due is not None:
                wait = min(wait, due)
            self._cv.wait(max(wait, 0.001))

    def _pick(self, now: float, urgent: bool) -> Lane | None:
        """The first lane with work worth a call (metrics, then artifacts, then events)."""
        return next((lane for lane in self._lanes if lane.ready(now, urgent)), None)

    def _claim(self, lane: Lane) -> _Work:
        return _Work(lane, lane.claim())

    def _do(self, work: _Work) -> None:
        error: BaseException | None = None
        try:
            assert self._sink is not None
            work.lane.send(self._sink, work.payload)
        except Exception as exc:
            error = exc
        with self._cv:
            self._settle(work, error)
            self._cv.notify_all()

    def _settle(self, work: _Work, error: BaseException | None) -> None:
        """Account for one finished call (holding the condition)."""
        now = time.monotonic()
        lane = work.lane
        attempts = lane.attempt()
        if attempts > 1:
            self._retries += 1
        if error is None:
            self._failures = 0
            self._next_try = 0.0
            self._last_progress = now
            lane.commit()
            return
        if attempts == 1:
            self._failed_batches += 1
        if is_permanent(error):
            logger.warning(
                "MLflow rejected a %s upload, dropped: %s", lane.kind, mask_secrets(str(error))
            )
            lane.drop()
            return
        self._failures += 1
        delay = min(self.retry_backoff_s * 2 ** (self._failures - 1), self.max_retry_s)
        self._next_try = now + delay
        if self._abandon:  # close() gave up and ended the call; it reports the loss
            return
        logger.warning(
            "MLflow %s upload failed (attempt %d), retrying in %.1fs: %s",
            lane.kind,
            attempts,
            delay,
            mask_secrets(str(error).splitlines()[0])[:300] if str(error) else type(error).__name__,
        )

    def _done_through(self, target: tuple[int, ...]) -> bool:
        return all(lane.done_through(m) for lane, m in zip(self._lanes, target, strict=True))

    def _stop_worker(self) -> bool:
        """Stop the worker; True once it has exited (it may be stuck in a network call)."""
        if self._thread is None:
            return True
        with self._cv:
            self._abandon = True
            self._cv.notify_all()
        self._thread.join(timeout=2.0)
        if self._thread.is_alive() and self._sink is not None:
            self._sink.kill()  # stuck in a call: the helper process goes, the wait fails
            self._thread.join(timeout=5.0)
        return not self._thread.is_alive()

    def _finish_run(self, run_id: str, stats: TrackerStats) -> None:
        """Final counters and run status, with a fresh client (the worker's may be stuck)."""
        from mlflow import MlflowClient
        from mlflow.entities import Metric

        stamp = time.time_ns() // 1_000_000
        final = [Metric(k, v, stamp, self._last_step) for k, v in stats.as_metrics().items()]
        try:
            client = MlflowClient(tracking_uri=self.tracking_uri)
            client.log_batch(run_id, metrics=final)
            client.set_terminated(run_id, status="FINISHED")
        except Exception as exc:
            logger.warning(
                "could not log the final tracking/* metrics of run %s (dropped=%d): %s",
                self._run_id,
                stats.dropped,
                mask_secrets(str(exc)),
            )

    def _stats_locked(self) -> TrackerStats:
        buffer = self._metrics.buffer
        return TrackerStats(
            queued=buffer.queued,
            sent=self._metrics.sent,
            coalesced=buffer.coalesced,
            dropped=buffer.dropped,
            pending=self._metrics.pending,
            failed_batches=self._failed_batches,
            retries=self._retries,
            max_backlog=buffer.max_backlog,
            artifacts_sent=self._artifacts.sent,
            artifacts_dropped=self._artifacts.dropped,
        )
