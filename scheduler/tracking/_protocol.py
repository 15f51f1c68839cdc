"""The Tracker interface the scheduler talks to, its statistics, and the null tracker.

Metric names follow one scheme that the MLflow UI groups by prefix ("/" separates groups):
``probe/<domain>/<family>``, ``weight/<domain>``, ``tier/<family>``, ... as chosen by the
scheduler; the tracker itself adds ``events/<kind>`` (cumulative count of events of that
kind) and, at close, ``tracking/<counter>`` for the counters of :class:`TrackerStats`.
In a distributed run only rank 0 gets a real tracker; every other rank gets NullTracker.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._events import Event

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class TrackerStats:
    """Counters of metric values; ``queued == sent + coalesced + dropped + pending``."""

    queued: int = 0  # values handed to log_metrics (and event counts)
    sent: int = 0  # values MLflow accepted
    coalesced: int = 0  # values superseded by a newer value of the same key and step
    dropped: int = 0  # values lost: thinned on overflow, rejected, or unsent at close
    pending: int = 0  # values still buffered or in flight
    failed_batches: int = 0  # MLflow calls (metric batches or artifacts) that failed at least once
    retries: int = 0  # repeated attempts of failed calls
    max_backlog: int = 0  # most values buffered at once
    artifacts_sent: int = 0
    artifacts_dropped: int = 0  # artifact uploads superseded by a newer one, or lost

    def as_metrics(self) -> dict[str, float]:
        """The final ``tracking/<counter>`` metrics logged at close."""
        names = ("sent", "coalesced", "dropped", "failed_batches", "retries", "max_backlog")
        return {f"tracking/{n}": float(getattr(self, n)) for n in names}


@runtime_checkable
class Tracker(Protocol):
    """Where the scheduler sends params, metrics, events and artifacts of one run."""

    def start(
        self,
        run_name: str,
        *,
        params: Mapping[str, Any],
        tags: Mapping[str, str] | None = None,
        resume_run_id: str | None = None,
    ) -> str | None:
        """Open (or resume) the run; returns its id, or None when nothing is tracked."""
        ...

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Queue values for one step. Never blocks, never raises on server trouble."""
        ...

    def log_events(self, events: Sequence[Event]) -> None:
        """Append events to the run's ``events.jsonl`` and count them in ``events/<kind>``."""
        ...

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        """Upload a file or directory (a snapshot taken now) in the background."""
        ...

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        """Upload ``obj`` as JSON or YAML (by the file's suffix) in the background."""
        ...

    def log_figure(self, figure: Figure, artifact_file: str) -> None:
        """Render on the caller thread (matplotlib is not thread-safe), upload in the background."""
        ...

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is sent; True if it all was."""
        ...

    def close(self) -> TrackerStats:
        """Flush, log the ``tracking/*`` metrics, end the run; report anything lost."""
        ...

    @property
    def stats(self) -> TrackerStats: ...


class NullTracker:
    """A tracker that records nothing: for ranks other than 0 and for runs without MLflow."""

    def start(
        self,
        run_name: str,
        *,
        params: Mapping[str, Any],
        tags: Mapping[str, str] | None = None,
        resume_run_id: str | None = None,
    ) -> str | None:
        return None

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        return None

    def log_events(self, events: Sequence[Event]) -> None:
        return None

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        return None

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        return None

    def log_figure(self, figure: Figure, artifact_file: str) -> None:
        return None

    def flush(self, timeout: float | None = None) -> bool:
        return True

    def close(self) -> TrackerStats:
        return TrackerStats()

    @property
    def stats(self) -> TrackerStats:
        return TrackerStats()
