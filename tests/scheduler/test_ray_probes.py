"""Probes as Ray tasks on a local Ray instance: the ProbeRunner's timeouts, retries and the
scheduler's circuit breakers, as with the thread pool."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from domains import Catalog
from scheduler import BreakerConfig, ProbeRunner, Scheduler, SchedulerConfig

ray = pytest.importorskip("ray", reason="needs the ray extra: pip install -e '.[ray]'")
pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


def _settle(runner: ProbeRunner, timeout_s: float = 60.0) -> None:
    """Wait until every submitted probe has a result (a success, failure or timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        c = runner.counters
        if c["succeeded"] + c["failed"] >= c["submitted"]:
            return
        assert time.monotonic() < deadline, c
        time.sleep(0.05)
        runner._reap()


def test_ray_probes_feed_the_curves_and_a_failing_one_opens_its_breaker(local_ray: None) -> None:
    from scheduler import RayProbeExecutor

    cat = Catalog.synthetic(2, 2, 2)
    sched = Scheduler(
        cat, "uniform", config=SchedulerConfig(breakers=BreakerConfig(probe_failures=2))
    )
    broken = cat.family_names[3]

    def probe(family: str, tier: int) -> tuple[float, int]:
        import os

        if family == broken:
            raise RuntimeError("verifier crashed")
        return 0.5, os.getpid() % 7 + 1  # n from the worker: it ran in another process

    executor = RayProbeExecutor(num_cpus=1)
    runner = ProbeRunner(
        probe, cat.family_names, budget=4, every_steps=1, timeout_s=30, retry_backoff_s=0.0,
        executor=executor,
    )  # fmt: skip
    errors: list[str] = []
    try:
        for _ in range(3):
            batch = sched.next_batch(16)
            sched.report(batch, rewards=np.ones(16), success=np.ones(16))
            runner.maybe_run(sched.probe_snapshot())
            _settle(runner)
            results = runner.drain()
            errors += [e for e in results.errors if e]
            sched.apply_probe_results(results)
    finally:
        assert runner.stop(timeout_s=30)
    # the task's own exception, as a thread would raise it; two, then the breaker opened
    assert errors == ["RuntimeError: verifier crashed"] * 2
    healthy = [0, 1, 2]
    assert (sched.curves.count[healthy] > 0).all() and sched.curves.count[3] == 0
    assert sched.breakers.open_mask.tolist() == [False, False, False, True]
    assert sched.weights().family[3] == 0.0
    assert executor.running == 0


def test_a_hung_ray_probe_times_out_is_cancelled_and_backs_off(local_ray: None) -> None:
    from scheduler import RayProbeExecutor

    cat = Catalog.synthetic(1, 2, 1)
    hung = cat.family_names[0]

    def probe(family: str, tier: int) -> float:
        if family == hung:
            time.sleep(120)
        return 0.75

    executor = RayProbeExecutor()
    runner = ProbeRunner(
        probe, cat.family_names, budget=2, timeout_s=3.0, retry_backoff_s=30.0,
        executor=executor,
    )  # fmt: skip
    sched = Scheduler(cat, "uniform")
    started = time.monotonic()
    try:
        runner.run_round(sched.probe_snapshot())
        _settle(runner)
        took = time.monotonic() - started
        results = runner.drain()
        assert took < 60
        by_family = dict(zip(results.families.tolist(), results.errors, strict=True))
        assert by_family[0].startswith("timeout") and by_family[1] == ""
        assert runner.counters["timed_out"] == 1
        assert runner.backoff_remaining()[0] > 20  # the hung family waits out its backoff
        deadline = time.monotonic() + 30
        while executor.running and time.monotonic() < deadline:  # cancelled, not left running
            time.sleep(0.1)
        assert executor.running == 0
        # a new round skips the backing-off family
        assert runner.run_round(sched.probe_snapshot()).tolist() == [1]
        _settle(runner)
    finally:
        assert runner.stop(timeout_s=30)


def test_a_ray_probe_that_failed_once_is_retried_after_its_backoff(
    local_ray: None, tmp_path: Path
) -> None:
    from scheduler import RayProbeExecutor

    cat = Catalog.synthetic(1, 1, 1)
    marker = tmp_path / "failed-once"

    def flaky(family: str, tier: int) -> float:
        if not marker.exists():  # the first call fails, in whichever worker runs it
            marker.write_text("x")
            raise ConnectionError("sandbox not ready")
        return 0.5

    runner = ProbeRunner(
        flaky, cat.family_names, budget=1, timeout_s=30, retry_backoff_s=0.5,
        executor=RayProbeExecutor(),
    )  # fmt: skip
    sched = Scheduler(cat, "uniform")
    try:
        runner.run_round(sched.probe_snapshot())
        _settle(runner)
        first = runner.drain()
        assert not first.ok[0] and "ConnectionError" in first.errors[0]
        assert runner.run_round(sched.probe_snapshot()).size == 0  # backing off
        time.sleep(0.6)
        runner.run_round(sched.probe_snapshot())
        _settle(runner)
        second = runner.drain()
        assert second.ok.tolist() == [True] and second.scores.tolist() == [0.5]
    finally:
        runner.stop(timeout_s=30)
    assert runner.counters["failed"] == 1 and runner.counters["succeeded"] == 1
