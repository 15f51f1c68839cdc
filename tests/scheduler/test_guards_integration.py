"""Breakers, retries and detectors wired into the Scheduler, driven by the simulated learner."""

from __future__ import annotations

import numpy as np
import pytest

from domains import Catalog
from scheduler import BreakerConfig, Scheduler, SchedulerConfig, Status
from scheduler.backends import FamilyKind, SimulatedLearner, SimulatedLearnerConfig


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


def _run_with_learner(config: SimulatedLearnerConfig, steps: int, seed: int = 0):
    cat = Catalog.synthetic(4, 10, 3)
    learner = SimulatedLearner(cat, seed=seed, config=config)
    # the legacy detectors' quarantine and hacking checks (the skill model's flags are
    # tested in tests/scheduler/test_skill_integration.py)
    sched = Scheduler(cat, "learning_progress", seed=seed, config=SchedulerConfig(skill=None))
    families = np.arange(cat.n_families)
    for step in range(steps):
        batch = sched.next_batch(128)
        out = learner.run(batch)
        sched.report(batch, out)
        if step % 10 == 0:
            tiers = sched.tiers.tier.copy()
            scores, n = learner.probe_many(families, tiers)
            sched.record_probes(families, scores, tiers=tiers, n=n)
    return cat, learner, sched


@pytest.mark.slow
def test_noise_and_impossible_families_are_quarantined_learners_are_not() -> None:
    config = SimulatedLearnerConfig(share_noise=0.1, share_impossible=0.1, share_mastered=0.0)
    _, learner, sched = _run_with_learner(config, 400)
    kind = learner.family_kind
    quarantined = sched.detectors.quarantined
    unlearnable = np.isin(kind, [FamilyKind.NOISE, FamilyKind.IMPOSSIBLE])
    assert quarantined[unlearnable].mean() >= 0.75  # noise (probe at 0.5) and impossible
    # A family still learning is never quarantined.
    learning = (kind == FamilyKind.LEARNABLE) & (learner.true_score() < 0.9)
    assert not quarantined[learning].any()
    assert any(e.kind == "quarantined" for e in sched.drain_events())


@pytest.mark.slow
def test_reward_hacking_is_flagged_on_a_gameable_family() -> None:
    config = SimulatedLearnerConfig(share_hackable=0.2, share_mastered=0.0, hack_rate=0.02)
    _, learner, sched = _run_with_learner(config, 600, seed=2)
    hackable = learner.family_kind == FamilyKind.HACKABLE
    flagged = sched.detectors.hacking
    assert flagged[hackable].any()
    assert not flagged[~hackable].any()
    assert (sched.family_factor[flagged] < 1.0).all()
