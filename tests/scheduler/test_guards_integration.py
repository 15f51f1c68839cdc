"""Breakers and retries wired into the Scheduler (the skill model's flags, driven by the
simulated learner, are tested in tests/scheduler/test_skill_integration.py)."""

from __future__ import annotations

import numpy as np

from domains import Catalog
from scheduler import BreakerConfig, Scheduler, SchedulerConfig, Status


def test_environment_faults_are_retried_with_the_same_variant() -> None:
    cat = Catalog.synthetic(2, 3, 2, pool_size=50)
    sched = Scheduler(cat, "uniform", seed=0)
    batch = sched.next_batch(8)
    status = np.array(["ok"] * 6 + ["env_error", "timeout"])
    sched.report(batch, rewards=np.zeros(8), status=status)
    retry = sched.next_batch(8)
    assert retry.attempt is not None
    np.testing.assert_array_equal(retry.arm[:2], batch.arm[6:])
    np.testing.assert_array_equal(retry.variant[:2], batch.variant[6:])
    np.testing.assert_array_equal(retry.attempt, [1, 1, 0, 0, 0, 0, 0, 0])


def test_retries_are_bounded() -> None:
    cat = Catalog.synthetic(1, 1, 1)
    config = SchedulerConfig(max_retries=2, retry_share=1.0)
    sched = Scheduler(cat, "uniform", config=config)
    attempts = []
    for _ in range(5):
        batch = sched.next_batch(1)
        attempts.append(int(batch.attempt[0]))  # type: ignore[index]
        sched.report(batch, rewards=[0.0], status=["timeout"])
    assert attempts == [0, 1, 2, 0, 1]
    assert sched.retries.counters["abandoned"] == 1


def test_a_broken_environment_trips_only_its_breaker() -> None:
    cat = Catalog.synthetic(2, 4, 1)
    config = SchedulerConfig(
        breakers=BreakerConfig(fault_window=16, fault_threshold=4, cooldown_steps=30),
        max_retries=0,
    )
    sched = Scheduler(cat, "uniform", seed=1, config=config)
    broken = 3
    for _ in range(20):
        batch = sched.next_batch(64)
        status = np.where(batch.family == broken, int(Status.ENV_ERROR), int(Status.OK))
        sched.report(batch, rewards=np.ones(64), success=np.ones(64), status=status)
    events = sched.drain_events()
    opened = [e for e in events if e.kind == "breaker_opened"]
    assert [e.family for e in opened] == [cat.family_names[broken]]
    assert sched.weights().family[broken] == 0.0
    later = sched.next_batch(2000)
    assert broken not in later.family
    # Environment faults never counted as model failures.
    assert sched.stats.count[cat.arm_id(broken, 0)] == 0
