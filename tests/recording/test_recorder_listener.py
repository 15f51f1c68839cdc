"""RunRecorder listens to the scheduler: whatever the scheduler applies reaches the store
once, however it came (a report, a synchronous probe round, or the asynchronous
ProbeRunner's results through apply_probe_results), with no second call from the trainer."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from domains import Catalog
from scheduler import (
    ProbeResults,
    ProbeRunner,
    ProbesRecorded,
    RecordingConfig,
    Reported,
    RunRecorder,
    Scheduler,
)
from scheduler.store import open_store


def _drain_all(runner: ProbeRunner) -> ProbeResults:
    """Wait for every submitted probe to return, then take them all (deterministic)."""
    deadline = time.monotonic() + 30
    while runner.in_flight.any() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not runner.in_flight.any(), "probes did not return within 30 s"
    return runner.drain()


def test_probes_from_the_async_runner_are_read_back_from_a_sqlite_store(tmp_path: Path) -> None:
    cat = Catalog.synthetic(n_domains=2, families_per_domain=3, n_tiers=2)
    sched = Scheduler(cat, seed=0)
    store = open_store(f"sqlite:///{tmp_path}/runs.db")
    rec = RunRecorder(
        sched, run_name="async", store=store, config=RecordingConfig(checkpoint_every=4)
    )
    rec.open()
    rng = np.random.default_rng(0)

    def probe(family: str, tier: int) -> tuple[float, int]:
        return round(0.1 * cat.family_id(family) + 0.01 * tier, 6), 16

    runner = ProbeRunner(
        probe, cat.family_names, budget=cat.n_families, every_steps=3, timeout_s=10,
        retry_backoff_s=0.0,
    )  # fmt: skip
    applied: list[tuple[int, ProbeResults]] = []
    try:
        for _ in range(15):
            batch = sched.next_batch(16)
            success = (rng.random(len(batch)) < 0.5).astype(float)
            sched.report(batch, rewards=success, success=success)
            runner.maybe_run(sched.probe_snapshot())
            results = _drain_all(runner)
            sched.apply_probe_results(results)  # no call to the recorder: it listens
            applied.append((batch.step, results))
    finally:
        runner.stop()
    rec.close()
    info = store.get_run("async")
    assert info is not None
    rounds = [(step, r) for step, r in applied if len(r)]
    assert len(rounds) >= 4  # every 3 steps, from step 0
    for f in range(cat.n_families):
        want = [
            (step, int(t), float(s))
            for step, r in rounds
            for fam, t, s, ok in zip(r.families, r.tiers, r.scores, r.ok, strict=True)
            if fam == f and ok
        ]
        assert want, cat.family_names[f]
        curve = store.probe_curve(info.run_id, f)
        got = list(zip(curve.step.tolist(), curve.tier.tolist(), curve.score.tolist(), strict=True))
        assert got == want, cat.family_names[f]
        assert (curve.n == 16).all()
        assert ((curve.ci_low <= curve.score) & (curve.score <= curve.ci_high)).all()
    assert store.counts(info.run_id)["outcomes"] == 15 * 16  # each report once
    store.close()


def test_the_store_holds_each_report_once_and_the_run_resumes_from_it(tmp_path: Path) -> None:
    cat = Catalog.synthetic(n_domains=2, families_per_domain=2, n_tiers=2)
    url = f"sqlite:///{tmp_path}/runs.db"
    every = np.arange(cat.n_families)
    half, items = np.full(cat.n_families, 0.5), np.full(cat.n_families, 8)

    def run(steps: int, resume: bool) -> Scheduler:
        sched = Scheduler(cat, seed=3)
        store = open_store(url)
        rec = RunRecorder(sched, run_name="r", store=store, config=RecordingConfig(2))
        rec.open(resume=resume)
        while sched.step < steps:
            batch = sched.next_batch(8)
            sched.report(batch, rewards=np.ones(8), success=np.ones(8))
            if sched.step % 3 == 0:
                sched.record_probes(every, half, n=items)
        rec.close()
        store.close()
        return sched

    first = run(10, resume=False)
    resumed = run(16, resume=True)
    straight = Scheduler(cat, seed=3)
    while straight.step < 16:
        batch = straight.next_batch(8)
        straight.report(batch, rewards=np.ones(8), success=np.ones(8))
        if straight.step % 3 == 0:
            straight.record_probes(every, half, n=items)
    assert first.step == 10
    assert np.array_equal(resumed.stats.count, straight.stats.count)
    with open_store(url) as store:
        info = store.get_run("r")
        assert info is not None
        outcomes = store.outcomes(info.run_id)
        assert sorted(np.unique(outcomes.step).tolist()) == list(range(16))
        assert len(outcomes) == 16 * 8  # every step once: none lost, none twice
        assert store.counts(info.run_id)["probe_points"] == 5 * cat.n_families  # steps 2,5,8,11,14


class Keeper:
    """A listener that keeps what it hears."""

    def __init__(self) -> None:
        self.reports: list[Reported] = []
        self.probes: list[ProbesRecorded] = []
        self.boundaries: list[int] = []

    def on_report(self, reported: Reported) -> None:
        self.reports.append(reported)

    def on_probes(self, probes: ProbesRecorded) -> None:
        self.probes.append(probes)

    def before_batch(self, step: int) -> None:
        self.boundaries.append(step)


def test_a_listener_gets_frozen_copies_of_what_was_applied() -> None:
    cat = Catalog.synthetic(n_domains=1, families_per_domain=3, n_tiers=2)
    sched = Scheduler(cat, seed=0)
    keeper = Keeper()
    sched.add_listener(keeper)
    batch = sched.next_batch(6)
    rewards = np.linspace(0.0, 1.0, 6)
    sched.report(batch, rewards=rewards, success=(rewards > 0.5).astype(float))
    rewards[:] = -1.0  # the caller reuses its buffer: the copy is unchanged
    sched.record_probes([0, 2], [0.25, 0.75], tiers=[1, 0], n=[4, 8])
    sched.next_batch(6)
    (got,) = keeper.reports
    assert got.step == 0 and len(got) == 6
    np.testing.assert_array_equal(got.reward, np.linspace(0.0, 1.0, 6))
    np.testing.assert_array_equal(got.arm, batch.arm)
    np.testing.assert_array_equal(got.family, batch.family)
    with pytest.raises(ValueError, match="read-only"):
        got.reward[0] = 5.0
    (probes,) = keeper.probes
    assert probes.step == 0
    assert probes.families.tolist() == [0, 2] and probes.tiers.tolist() == [1, 0]
    assert probes.n.tolist() == [4, 8]
    assert keeper.boundaries == [0, 1]
    sched.remove_listener(keeper)
    sched.next_batch(6)
    assert keeper.boundaries == [0, 1]


def test_reports_that_lag_behind_the_draws_keep_their_own_steps(tmp_path: Path) -> None:
    """A trainer two batches ahead (a stream with max_lag) reports step 0 and step 1 before
    it draws step 2: both land in one written step, each row at its batch's step."""
    cat = Catalog.synthetic(n_domains=1, families_per_domain=2, n_tiers=2)
    sched = Scheduler(cat, seed=1)
    with open_store(f"sqlite:///{tmp_path}/runs.db") as store:
        rec = RunRecorder(sched, run_name="lag", store=store)
        rec.open()
        first, second = sched.next_batch(4), sched.next_batch(5)
        sched.report(first, rewards=np.ones(4), success=np.ones(4))
        sched.report(second, rewards=np.zeros(5), success=np.zeros(5))
        sched.next_batch(3)
        rec.close()
        info = store.get_run("lag")
        assert info is not None
        rows = store.outcomes(info.run_id)
        assert sorted(rows.step.tolist()) == [0] * 4 + [1] * 5
        assert rows.reward[rows.step == 0].tolist() == [1.0] * 4
        assert rows.reward[rows.step == 1].tolist() == [0.0] * 5
