"""A ProbeRunner feeding a real Scheduler: wall-clock and every-N-steps, failures isolated."""

from __future__ import annotations

import threading
import time

import numpy as np

from domains import Catalog
from scheduler import BreakerConfig, ProbeResults, ProbeRunner, Scheduler, SchedulerConfig


def _train(sched: Scheduler, steps: int) -> None:
    for _ in range(steps):
        batch = sched.next_batch(32)
        sched.report(batch, rewards=np.ones(32), success=np.ones(32))


def test_every_n_steps_probes_feed_curves_and_breakers() -> None:
    cat = Catalog.synthetic(2, 3, 2)
    config = SchedulerConfig(breakers=BreakerConfig(probe_failures=2))
    sched = Scheduler(cat, "uniform", config=config)
    broken = cat.family_names[4]

    def probe(family: str, tier: int) -> tuple[float, int]:
        if family == broken:
            raise RuntimeError("verifier crashed")
        return 0.5, 16

    runner = ProbeRunner(
        probe, cat.family_names, budget=6, every_steps=2, timeout_s=5, retry_backoff_s=0.0
    )
    try:
        for _ in range(20):
            _train(sched, 1)
            runner.maybe_run(sched.probe_snapshot())
            time.sleep(0.02)
            sched.apply_probe_results(runner.drain())
    finally:
        runner.stop()
    sched.apply_probe_results(runner.drain())
    healthy = np.array([i for i in range(cat.n_families) if i != 4])
    assert (sched.curves.count[healthy] > 0).all()
    assert sched.curves.count[4] == 0
    assert sched.breakers.open_mask[4] and sched.breakers.open_mask.sum() == 1
    assert any(e.kind == "breaker_opened" and e.family == broken for e in sched.drain_events())
    assert sched.weights().family[4] == 0.0


def test_wall_clock_probes_are_applied_between_steps() -> None:
    cat = Catalog.synthetic(1, 4, 1)
    sched = Scheduler(cat, "uniform")
    calls = threading.Event()

    def probe(family: str, tier: int) -> float:
        calls.set()
        return 0.25

    runner = ProbeRunner(probe, cat.family_names, budget=4, timeout_s=5)
    before = set(threading.enumerate())
    runner.start(interval_s=0.1, snapshot=sched.probe_snapshot())
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (sched.curves.count == 0).any():
            _train(sched, 1)
            runner.publish(sched.probe_snapshot())
            sched.apply_probe_results(runner.drain())
            time.sleep(0.05)
    finally:
        assert runner.stop()
    assert calls.is_set()
    assert (sched.curves.count > 0).all()
    np.testing.assert_allclose(sched.curves.latest, 0.25)
    time.sleep(0.1)
    assert set(threading.enumerate()) <= before | {threading.current_thread()}


def test_successful_probes_never_count_against_the_breakers() -> None:
    """Probes that succeed keep every breaker closed, however many rounds, at whatever
    tier; a failed one counts."""
    cat = Catalog.synthetic(1, 3, 3)
    sched = Scheduler(
        cat, "uniform", config=SchedulerConfig(breakers=BreakerConfig(probe_failures=2))
    )
    fams = np.array([0, 1, 2, 0])

    def results(ok: list[bool]) -> ProbeResults:
        good = np.array(ok)
        return ProbeResults(
            families=fams, tiers=np.array([0, 0, 0, 1]), scores=np.where(good, 0.5, np.nan),
            n=np.where(good, 16, 0), ok=good, errors=tuple("" if g else "boom" for g in ok),
            step=np.zeros(4, dtype=np.int64), elapsed_s=np.zeros(4),
        )  # fmt: skip

    for _ in range(4):
        sched.apply_probe_results(results([True] * 4))
    assert not sched.breakers.open_mask.any() and (sched.breakers.probe_streak == 0).all()
    for _ in range(2):
        sched.apply_probe_results(results([True, False, True, False]))
    assert sched.breakers.open_mask.tolist() == [False, True, False]
