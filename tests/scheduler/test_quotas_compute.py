"""Compute-basis quotas, learned costs, cost overruns and sample scarcity in the Scheduler."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from domains import Catalog, VariantPool
from policies import project_quotas_compute
from scheduler import Scheduler, SchedulerConfig


def _two_domains(cost: list[float], compute: bool, **kw: float) -> Catalog:
    cat = Catalog.synthetic(2, 2, 1, **kw)
    return dataclasses.replace(
        cat,
        cost_s=np.repeat(np.asarray(cost, dtype=np.float64), 2),
        domain_compute_basis=np.array([compute, compute]),
    )


def test_compute_quota_projection_holds_compute_shares() -> None:
    dof = np.array([0, 0, 1, 1])
    cost = np.array([1.0, 1.0, 10.0, 10.0])
    lo = hi = np.array([0.5, 0.5])
    p, _ = project_quotas_compute(np.ones(4), dof, lo, hi, np.ones(4), cost, np.array([True, True]))
    compute = np.bincount(dof, p * cost) / (p * cost).sum()
    np.testing.assert_allclose(compute, [0.5, 0.5], atol=1e-9)
    np.testing.assert_allclose(np.bincount(dof, p), [10 / 11, 1 / 11], atol=1e-9)


def test_heavy_domain_cannot_eat_the_compute_budget() -> None:
    cat = _two_domains([1.0, 1.0], compute=True, max_share=0.6)
    sched = Scheduler(cat, "uniform", seed=0)
    spent = np.zeros(2)
    for _ in range(60):
        batch = sched.next_batch(256)
        true_cost = np.where(cat.domain_of_family[batch.family] == 1, 20.0, 1.0)
        sched.report(batch, rewards=np.zeros(256), cost=true_cost)
        spent += np.bincount(cat.domain_of_family[batch.family], weights=true_cost, minlength=2)
    # The scheduler learned that domain 1 costs 20x and held it to its compute quota.
    assert sched.cost[2] == pytest.approx(20.0, rel=0.05)
    share = spent / spent.sum()
    assert share[1] <= 0.6 + 0.03
    kinds = [e.kind for e in sched.drain_events()]
    assert kinds.count("cost_overrun") == 2  # both domain-1 families, once each


def test_sample_basis_ignores_cost() -> None:
    cat = _two_domains([1.0, 20.0], compute=False, max_share=0.6)
    sched = Scheduler(cat, "uniform", config=SchedulerConfig(exploration_floor=0.0))
    np.testing.assert_allclose(sched.weights().domain, [0.5, 0.5])


def test_small_pools_are_not_over_drawn() -> None:
    cat = Catalog.synthetic(1, 4, 1)
    pools = (VariantPool(size=2), *(VariantPool(size=10_000) for _ in range(3)))
    cat = dataclasses.replace(cat, pools=pools)
    config = SchedulerConfig(max_repeats=4, epoch_episodes=10_000)
    sched = Scheduler(cat, "uniform", config=config)
    batch = sched.next_batch(10_000)
    draws = np.bincount(batch.family, minlength=4)
    assert draws[0] <= 4 * 2 * 1.5  # about 8 draws of a 2-variant pool per 10,000 episodes
    assert draws[1:].min() > 3000
