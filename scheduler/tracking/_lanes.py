"""The kinds of work the MLflow worker sends, one object each: metric batches, artifacts
and the events file.

A lane holds what waits to be sent and what is in flight, and knows when it is worth a
call (``ready``), what one call sends (``claim``, then ``send``), and what a success or a
permanent failure does to it (``commit``, ``drop``). The tracker's worker takes the first
ready lane in order (metrics, artifacts, events) and does the retries, backoff and
accounting common to all. Every method but ``send`` runs holding the tracker's condition;
``send`` runs outside it, on the worker thread.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .._events import Event
from ._buffer import MetricBuffer, Record
from ._names import sanitize_name
from ._sink import MetricRows, Sink


def json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


class Lane(Protocol):
    kind: str  # named in warnings: "metrics", "artifact", "events"

    def ready(self, now: float, urgent: bool) -> bool: ...

    def claim(self) -> Any: ...

    def send(self, sink: Sink, payload: Any) -> None: ...

    def attempt(self) -> int: ...

    def commit(self) -> None: ...

    def drop(self) -> None: ...

    def mark(self) -> int: ...

    def done_through(self, mark: int) -> bool: ...


class MetricLane:
    """Metric values: buffered (coalesced and thinned past ``max_queue``, see ``_buffer``)
    and sent in ``log_batch`` calls of at most ``batch_size`` values, as soon as that many
    wait or the oldest has waited ``flush_interval_s``. A failed batch is retried whole."""

    kind = "metrics"

    def __init__(self, max_queue: int, batch_size: int, flush_interval_s: float) -> None:
        self.buffer = MetricBuffer(max_queue)
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.inflight: list[Record] = []  # the batch being sent or retried
        self._attempts = 0
        self.sent = 0
        self._clean_names: dict[str, str] = {}  # name -> MLflow-safe name (worker only)

    def add(
        self, step: int, stamp_ms: int, keys: tuple[str, ...], values: npt.NDArray[np.float64]
    ) -> bool:
        """Queue one step's values; True when a full batch waits (wake the worker)."""
        self.buffer.add(step, stamp_ms, keys, values)
        return self.buffer.size >= self.batch_size

    def ready(self, now: float, urgent: bool) -> bool:
        if self.inflight:
            return True
        if not self.buffer.size:
            return False
        oldest_s = (self.buffer.front_timestamp_ms or 0) / 1000.0
        return (
            urgent
            or self.buffer.size >= self.batch_size
            or time.time() - oldest_s >= self.flush_interval_s
        )

    def wait_s(self) -> float | None:
        """Seconds until the oldest value is due, or None when nothing waits."""
        if not self.buffer.size:
            return None
        oldest_s = (self.buffer.front_timestamp_ms or 0) / 1000.0
        return max(0.01, oldest_s + self.flush_interval_s - time.time())

    def claim(self) -> list[Record]:
        if not self.inflight:
            self.inflight = self.buffer.take(self.batch_size)
            self._attempts = 0
        return self.inflight

    def send(self, sink: Sink, payload: list[Record]) -> None:
        names = self._clean_names
        rows: list[MetricRows] = []
        for r in payload:
            keys = tuple([names.get(k) or names.setdefault(k, sanitize_name(k)) for k in r.keys])
            rows.append((keys, r.values, r.timestamp_ms, r.step))
        sink.log_batch(rows)

    def attempt(self) -> int:
        self._attempts += 1
        return self._attempts

    def commit(self) -> None:
        self.sent += sum(len(r) for r in self.inflight)
        self.inflight = []

    def drop(self) -> None:
        self.drop_inflight()

    def drop_inflight(self) -> int:
        lost = sum(len(r) for r in self.inflight)
        self.buffer.dropped += lost
        self.inflight = []
        return lost

    def abandon(self) -> int:
        """Give up on everything unsent (at close); returns how many values."""
        return self.buffer.clear() + self.drop_inflight()

    @property
    def pending(self) -> int:
        return self.buffer.size + sum(len(r) for r in self.inflight)

    def mark(self) -> int:
        return self.buffer.last_seq

    def done_through(self, mark: int) -> bool:
        front = self.buffer.front_seq
        inflight = self.inflight[0].seq if self.inflight else None
        return (front is None or front > mark) and (inflight is None or inflight > mark)


@dataclass
class ArtifactJob:
    seq: int
    artifact_file: str  # destination inside the run, e.g. "figures/weights.png"
    local: Path  # snapshot in the staging directory (file or directory)
    data: bytes | None = None  # written to ``local`` by the worker, then uploaded
    attempts: int = 0


