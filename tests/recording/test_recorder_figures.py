"""The recorder draws the figures once per round: a round at the last step, from a store
that held every step, is the final one, and close() does not draw it again."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from domains import Catalog
from scheduler import RecordingConfig, RunRecorder, Scheduler
from scheduler.backends import SimulatedLearner
from scheduler.store import open_store
from scheduler.tracking import NullTracker

pytest.importorskip("matplotlib")


class CountingTracker:
    """Tracks nothing, but is not the NullTracker the recorder skips its metrics for."""

    def __init__(self) -> None:
        self.null = NullTracker()
        self.values = 0

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.values += len(metrics)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.null, name)


@pytest.mark.parametrize(("steps", "rounds"), [(20, 2), (25, 3)])
def test_close_draws_only_what_the_last_round_missed(
    steps: int, rounds: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = Catalog.synthetic(n_domains=2, families_per_domain=2, n_tiers=2)
    sched = Scheduler(catalog, seed=0)
    learner = SimulatedLearner(catalog, seed=0)
    store = open_store(f"sqlite:///{tmp_path}/runs.db")
    config = RecordingConfig(checkpoint_every=10, figures_every=10)
    tracker = CountingTracker()
    rec = RunRecorder(sched, run_name="f", store=store, tracker=tracker, config=config)
    drawn: list[int] = []
    monkeypatch.setattr(rec, "log_figures", lambda: drawn.append(sched.step))
    rec.open()
    for _ in range(steps):
        batch = sched.next_batch(16)  # the recorder writes the step before (and its figures)
        if rec._figure_thread is not None:
            rec._figure_thread.join()  # one round at a time, deterministically
        out = learner.run(batch)
        sched.report(batch, out)
        if sched.step % 5 == 0:
            sched.probe_round(learner.probe_many)
    rec.close()
    store.close()
    # 20 steps: rounds at steps 9 and 19 (the last, all committed): close adds none.
    # 25 steps: rounds at 9 and 19, and close draws the 5 steps after them.
    assert len(drawn) == rounds, drawn


def test_nothing_is_drawn_for_a_null_tracker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run without tracking keeps no artifact, so close() draws no figure for it."""
    from scheduler.recording import _history

    catalog = Catalog.synthetic(n_domains=2, families_per_domain=2, n_tiers=2)
    learner = SimulatedLearner(catalog, seed=0)
    store = open_store(f"sqlite:///{tmp_path}/runs.db")
    read: list[str] = []

    def history(*args: Any, **kwargs: Any) -> None:
        read.append("history")
        raise AssertionError("the figures' history was read")

    monkeypatch.setattr(_history.RunHistory, "from_open_store", history)
    for name, tracker, expected in (
        ("null", NullTracker(), []),
        ("counting", CountingTracker(), ["history"]),
    ):
        sched = Scheduler(catalog, seed=0)
        rec = RunRecorder(sched, run_name=name, store=store, tracker=tracker,
                          config=RecordingConfig(checkpoint_every=10))  # fmt: skip
        rec.open()
        for _ in range(3):
            batch = sched.next_batch(8)
            sched.report(batch, learner.run(batch))
        sched.probe_round(learner.probe_many)
        read.clear()
        rec.close()  # a failing figure is logged, never raised
        assert read == expected
    store.close()
