"""The simulated learner: determinism, exact resume, and each family kind's dynamics."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domains import Catalog, CurriculumError
from scheduler import Batch, Status
from scheduler._serialize import dumps_state, loads_state
from scheduler.backends import (
    BatchOutcomes,
    FamilyKind,
    SimulatedLearner,
    SimulatedLearnerConfig,
    SimulationError,
    TrainerBackend,
)


def make_batch(catalog: Catalog, arm: np.ndarray, step: int = 0) -> Batch:
    arm = np.asarray(arm, dtype=np.int64)
    return Batch(
        step=step,
        arm=arm,
        family=catalog.family_of_arm[arm],
        tier=catalog.tier_of_arm[arm],
        variant=np.zeros_like(arm),
        catalog=catalog,
    )


def on_arm(catalog: Catalog, family: int, tier: int, n: int) -> Batch:
    return make_batch(catalog, np.full(n, catalog.arm_id(family, tier)))


def mid_tier(learner: SimulatedLearner, family: int, target: float = 0.5) -> int:
    """The tier of a family whose held-out success is closest to ``target``."""
    n_tiers = int(learner.catalog.n_tiers[family])
    p = learner.true_success(np.full(n_tiers, family), np.arange(n_tiers))
    return int(np.argmin(np.abs(p - target)))


def first_of(learner: SimulatedLearner, kind: FamilyKind, free: bool = True) -> int:
    """The first family of a kind (with no prerequisite when ``free``)."""
    ok = learner.family_kind == kind
    if free:
        ok &= learner.prerequisite < 0
    return int(np.flatnonzero(ok)[0])


def assert_same(a: BatchOutcomes, b: BatchOutcomes) -> None:
    for name in ("reward", "success", "process", "cost", "status"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.fixture
def catalog() -> Catalog:
    return Catalog.synthetic(6, 10, 4)


def random_arms(catalog: Catalog, rng: np.random.Generator, n: int = 256) -> np.ndarray:
    return rng.integers(0, catalog.n_arms, n)


# Contract ----------------------------------------------------------------------------------
def test_is_a_trainer_backend(catalog: Catalog) -> None:
    assert isinstance(SimulatedLearner(catalog), TrainerBackend)


def test_outcome_shapes_dtypes_and_ranges() -> None:
    base = Catalog.synthetic(4, 10, 3)
    n_fam = base.n_families
    catalog = dataclasses.replace(
        base,
        reward_low=np.full(n_fam, -1.0),
        reward_high=np.full(n_fam, 2.0),
        cost_s=np.linspace(0.5, 5.0, n_fam),
    )
    learner = SimulatedLearner(catalog, seed=3, config=SimulatedLearnerConfig(share_flaky=0.2))
    rng = np.random.default_rng(0)
    for step in range(20):
        batch = make_batch(catalog, random_arms(catalog, rng, 300), step)
        out = learner.run(batch)
        for name in ("reward", "success", "process", "cost"):
            arr = getattr(out, name)
            assert arr.shape == (300,) and arr.dtype == np.float64, name
        assert out.status.shape == (300,) and out.status.dtype == np.int64
        assert set(np.unique(out.success)) <= {0.0, 1.0}
        assert set(np.unique(out.status)) <= {int(s) for s in Status}
        assert np.all((out.reward >= -1.0) & (out.reward <= 2.0))
        assert np.all(out.cost > 0)
        ok = (out.status == Status.OK) | (out.status == Status.FAILED)
        assert np.all((out.process[ok] >= 0) & (out.process[ok] <= 1))
        assert np.all(np.isnan(out.process[~ok]))
        # Status agrees with success; faults pay the floor of the range.
        assert np.all((out.status == Status.OK) == (out.success == 1.0))
        assert np.all(out.reward[~ok] == -1.0)
    assert learner.step == 20


def test_empty_batch(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog)
    out = learner.run(make_batch(catalog, np.zeros(0, dtype=np.int64)))
    assert out.reward.shape == (0,) and out.status.dtype == np.int64


def test_family_kind_shares() -> None:
    catalog = Catalog.synthetic(30, 10, 4)
    config = SimulatedLearnerConfig(share_hackable=0.05, share_flaky=0.1)
    kinds = SimulatedLearner(catalog, seed=1, config=config).family_kind
    assert kinds.dtype == np.int64 and kinds.shape == (300,)
    counts = np.bincount(kinds, minlength=len(FamilyKind))
    assert counts.tolist() == [195, 15, 15, 30, 15, 30]


# Determinism and resume ----------------------------------------------------------------------
def test_same_seed_same_outcomes(catalog: Catalog) -> None:
    a, b, c = (
        SimulatedLearner(catalog, 7),
        SimulatedLearner(catalog, 7),
        SimulatedLearner(catalog, 8),
    )
    rng = np.random.default_rng(0)
    differs = False
    for step in range(10):
        batch = make_batch(catalog, random_arms(catalog, rng), step)
        out_a, out_b, out_c = a.run(batch), b.run(batch), c.run(batch)
        assert_same(out_a, out_b)
        differs |= not np.array_equal(out_a.success, out_c.success)
    assert differs
    np.testing.assert_array_equal(a.true_score(), b.true_score())
    assert a.probe(3, 1) == b.probe(3, 1)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), split=st.integers(0, 12))
def test_resume_is_exact(seed: int, split: int) -> None:
    catalog = Catalog.synthetic(5, 6, 3)
    config = SimulatedLearnerConfig(share_hackable=0.1, share_flaky=0.1, prerequisite_share=0.5)
    original = SimulatedLearner(catalog, seed=seed, config=config)
    rng = np.random.default_rng(seed)
    batches = [make_batch(catalog, random_arms(catalog, rng, 64), s) for s in range(20)]
    for batch in batches[:split]:
        original.run(batch)
    # Through the safe binary form a checkpoint really takes, into a learner of another seed.
    resumed = SimulatedLearner(catalog, seed=seed + 1)
    resumed.load_state_dict(loads_state(dumps_state(original.state_dict())))
    assert resumed.config == config and resumed.step == split
    for batch in batches[split:]:
        assert_same(original.run(batch), resumed.run(batch))
    fams, tiers = np.arange(catalog.n_families), np.zeros(catalog.n_families, dtype=np.int64)
    np.testing.assert_array_equal(
        original.probe_many(fams, tiers)[0], resumed.probe_many(fams, tiers)[0]
    )
    np.testing.assert_array_equal(original.true_score(), resumed.true_score())


def test_state_dict_is_a_copy(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog)
    state = learner.state_dict()
    before = state["arrays"]["skill"].copy()
    learner.run(on_arm(catalog, first_of(learner, FamilyKind.LEARNABLE), 0, 256))
    np.testing.assert_array_equal(state["arrays"]["skill"], before)


def test_load_rejects_other_catalog(catalog: Catalog) -> None:
    state = SimulatedLearner(catalog).state_dict()
    other = SimulatedLearner(Catalog.synthetic(6, 10, 3))
    with pytest.raises(SimulationError, match="fingerprint"):
        other.load_state_dict(state)
    state["version"] = 99
    with pytest.raises(SimulationError, match="version"):
        SimulatedLearner(catalog).load_state_dict(state)


def test_bad_state_leaves_the_learner_intact(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog, seed=3)
    before = learner.state_dict()
    bad = learner.state_dict()
    bad["arrays"]["hack"] = np.zeros(5)  # checked after skill, which must not be applied
    bad["arrays"]["skill"] = bad["arrays"]["skill"] + 1.0
    with pytest.raises(SimulationError, match=r"arrays\.hack: shape must be \(60,\)"):
        learner.load_state_dict(bad)
    del bad["rng"]
    with pytest.raises(SimulationError, match="rng: missing"):
        learner.load_state_dict(bad)
    np.testing.assert_array_equal(
        learner.state_dict()["arrays"]["skill"], before["arrays"]["skill"]
    )


# Dynamics ---------------------------------------------------------------------------------
def test_learnable_family_improves_at_the_right_tier(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog, seed=2)
    fam = first_of(learner, FamilyKind.LEARNABLE)
    tier = mid_tier(learner, fam, 0.3)
    before = float(learner.true_success([fam], [tier])[0])
    score_before = learner.true_score()[fam]
    successes = [learner.run(on_arm(catalog, fam, tier, 64)).success.mean() for _ in range(60)]
    after = float(learner.true_success([fam], [tier])[0])
    assert after > before + 0.3
    assert learner.true_score()[fam] > score_before + 0.1
    assert np.mean(successes[-10:]) > np.mean(successes[:10]) + 0.2


def test_nothing_learned_far_from_the_frontier(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog, seed=2)
    fam = first_of(learner, FamilyKind.LEARNABLE)
    hard = mid_tier(learner, fam, 0.0)
    assert learner.true_success([fam], [hard])[0] < 0.02
    frontier = mid_tier(learner, fam, 0.5)
    far, near = SimulatedLearner(catalog, seed=2), SimulatedLearner(catalog, seed=2)
    far.run(on_arm(catalog, fam, hard, 64))
    near.run(on_arm(catalog, fam, frontier, 64))
    gain_far = far.skill[fam] - learner.skill[fam]
    gain_near = near.skill[fam] - learner.skill[fam]
    assert 0 <= gain_far < 0.2 * gain_near


def test_gain_per_step_saturates(catalog: Catalog) -> None:
    config = SimulatedLearnerConfig()
    learner = SimulatedLearner(catalog, seed=2, config=config)
    fam = first_of(learner, FamilyKind.LEARNABLE)
    start = learner.skill[fam]
    learner.run(on_arm(catalog, fam, mid_tier(learner, fam), 100_000))
    assert 0.9 * config.max_gain_per_step < learner.skill[fam] - start <= config.max_gain_per_step


def test_noise_families_are_coin_flips_and_never_learn(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog, seed=4)
    noise = np.flatnonzero(learner.family_kind == FamilyKind.NOISE)
    arms = catalog.arm_start[noise][:, None] + np.arange(4)
    skill = learner.skill
    success = np.concatenate(
        [learner.run(make_batch(catalog, np.tile(arms.ravel(), 20))).success for _ in range(10)]
    )
    assert abs(success.mean() - 0.5) < 4 * np.sqrt(0.25 / success.size)
    np.testing.assert_array_equal(learner.skill[noise], skill[noise])
    np.testing.assert_allclose(learner.true_success(noise, np.zeros_like(noise)), 0.5)
    assert np.all(learner.true_score()[noise] == 0)
    assert learner.wasted(noise).all()


def test_impossible_families_stay_at_chance() -> None:
    catalog = Catalog.synthetic(6, 10, 4, chance_success=0.25)
    learner = SimulatedLearner(catalog, seed=5)
    fams = np.flatnonzero(learner.family_kind == FamilyKind.IMPOSSIBLE)
    arms = np.tile(catalog.arm_start[fams], 200)  # tier 0: the easiest
    success = np.concatenate([learner.run(make_batch(catalog, arms)).success for _ in range(10)])
    assert abs(success.mean() - 0.25) < 4 * np.sqrt(0.25 * 0.75 / success.size)
    np.testing.assert_allclose(learner.true_success(fams, np.zeros_like(fams)), 0.25)
    assert np.all(learner.true_score()[fams] == 0)
    assert learner.wasted(fams).all()


def test_mastered_families_start_near_one(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog, seed=6)
    fams = np.flatnonzero(learner.family_kind == FamilyKind.MASTERED)
    top = catalog.n_tiers[fams] - 1
    assert np.all(learner.true_success(fams, top) >= 0.95)
    assert np.all(learner.true_score()[fams] > 0.95)
    assert learner.wasted(fams).all() and learner.wasted(fams, top).all()
    learnable = np.flatnonzero(learner.family_kind == FamilyKind.LEARNABLE)
    assert not learner.wasted(learnable, catalog.n_tiers[learnable] - 1).any()


def test_hackable_training_success_rises_but_probe_stays_flat(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog, seed=7, config=SimulatedLearnerConfig(share_hackable=0.2))
    fam = first_of(learner, FamilyKind.HACKABLE, free=False)
    tier = mid_tier(learner, fam, 0.2)
    truth = learner.true_success()
    probes_before = learner.probe_many(np.full(30, fam), np.full(30, tier))[0]
    successes = [learner.run(on_arm(catalog, fam, tier, 64)).success.mean() for _ in range(60)]
    assert np.mean(successes[-10:]) > np.mean(successes[:10]) + 0.3
    np.testing.assert_array_equal(learner.true_success(), truth)
    probes_after = learner.probe_many(np.full(30, fam), np.full(30, tier))[0]
    assert abs(probes_after.mean() - probes_before.mean()) < 0.06
    assert (
        learner.training_success()[catalog.arm_id(fam, tier)]
        > truth[catalog.arm_id(fam, tier)] + 0.3
    )


def test_flaky_families_report_environment_faults(catalog: Catalog) -> None:
    config = SimulatedLearnerConfig(share_flaky=0.2)
    learner = SimulatedLearner(catalog, seed=8, config=config)
    flaky = learner.family_kind == FamilyKind.FLAKY
    arms = np.tile(np.arange(catalog.n_arms), 10)
    out = learner.run(make_batch(catalog, arms))
    on_flaky = flaky[catalog.family_of_arm[arms]]
    fault = (out.status == Status.ENV_ERROR) | (out.status == Status.TIMEOUT)
    n = on_flaky.sum()
    assert abs(fault[on_flaky].mean() - config.flaky_error_rate) < 4 * np.sqrt(0.25 / n)
    assert (out.status[on_flaky] == Status.ENV_ERROR).any()
    assert (out.status[on_flaky] == Status.TIMEOUT).any()
    assert fault[~on_flaky].mean() < 0.02
    assert np.all(out.success[fault] == 0) and np.all(out.reward[fault] == 0)


def test_faulted_episodes_teach_nothing(catalog: Catalog) -> None:
    config = SimulatedLearnerConfig(share_flaky=0.2, flaky_error_rate=1.0, prerequisite_share=0)
    learner = SimulatedLearner(catalog, seed=8, config=config)
    fam = first_of(learner, FamilyKind.FLAKY)
    before = learner.skill
    out = learner.run(on_arm(catalog, fam, mid_tier(learner, fam), 256))
    assert np.all(out.status >= Status.TIMEOUT)
    np.testing.assert_array_equal(learner.skill, before)


def test_forgetting_lowers_an_unpractised_family(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog, seed=9)
    kinds, dom = learner.family_kind, catalog.domain_of_family
    a = first_of(learner, FamilyKind.LEARNABLE)
    b = int(np.flatnonzero((kinds == FamilyKind.LEARNABLE) & (dom != dom[a]))[0])
    initial = learner.skill[a]
    for _ in range(20):
        learner.run(on_arm(catalog, a, mid_tier(learner, a), 128))
    trained = learner.skill[a]
    assert trained > initial + 0.5
    for _ in range(learner.config.forget_after):  # grace period: nothing forgotten yet
        learner.run(on_arm(catalog, b, 0, 16))
    assert learner.skill[a] == trained
    for _ in range(300):
        learner.run(on_arm(catalog, b, 0, 16))
    assert initial < learner.skill[a] < trained - 0.3 * (trained - initial)


def test_transfer_within_a_domain_only(catalog: Catalog) -> None:
    learner = SimulatedLearner(
        catalog, seed=10, config=SimulatedLearnerConfig(prerequisite_share=0)
    )
    fam = first_of(learner, FamilyKind.LEARNABLE)
    before = learner.skill
    learner.run(on_arm(catalog, fam, mid_tier(learner, fam), 64))
    moved = learner.skill - before
    same = (catalog.domain_of_family == catalog.domain_of_family[fam]) & (
        learner.family_kind == FamilyKind.LEARNABLE
    )
    same[fam] = False
    assert np.all(moved[same] > 0) and np.all(moved[same] < 0.1 * moved[fam])
    assert np.all(moved[catalog.domain_of_family != catalog.domain_of_family[fam]] == 0)


def test_prerequisites_gate_learning(catalog: Catalog) -> None:
    gated = SimulatedLearner(catalog, seed=11, config=SimulatedLearnerConfig(prerequisite_share=1))
    free = SimulatedLearner(catalog, seed=11, config=SimulatedLearnerConfig(prerequisite_share=0))
    prereq, kinds = gated.prerequisite, gated.family_kind
    # A family gated by a learnable family that is itself free (chains exist too).
    has = prereq >= 0
    ok = has & (kinds[prereq] == FamilyKind.LEARNABLE) & (prereq[np.where(has, prereq, 0)] < 0)
    fam = int(np.flatnonzero(ok)[0])
    pre = int(prereq[fam])
    assert catalog.domain_of_family[pre] == catalog.domain_of_family[fam]
    np.testing.assert_array_equal(gated.skill, free.skill)  # same families, only the gates differ
    tier = mid_tier(gated, fam)
    start = gated.skill[fam]
    for _ in range(10):
        gated.run(on_arm(catalog, fam, tier, 64))
        free.run(on_arm(catalog, fam, tier, 64))
    assert gated.skill[fam] - start < 0.2 * (free.skill[fam] - start)
    # Learn the prerequisite well (its middle tier is the threshold), then the gate opens.
    for _ in range(2000):
        if gated.true_score()[pre] > 0.95:
            break
        gated.run(on_arm(catalog, pre, mid_tier(gated, pre), 128))
    assert gated.true_score()[pre] > 0.95
    opened = gated.skill[fam]
    tier = mid_tier(gated, fam)
    for _ in range(10):
        gated.run(on_arm(catalog, fam, tier, 64))
    assert gated.skill[fam] - opened > 0.5 * (free.skill[fam] - start)


# Probes -------------------------------------------------------------------------------------
def test_probes_estimate_true_success() -> None:
    base = Catalog.synthetic(3, 4, 3)
    pools = tuple(
        dataclasses.replace(p, size=0 if i == 0 else 200) for i, p in enumerate(base.probe_pools)
    )
    catalog = dataclasses.replace(base, probe_pools=pools)
    learner = SimulatedLearner(catalog, seed=12)
    assert learner.probe(0, 0)[1] == 32  # no probe set declared: the default size
    mean, n = learner.probe(1, 1)
    assert n == 200 and 0.0 <= mean <= 1.0
    fams = np.repeat(np.arange(1, catalog.n_families), 50)
    tiers = np.zeros_like(fams)
    means, ns = learner.probe_many(fams, tiers)
    assert means.shape == ns.shape == fams.shape and np.all((means >= 0) & (means <= 1))
    per_family = means.reshape(-1, 50).mean(axis=1)
    np.testing.assert_allclose(per_family, learner.true_success(fams[::50], tiers[::50]), atol=0.03)


# Bad input --------------------------------------------------------------------------------
def raw_batch(catalog: Catalog, arm: list[int]) -> Batch:
    """A batch whose arm ids the catalog does not have (as a buggy caller might build)."""
    ids = np.array(arm, dtype=np.int64)
    zeros = np.zeros_like(ids)
    return Batch(step=5, arm=ids, family=zeros, tier=zeros, variant=zeros, catalog=catalog)


def test_bad_input_raises_curriculum_errors(catalog: Catalog) -> None:
    learner = SimulatedLearner(catalog)
    with pytest.raises(
        SimulationError, match=r"batch 5: arm ids must be in \[0, 240\), got 0\.\.240"
    ):
        learner.run(raw_batch(catalog, [0, 240]))
    with pytest.raises(CurriculumError, match="arm ids"):
        learner.run(raw_batch(catalog, [-1]))
    with pytest.raises(SimulationError, match=r"has tiers 0\.\.3, got tier 4"):
        learner.probe(0, 4)
    with pytest.raises(SimulationError, match="family ids"):
        learner.true_success([1000], [0])
    with pytest.raises(SimulationError, match=r"share_noise: must be between 0 and 1, got 1\.4"):
        SimulatedLearner(catalog, config=SimulatedLearnerConfig(share_noise=1.4))
    with pytest.raises(SimulationError, match="sum to at most 1"):
        SimulatedLearner(
            catalog, config=SimulatedLearnerConfig(share_mastered=0.6, share_flaky=0.5)
        )
    with pytest.raises(SimulationError, match="slope_k: must be > 0"):
        SimulatedLearner(catalog, config=SimulatedLearnerConfig(slope_k=0))
    with pytest.raises(SimulationError, match=r"tier_gap: must be a pair \[low, high\], got 1\.0"):
        SimulatedLearner(catalog, config=SimulatedLearnerConfig(tier_gap=1.0))  # type: ignore[arg-type]
    assert learner.step == 0  # nothing ran


# The point of it all -----------------------------------------------------------------------
def test_focused_curriculum_beats_uniform() -> None:
    """Oracle focus on learnable families at their frontier tier vs uniform over all arms."""
    catalog = Catalog.synthetic(30, 10, 4)
    results = {}
    for policy in ("uniform", "focus"):
        learner = SimulatedLearner(catalog, seed=0)
        rng = np.random.default_rng(1)
        learnable = np.flatnonzero(learner.family_kind == FamilyKind.LEARNABLE)
        for step in range(500):
            if policy == "uniform":
                arm = rng.integers(0, catalog.n_arms, 256)
            else:
                p = learner.true_success().reshape(-1, 4)
                frontier = np.argmax(p * (1 - p), axis=1)
                fam = rng.choice(learnable, 256)
                arm = catalog.arm_start[fam] + frontier[fam]
            learner.run(make_batch(catalog, arm, step))
        results[policy] = learner.true_score().mean()
    start = SimulatedLearner(catalog, seed=0).true_score().mean()
    assert results["uniform"] > start + 0.02
    assert results["focus"] > results["uniform"] + 0.12