class ArtifactLane:
    """Files snapshotted into the staging directory, uploaded one at a time in order. A
    newer upload to the same destination replaces one still waiting."""

    kind = "artifact"

    def __init__(self, staging: Path) -> None:
        self._staging = staging
        self.jobs: deque[ArtifactJob] = deque()
        self.seq = 0
        self._busy = False  # the front job is being uploaded
        self.sent = 0
        self.dropped = 0

    def stage(self, artifact_file: str) -> tuple[int, Path]:
        """A sequence number and a staging path for a new upload."""
        self.seq += 1
        local = self._staging / "artifacts" / str(self.seq) / artifact_file.strip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        return self.seq, local

    def add(self, seq: int, artifact_file: str, local: Path, data: bytes | None) -> None:
        dest = artifact_file.strip("/")
        busy_front = self.jobs[0] if self._busy and self.jobs else None
        for i, job in enumerate(self.jobs):
            if job.artifact_file == dest and job is not busy_front:
                del self.jobs[i]  # superseded by the newer upload
                self.dropped += 1
                break
        self.jobs.append(ArtifactJob(seq, dest, local, data))

    def ready(self, now: float, urgent: bool) -> bool:
        return bool(self.jobs)

    def claim(self) -> ArtifactJob:
        self._busy = True
        return self.jobs[0]

    def send(self, sink: Sink, payload: ArtifactJob) -> None:
        job = payload
        if job.data is not None and not job.local.exists():
            job.local.write_bytes(job.data)
        parent = str(Path(job.artifact_file).parent)
        if job.local.is_dir():
            sink.log_artifact(str(job.local), job.artifact_file, True)
        else:
            sink.log_artifact(str(job.local), None if parent == "." else parent, False)

    def attempt(self) -> int:
        self.jobs[0].attempts += 1
        return self.jobs[0].attempts

    def commit(self) -> None:
        self.jobs.popleft()
        self._busy = False
        self.sent += 1

    def drop(self) -> None:
        self.jobs.popleft()
        self._busy = False
        self.dropped += 1

    def abandon(self) -> int:
        lost = len(self.jobs)
        self.dropped += lost
        self.jobs.clear()
        return lost

    def mark(self) -> int:
        return self.seq

    def done_through(self, mark: int) -> bool:
        return not self.jobs or self.jobs[0].seq > mark


class EventLane:
    """Events as lines of ``events.jsonl``: appended to a local file and the whole file
    re-uploaded, at most every ``upload_s`` (at once when a flush waits). The running
    count of each kind is the caller's to log as ``events/<kind>``."""

    kind = "events"

    def __init__(self, path: Path, upload_s: float, lock: threading.Condition) -> None:
        self.path = path
        self.upload_s = upload_s
        self._lock = lock  # the tracker's condition: send() takes it to count written lines
        self._lines: list[str] = []  # serialised, not yet written to the local file
        self.counts: dict[str, int] = {}  # running count per kind (a resumed run's too)
        self.total = 0  # lines handed to add
        self.uploaded = 0  # lines contained in the last successful upload
        self._written = 0
        self._last_upload = 0.0
        self._attempts = 0

    @staticmethod
    def lines(events: Sequence[Event]) -> list[str]:
        """Serialise off the lock."""
        return [
            json.dumps(
                {
                    "step": e.step,
                    "kind": e.kind,
                    "family": e.family,
                    "domain": e.domain,
                    "payload": e.payload,
                },
                default=json_default,
            )
            for e in events
        ]

    def add(self, events: Sequence[Event], lines: list[str]) -> dict[int, dict[str, float]]:
        """Queue the lines; returns the running counts to log, by step."""
        counts: dict[int, dict[str, float]] = {}
        for e in events:
            n = self.counts.get(e.kind, 0) + 1
            self.counts[e.kind] = n
            counts.setdefault(int(e.step), {})[f"events/{e.kind}"] = float(n)
        self._lines.extend(lines)
        self.total += len(lines)
        return counts

    def ready(self, now: float, urgent: bool) -> bool:
        unsent = self.total > self.uploaded
        return unsent and (urgent or now - self._last_upload >= self.upload_s)

    def claim(self) -> list[str]:
        lines, self._lines = self._lines, []
        return lines

    def send(self, sink: Sink, payload: list[str]) -> None:
        if payload:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write("".join(f"{line}\n" for line in payload))
            with self._lock:
                self._written += len(payload)
        sink.log_artifact(str(self.path), None, False)

    def attempt(self) -> int:
        self._attempts += 1
        return self._attempts

    def commit(self) -> None:
        self.uploaded = self._written
        self._last_upload = time.monotonic()
        self._attempts = 0

    def drop(self) -> None:
        self.uploaded = self._written  # counted as lost at close
        self._attempts = 0

    @property
    def unsent(self) -> int:
        return self.total - self.uploaded

    def mark(self) -> int:
        return self.total

    def done_through(self, mark: int) -> bool:
        return self.uploaded >= mark
