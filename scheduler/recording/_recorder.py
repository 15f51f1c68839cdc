"""RunRecorder: writes a run to the store and the tracker, step by step, and resumes it.

The scheduler knows nothing of either: the recorder reads its state after each step. Store
rows are buffered and committed with a checkpoint every ``checkpoint_every`` steps in one
transaction (StepWriter), so a crash loses at most the uncommitted tail and a resume starts
from a checkpoint whose rows are all there. Tracker calls only queue values; MLflow is
written from the tracker's background worker.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from policies import binomial_interval, policy_params

from ._batch import Batch
from ._metrics import RunMetrics
from ._probes import ProbeRound
from ._scheduler import Scheduler
from ._serialize import dumps_state, loads_state
from .backends import BatchOutcomes
from .store import OutcomeRows, ProbePoints, StepWriter, Store, resume_point
from .tracking import NullTracker, Tracker, TrackingError

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RecordingConfig:
    checkpoint_every: int = 100  # steps per store commit (rows + checkpoint, one transaction)
    checkpoint_seconds: float | None = None  # ... or seconds since the last, whichever first
    domain_every: int = 1  # steps between per-domain metrics
    detail_every: int = 50  # steps between per-family metrics
    detail: bool = True  # log per-domain and per-family metrics at all
    figures_every: int = 500  # steps between figure artifacts (from the store; 0: at close only)
    background_commits: bool = False  # store transactions on a writer thread (GIL: slower here)


class RunRecorder:
    """Records one scheduler run. ``state``/``load_state`` cover whatever a checkpoint must
    hold beyond the scheduler (the simulated learner, running totals)."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        run_name: str,
        store: Store | None = None,
        tracker: Tracker | None = None,
        config: RecordingConfig | None = None,
        state: Callable[[], dict[str, Any]] | None = None,
        load_state: Callable[[dict[str, Any]], None] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.run_name = run_name
        self.store = store
        self.tracker: Tracker = tracker or NullTracker()
        self.config = config or RecordingConfig()
        self._state = state or scheduler.state_dict
        self._load_state = load_state or scheduler.load_state_dict
        self._params = dict(params or {})
        self.metrics = RunMetrics(scheduler.catalog)
        self.run_id: int | None = None
        self.mlflow_run_id: str | None = None
        self._writer: StepWriter | None = None
        self.overhead_s = 0.0  # time spent in the recorder on the training thread
        self.store_s = 0.0  # of which buffering rows and committing (with the checkpoint)
        self.tracking_s = 0.0  # of which building metric dicts and queueing them
        self._figure_thread: threading.Thread | None = None
        # step of the latest figure round, and whether the store held every step by then
        self._figures_of: tuple[int, bool] | None = None
        self.tracking_error: str | None = None  # why tracking was dropped at open, if it was

    # ------------------------------------------------------------------ lifecycle
    def open(self, *, resume: bool = False) -> int | None:
        """Create the run (or resume it from its latest checkpoint). Returns the restored
        step, or None for a fresh run."""
        sched = self.scheduler
        restored: int | None = None
        resume_mlflow: str | None = None
        if self.store is not None:
            info = self.store.open_run(
                self.run_name,
                seed=sched.seed,
                config={"params": self._params, "policy": policy_params(sched.policy)},
                catalog=sched.catalog,
                resume=resume,
            )
            self.run_id = info.run_id
            point = (
                resume_point(self.store, info.run_id, self.run_name, loads_state)
                if resume
                else None
            )
            if point is not None:
                step, state = point
                self._load_state(state["run"])
                resume_mlflow = state.get("mlflow_run_id") or None
                self.store.truncate_after(info.run_id, step)
                restored = step
            self._writer = StepWriter(
                self.store,
                info.run_id,
                every_steps=self.config.checkpoint_every,
                every_seconds=self.config.checkpoint_seconds,
                background=self.config.background_commits,
            )
        catalog = sched.catalog
        identity = {
            "catalog.fingerprint": catalog.fingerprint,
            "catalog.families": catalog.n_families,
            "catalog.arms": catalog.n_arms,
            **{f"manifest.{path}": digest for path, digest in catalog.source_hashes.items()},
        }
        try:
            self.mlflow_run_id = self.tracker.start(
                self.run_name,
                params={
                    **self._params,
                    **identity,
                    "policy": policy_params(sched.policy),
                    "seed": sched.seed,
                },
                tags={"catalog": sched.catalog.fingerprint[:16]},
                resume_run_id=resume_mlflow,
            )
        except TrackingError as exc:  # training goes on; the store still has everything
            log.warning("MLflow unavailable, continuing without tracking: %s", exc)
            self.tracking_error = str(exc)
            self.tracker = NullTracker()
            self.mlflow_run_id = None
        if restored is None:
            for path in sched.catalog.sources:
                self.tracker.log_artifact(path, "manifests")
        return restored

    def _checkpoint(self) -> bytes:
        # A run the tracker started in the background has its id only later.
        self.mlflow_run_id = self.mlflow_run_id or getattr(self.tracker, "run_id", None)
        return dumps_state({"run": self._state(), "mlflow_run_id": self.mlflow_run_id or ""})

    def step(self, batch: Batch, outcomes: BatchOutcomes, probes: ProbeRound | None = None,
             extra: Mapping[str, float] | None = None) -> None:  # fmt: skip
        """Record one reported step (after ``scheduler.report`` and any probes)."""
        sched = self.scheduler
        sched.weights()  # the next batch needs them anyway: not recording overhead
        start = time.perf_counter()
        step = batch.step
        events = sched.drain_events()
        if self._writer is not None:
            store_start = time.perf_counter()
            self._writer.step(
                step,
                self._checkpoint,
                probe_points=None if probes is None else self._probe_points(step, probes),
                events=events,
                weights=sched.weights().family,
                outcomes=_outcome_rows(batch, outcomes),
            )
            self.store_s += time.perf_counter() - store_start
        tracking_start = time.perf_counter()
        if isinstance(self.tracker, NullTracker):
            self.overhead_s += time.perf_counter() - start
            return
        metrics = self.metrics.per_step(sched, batch, outcomes.status, outcomes.success)
        if extra:
            metrics.update(extra)
        if self.config.detail and step % self.config.domain_every == 0:
            metrics.update(self.metrics.per_domain(sched, batch))
        if self.config.detail and step % self.config.detail_every == 0:
            metrics.update(self.metrics.per_family(sched))
        self.tracker.log_metrics(metrics, step)
        if events:
            self.tracker.log_events(events)
        self.tracking_s += time.perf_counter() - tracking_start
        every = self.config.figures_every
        if self.config.detail and every and step % every == every - 1:
            complete = self._writer is None or (
                self._writer.pending_steps == 0 and not self.config.background_commits
            )
            if self._figures_in_background():
                self._figures_of = (step, complete)
        self.overhead_s += time.perf_counter() - start

    def _figures_in_background(self) -> bool:
        """Draw the figures on a worker thread (one at a time; a round is skipped while the
        previous one is still drawing), so the training thread never waits on matplotlib.
        Returns whether a round started."""
        if self._figure_thread is not None and self._figure_thread.is_alive():
            return False
        self._figure_thread = threading.Thread(
            target=self._log_figures_safely, name="curriculum-figures", daemon=True
        )
        self._figure_thread.start()
        return True

    def _log_figures_safely(self) -> None:
        try:
            self.log_figures()
        except Exception:  # a figure must never take the run down
            log.exception("drawing the figures failed")

    def log_figures(self) -> None:
        """Probe curves per domain, weights over time, tier timeline and events, drawn from
        what the store has committed, as PNG artifacts under ``figures/`` (matplotlib is an
        optional dependency: without it this logs a notice and does nothing). Figures are
        drawn with the object API and the Agg canvas, never pyplot, so any thread may draw."""
        if self.store is None:
            return
        try:
            from ._figures import (
                events_figure,
                probe_curves_figure,
                tier_timeline_figure,
                weights_heatmap_figure,
            )
            from ._history import RunHistory
        except ImportError:  # pragma: no cover - matplotlib missing
            log.info("matplotlib is not installed: no figures")
            return
        history = RunHistory.from_open_store(
            self.store, self.run_name, catalog=self.scheduler.catalog
        )
        if len(history.probe_step) == 0:
            return
        for name, draw in (
            ("probe_curves", probe_curves_figure),
            ("weights_heatmap", weights_heatmap_figure),
            ("tier_timeline", tier_timeline_figure),
            ("events", events_figure),
        ):
            figure = draw(history)
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, f"{name}.png")
                figure.savefig(path, dpi=100)
                self.tracker.log_artifact(path, "figures")  # copied now, uploaded later

    def close(self, summary: Mapping[str, Any] | None = None) -> None:
        """Commit the tail with a final checkpoint, log the summary, close the tracker run."""
        sched = self.scheduler
        final = self._checkpoint()
        if self._writer is not None:
            self._writer.commit(sched.step - 1, final)
            self._writer.close()
        if self._figure_thread is not None:
            self._figure_thread.join()
        # A round drawn at the last step from a store that held every step is the final one.
        drawn = self._figures_of == (sched.step - 1, True)
        if self.config.detail and not drawn:
            self._log_figures_safely()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "final_state.npz")
            with open(path, "wb") as fh:
                fh.write(final)
            self.tracker.log_artifact(path, "state")  # the tracker snapshots it now
        if summary:
            self.tracker.log_dict(dict(summary), "summary.json")
        self.tracker.log_dict(
            {"policy": policy_params(sched.policy), "weights": sched.weights().family.tolist()},
            "final_weights.json",
        )

    def _probe_points(self, step: int, probes: ProbeRound) -> ProbePoints:
        passed = probes.scores * probes.n
        low, high = binomial_interval(passed, probes.n.astype(np.float64))
        return ProbePoints(
            family=probes.families,
            tier=probes.tiers,
            step=np.full(probes.families.shape[0], step, dtype=np.int64),
            wall_time=np.full(probes.families.shape[0], time.time()),
            score=probes.scores,
            n=probes.n,
            ci_low=low,
            ci_high=high,
        )


def _outcome_rows(batch: Batch, out: BatchOutcomes) -> OutcomeRows:
    return OutcomeRows(
        step=np.full(len(batch), batch.step, dtype=np.int64),
        arm=batch.arm,
        family=batch.family,
        tier=batch.tier,
        variant=batch.variant,
        reward=out.reward,
        success=out.success,
        process=out.process,
        cost=out.cost,
        status=out.status,
    )
