"""Scheduler.demand: the expected draws of the next steps, computed without drawing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from domains import Catalog, load_catalog
from scheduler import ConfigError, Scheduler

ROOT = Path(__file__).resolve().parents[2]


def _trained(catalog: Catalog, *, steps: int = 60, n: int = 64) -> Scheduler:
    """A scheduler some way into a run: tiers moved, weights uneven, retries queued."""
    sched = Scheduler(catalog, seed=3)
    rng = np.random.default_rng(0)
    easy = rng.random(catalog.n_families)  # each family's skill
    for _ in range(steps):
        batch = sched.next_batch(n)
        p = np.clip(easy[batch.family] - 0.25 * batch.tier + 0.3, 0, 1)
        success = (rng.random(len(batch)) < p).astype(float)
        status = np.where(rng.random(len(batch)) < 0.03, "env_error", "ok")
        sched.report(batch, rewards=success, success=success, status=status)
    fam = np.arange(catalog.n_families)
    scores = np.clip(easy - 0.25 * sched.tiers.tier + 0.3, 0, 1)
    sched.record_probes(fam, scores, tiers=sched.tiers.tier.copy(), n=np.full(fam.size, 32))
    return sched


def _empirical(sched: Scheduler, steps: int, n: int) -> np.ndarray:
    """Arm counts of ``steps`` real draws, on a copy (no reports in between)."""
    twin = copy.deepcopy(sched)
    counts = np.zeros(sched.catalog.n_arms)
    for _ in range(steps):
        counts += np.bincount(twin.next_batch(n).arm, minlength=sched.catalog.n_arms)
    return counts


def test_demand_leaves_the_rng_and_the_next_batch_unchanged() -> None:
    catalog = load_catalog(ROOT / "configs" / "domains")
    a, b = _trained(catalog, steps=20), _trained(catalog, steps=20)
    rng_before = copy.deepcopy(a.rng.bit_generator.state)
    demand = a.demand(50)
    assert demand.family.sum() == pytest.approx(50 * 64)
    assert a.rng.bit_generator.state == rng_before
    assert a.step == b.step
    for _ in range(3):
        x, y = a.next_batch(64), b.next_batch(64)
        for field in ("arm", "variant", "tier", "attempt"):
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field))


def test_demand_matches_the_draws_that_follow_per_family_tier_and_environment() -> None:
    catalog = load_catalog(ROOT / "configs" / "domains")
    sched = _trained(catalog)
    assert len(sched.retries) > 0  # the retry term is exercised
    assert (sched.tiers.tier > 0).any()  # and the tier split
    steps, n = 150, 64
    demand = sched.demand(steps, n)
    counts = _empirical(sched, steps, n)
    # every arm within 5 standard deviations of its expectation (binomial), plus slack
    sd = np.sqrt(demand.arm * (1 - demand.arm / (steps * n)))
    assert np.all(np.abs(counts - demand.arm) <= 5 * sd + 3), np.max(np.abs(counts - demand.arm))
    fam_counts = np.bincount(catalog.family_of_arm, weights=counts, minlength=catalog.n_families)
    np.testing.assert_allclose(demand.family.sum(), fam_counts.sum())
    # the environments sum their families, and the biggest ones are found
    by_env = demand.by_environment()
    assert sum(by_env.values()) == pytest.approx(steps * n)
    top = [name for name, _ in demand.top_environments(3)]
    assert top == sorted(by_env, key=lambda e: -by_env[e])[:3]


def test_demand_follows_separate_tiers() -> None:
    catalog = Catalog.synthetic(n_domains=2, families_per_domain=3, n_tiers=4, tier_mode="separate")
    sched = _trained(catalog, steps=30, n=32)
    demand = sched.demand(200, 32)
    counts = _empirical(sched, 200, 32)
    sd = np.sqrt(np.maximum(demand.arm, 1.0))
    assert np.all(np.abs(counts - demand.arm) <= 5 * sd + 3)
    # a synthetic catalog has no manifests: each family is its own environment
    assert demand.environments == tuple(sorted(catalog.family_names))


def test_demand_reacts_to_weight_changes() -> None:
    catalog = Catalog.synthetic(n_domains=2, families_per_domain=3, n_tiers=1)
    sched = Scheduler(catalog, policy="learning_progress", seed=0)
    before = sched.demand(10, 32).family.copy()
    for _ in range(30):  # family 0 learns fast (then counts as mastered), the rest never
        batch = sched.next_batch(32)
        success = (batch.family == 0) * np.minimum(1.0, sched.step / 15.0)
        sched.report(batch, rewards=success, success=success)
    after = sched.demand(10).family  # batch size defaults to the last batch's
    assert after.sum() == pytest.approx(320)
    assert abs(after[0] - before[0]) > 10  # the weights moved, and the demand with them
    np.testing.assert_allclose(after, copy.deepcopy(sched).weights().family * 320)


def test_demand_needs_a_batch_size_before_the_first_draw() -> None:
    sched = Scheduler(Catalog.synthetic(), seed=0)
    with pytest.raises(ConfigError, match="pass batch_size"):
        sched.demand(5)
    with pytest.raises(ConfigError, match="steps and batch_size"):
        sched.demand(0, 8)


def _assert_split_is_the_draw(cat: Catalog, skill: Any) -> None:
    """Each family's closed-form tier split (``demand``'s) within 1.5 points of the shares
    of 20,000 real draws from ``draw_tiers``."""
    from scheduler._demand import _skill_split

    split = _skill_split(cat, skill)
    rng = np.random.default_rng(0)
    draws = 20_000
    for family in range(cat.n_families):
        tiers = skill.draw_tiers(np.full(draws, family, dtype=np.int64), rng)
        seen = np.bincount(tiers, minlength=int(cat.n_tiers[family])) / draws
        arms = slice(cat.arm_start[family], cat.arm_start[family + 1])
        np.testing.assert_allclose(seen, split[arms], atol=0.015, err_msg=str(family))


def test_the_closed_form_tier_split_is_the_draw_of_one_belief() -> None:
    """Per family, the split ``demand`` uses is the distribution ``draw_tiers`` samples:
    the belief's spread tempered as the draw tempers it (it was taken whole), and a
    ``contrast`` share one tier down where the slope is undecided (untested or suspect),
    none where it is decided."""
    from policies import SkillModel

    cat = Catalog.synthetic(n_domains=1, families_per_domain=3, n_tiers=4)
    skill = SkillModel(cat)
    state = skill.state_dict()
    mu, var = np.array([1.3, 2.4, 3.2]), np.array([1.0, 0.5, 1e-4])
    state.update(train_mu=mu, probe_mu=mu, train_var=var, probe_var=var)
    info = np.array([0.3, 1.0, 1.0])  # untested, decided, suspect
    z = np.array([0.0, 0.0, -3.0])
    zero, one = np.zeros(3), np.ones(3)
    state["slope_test"] = np.stack([zero, z * np.sqrt(info), one, info, zero])
    skill.load_state_dict(state)
    assert skill.slope_undecided().tolist() == [True, False, True]
    _assert_split_is_the_draw(cat, skill)


def test_the_closed_form_split_sends_a_flat_ladders_contrast_to_its_top_tier() -> None:
    """A family whose tiers 0 and 1 pass alike where it trains reads flat, but its
    top-tier probes fail: its contrast draws go to its top tier (``contrast_to_top``), in
    the draw and in the split ``demand`` uses; a family whose top tier passes as its easier
    tiers do sends them beside the tier drawn."""
    from skill_evidence import two_tiers_alike

    from policies import SkillModel

    cat = Catalog.synthetic(n_domains=1, families_per_domain=2, n_tiers=4)
    skill = SkillModel(cat)
    two_tiers_alike(skill, (0.1, 0.8))
    assert skill.contrast_to_top().tolist() == [True, False]
    _assert_split_is_the_draw(cat, skill)
