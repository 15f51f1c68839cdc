"""RunRecorder: writes a run to the store and the tracker, step by step, and resumes it.

The scheduler knows nothing of either: the recorder is one of its listeners
(scheduler/_listeners.py). ``open`` adds it; from then on every report and probe the
scheduler applies (``report``, ``probe_round``, ``apply_probe_results`` of a ProbeRunner)
reaches it as a frozen copy, and a step is written when the next one begins
(``next_batch``) or at ``close``, when all its reports and probes are in. Store rows are
buffered and committed with a checkpoint every ``checkpoint_every`` steps in one
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
from typing import Any

import numpy as np
import numpy.typing as npt

from policies import binomial_interval, policy_params

from .._events import Event
from .._listeners import ProbesRecorded, Reported
from .._scheduler import Scheduler
from .._serialize import dumps_state, loads_state
from ..store import OutcomeRows, ProbePoints, StepWriter, Store, resume_point
from ..tracking import NullTracker, Tracker, TrackingError
from ._config import RecordingConfig
from ._metrics import RunMetrics

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class RunRecorder:
    """Records one scheduler run, as a listener on it (``open`` to ``close``).

    ``state``/``load_state`` cover whatever a checkpoint must hold beyond the scheduler
    (the simulated learner, running totals); ``extra_metrics`` adds values of the trainer's
    own to each step's metrics (read when the step is written)."""

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
        extra_metrics: Callable[[], Mapping[str, float]] | None = None,
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
        self._extra = extra_metrics
        # what the scheduler applied since the last step was written
        self._reported: list[Reported] = []
        self._probed: list[ProbesRecorded] = []
        self._events: list[Event] = []
        self._listening = False

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
        sched.add_listener(self)
        self._listening = True
        return restored

    def _checkpoint(self) -> bytes:
        # A run the tracker started in the background has its id only later.
        self.mlflow_run_id = self.mlflow_run_id or getattr(self.tracker, "run_id", None)
        return dumps_state({"run": self._state(), "mlflow_run_id": self.mlflow_run_id or ""})

    # ------------------------------------------------------------------ listener
    def on_report(self, reported: Reported) -> None:
        self._reported.append(reported)

    def on_probes(self, probes: ProbesRecorded) -> None:
        """Keep the probes of the step, to store with it."""
        if len(probes):
            self._probed.append(probes)

    def before_batch(self, step: int) -> None:
        """A step ends where the next begins: write the one whose reports are all in. The
        events drained and the weights cached here are the next batch's anyway (the same
        on every replica: the others add a ``RecorderMirror``)."""
        sched = self.scheduler
        start = time.perf_counter()
        sched.weights()  # the next batch needs them anyway: not recording overhead
        self._events += sched.drain_events()
        self.overhead_s += time.perf_counter() - start
        if self._reported:
            self._write_step()

    def _write_step(self) -> None:
        """Record the step reported since the last one (its rows, probes, events and the
        next batch's weights; a checkpoint when due), and queue its metrics."""
        sched = self.scheduler
        start = time.perf_counter()
        parts = self._reported
        reported = Reported.concat(parts) if parts else None
        probed, events = self._probed, self._events
        self._reported, self._probed, self._events = [], [], []
        step = (
            reported.step
            if reported is not None
            else max((p.step for p in probed), default=max(sched.step - 1, 0))
        )
        # the next batch's weights, once per reported step (probes or events alone: none)
        weights = None if reported is None else sched.weights().family
        if self._writer is not None:
            store_start = time.perf_counter()
            self._writer.step(
                step,
                self._checkpoint,
                probe_points=_probe_points(probed) if probed else None,
                events=events,
                weights=weights,
                outcomes=_outcome_rows(parts) if parts else None,
            )
            self.store_s += time.perf_counter() - store_start
        tracking_start = time.perf_counter()
        if isinstance(self.tracker, NullTracker) or reported is None:
            self.overhead_s += time.perf_counter() - start
            return
        snap = sched.snapshot()
        metrics = self.metrics.per_step(snap, reported)
        if self._extra is not None:
            metrics.update(self._extra())
        if self.config.detail and step % self.config.domain_every == 0:
            metrics.update(self.metrics.per_domain(snap, reported))
        if self.config.detail and step % self.config.detail_every == 0:
            metrics.update(self.metrics.per_family(snap))
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
        drawn with the object API and the Agg canvas, never pyplot, so any thread may draw.
        Nothing is drawn for a `NullTracker`: it would throw the files away (drawing them
        took 4-6 s of a short run's close)."""
        if self.store is None or isinstance(self.tracker, NullTracker):
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
        """Write the last step, commit the tail with a final checkpoint, log the summary,
        and stop listening."""
        sched = self.scheduler
        if self._listening:
            sched.remove_listener(self)
            self._listening = False
        self._events += sched.drain_events()
        if self._reported or self._probed or self._events:
            self._write_step()
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


def _probe_points(parts: list[ProbesRecorded]) -> ProbePoints:
    families = np.concatenate([p.families for p in parts])
    n = np.concatenate([p.n for p in parts])
    scores = np.concatenate([p.scores for p in parts])
    steps = np.concatenate([np.full(len(p), p.step, dtype=np.int64) for p in parts])
    low, high = binomial_interval(scores * n, n.astype(np.float64))
    return ProbePoints(
        family=families,
        tier=np.concatenate([p.tiers for p in parts]),
        step=steps,
        wall_time=np.full(families.shape[0], time.time()),
        score=scores,
        n=n,
        ci_low=low,
        ci_high=high,
    )


def _outcome_rows(parts: list[Reported]) -> OutcomeRows:
    """The rows of one or more reports (a lagging trainer may report several batches
    before the next is drawn), each row at its own batch's step."""
    rows = [
        OutcomeRows(
            step=np.full(len(out), out.step, dtype=np.int64),
            arm=out.arm,
            family=out.family,
            tier=out.tier,
            variant=out.variant,
            reward=out.reward,
            success=out.success,
            process=out.process,
            cost=out.cost,
            status=out.status,
        )
        for out in parts
    ]
    return rows[0] if len(rows) == 1 else OutcomeRows.concat(rows)
