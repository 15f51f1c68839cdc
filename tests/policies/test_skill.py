"""The skill model: one belief per family on the tier axis, from evidence at any tier."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
from skill_evidence import two_tiers_alike

from domains import Catalog
from policies import SkillConfig, SkillModel
from policies._verifier_floor import VerifierFloor
from scheduler import Scheduler


def _catalog(tiers: int = 4) -> Catalog:
    return Catalog.synthetic(n_domains=2, families_per_domain=5, n_tiers=tiers)


def _train(model: SkillModel, cat: Catalog, family: int, tier: int, k: int, n: int) -> None:
    arm = np.full(n, cat.arm_start[family] + tier, dtype=np.int64)
    success = np.zeros(n)
    success[:k] = 1.0
    model.observe_training(arm, success)


def _train_all(model: SkillModel, cat: Catalog, tier: int, k: object, n: object) -> None:
    """Every family trains ``n`` episodes at ``tier`` passing ``k`` (scalars, or one per
    family; ``n`` 0: that family is not trained)."""
    ks = np.broadcast_to(np.asarray(k), (cat.n_families,))
    ns = np.broadcast_to(np.asarray(n), (cat.n_families,))
    for f in range(cat.n_families):
        if ns[f] > 0:
            _train(model, cat, family=f, tier=tier, k=int(ks[f]), n=int(ns[f]))


@pytest.fixture
def right_grader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The grader taken to be right (no floor read, as ``no_verifier_floor``): the tests
    that use it read a lift, or a coin flip's half, at tiers that surely fail in the first
    probe calls, which is what a grader wrong either way shows too
    (tests/policies/test_verifier_floor.py)."""
    monkeypatch.setattr(VerifierFloor, "add", lambda self, *counts: False)


def _probe_all(model: SkillModel, cat: Catalog, tier: int, scores: object) -> None:
    """Every family probed at ``tier`` on 8 items, reading ``scores`` (scalar or per family)."""
    families = np.arange(cat.n_families)
    read = np.broadcast_to(np.asarray(scores, dtype=np.float64), families.shape)
    model.observe_probes(families, np.full(families.size, tier), read, np.full(families.size, 8))


def test_a_passing_top_tier_probe_places_the_family_at_the_top_and_marks_it_mastered() -> None:
    cat = _catalog()
    model = SkillModel(cat)
    for _ in range(2):  # two probe rounds of 16 items, all passed
        model.observe_probes(np.array([3]), np.array([3]), np.array([1.0]), np.array([16]))
    assert model.tier()[3] == 3
    assert model.mastered()[3]
    assert not model.mastered()[[0, 1, 2, 4]].any()


def test_evidence_at_a_low_tier_moves_the_predicted_pass_rate_of_every_tier() -> None:
    cat = _catalog()
    model = SkillModel(cat)
    before = model.pass_rate(np.array([0, 0, 0]), np.array([1, 2, 3]))
    _train(model, cat, family=0, tier=0, k=16, n=16)
    after = model.pass_rate(np.array([0, 0, 0]), np.array([1, 2, 3]))
    assert (after > before).all()


def test_a_failing_family_is_placed_at_tier_zero_and_stalls_after_patience() -> None:
    cat = _catalog()
    config = SkillConfig(patience=16)
    model = SkillModel(cat, config)
    for _ in range(4):
        _train(model, cat, family=1, tier=0, k=0, n=8)
    assert model.tier()[1] == 0
    assert model.stalled()[1]
    assert not model.stalled()[0]  # never trained: not judged


def test_a_family_that_keeps_improving_is_not_stalled() -> None:
    cat = _catalog()
    model = SkillModel(cat, SkillConfig(patience=16))
    for _ in range(8):  # trained where the model places it, and passing most: climbing
        if model.tier()[2] == 3:
            break  # at the top: no tier left to climb (passing 7 of 8 there is a plateau)
        _train(model, cat, family=2, tier=int(model.tier()[2]), k=7, n=8)
        assert not model.stalled()[2]
    assert model.tier()[2] == 3


def test_training_moves_a_rising_belief_by_its_recent_rise_per_episode() -> None:
    # The predict step: a family that rose over its last episodes is expected to keep
    # rising as it trains. Outcomes far below its skill (tier 0, all passed) say almost
    # nothing, so what moves its belief is the trend: (mu - slow_mu) / patience an episode.
    cat = _catalog()
    model = SkillModel(cat, SkillConfig(patience=16))
    for _ in range(3):
        _train(model, cat, family=2, tier=int(model.tier()[2]), k=7, n=8)
    mu0 = model.belief()[0][2]
    trend = (mu0 - model.slow_mu[2]) / 16
    assert trend > 0.02
    _train(model, cat, family=2, tier=0, k=8, n=8)
    moved = model.belief()[0][2] - mu0
    assert 8 * trend - 0.01 <= moved <= 8 * trend + 0.1  # the passes can only add a little
    # a family whose belief never rose (it fails tier 0) gets no trend: it does not drift up
    for _ in range(3):
        _train(model, cat, family=5, tier=0, k=0, n=8)
    before = model.belief()[0][5]
    _train(model, cat, family=5, tier=0, k=0, n=8)
    assert model.belief()[0][5] <= before


def test_training_passing_where_the_same_tiers_probe_fails_is_hacked_not_a_shared_shift() -> None:
    cat = _catalog()
    model = SkillModel(cat)
    gamed = np.arange(cat.n_families) == 4  # family 4 passes every training episode
    for _ in range(4):
        _train_all(model, cat, tier=3, k=np.where(gamed, 16, 10), n=16)
        # held-out probes of the tier trained: a little lower than training for every
        # family (a shared shift), and family 4 fails them all
        _probe_all(model, cat, tier=3, scores=np.where(gamed, 0.0, 0.375))
    hacked = model.hacked()
    assert hacked[4]
    assert not hacked[~gamed].any()


def test_a_lower_tier_that_lags_the_one_trained_is_not_taken_for_a_hack() -> None:
    """A ladder trained at its top tier may let a lower tier slip: its probes read low,
    but nothing was trained there to compare them with. Probed every tier, family 4 reads
    0.5 at tiers 0 and 1 while it passes every training episode and probe at the top."""
    cat = _catalog()
    model = SkillModel(cat)
    lagging = np.arange(cat.n_families) == 4
    for _ in range(6):
        _train_all(model, cat, tier=3, k=7, n=8)
        for tier in range(4):
            _probe_all(
                model, cat, tier, np.where(lagging & (tier < 2), 0.5, 1.0 if tier < 3 else 0.875)
            )
    assert not model.hacked().any()


def test_a_round_delivered_one_tier_at_a_time_compares_every_tier_with_one_window() -> None:
    """Probes of several tiers sent in one call per tier at the same step are one round:
    each compares with the training since the previous round (the first call does not
    empty the window for the rest). A later round with no training since compares with
    nothing: what the family trained before it is stale."""
    cat = _catalog()
    model = SkillModel(cat)
    gamed = np.arange(cat.n_families) == 4
    families = np.arange(cat.n_families)
    for step in range(3):  # family 4 passes every training episode at tier 3, no probe
        _train_all(model, cat, tier=3, k=np.where(gamed, 8, 5), n=8)
        # tier 2 first (nothing trained there: no evidence), then tier 3 at the same step
        model.observe_probes(families, np.full(10, 2), np.full(10, 0.625), np.full(10, 8), step)
        read = np.where(gamed, 0.0, 0.5)
        model.observe_probes(families, np.full(10, 3), read, np.full(10, 8), step)
    assert (model.shortfall.probe_rounds == 3).all()  # the tier-3 call of each round had evidence
    assert model.hacked()[4] and not model.hacked()[~gamed].any()
    resid = model.shortfall.probe_resid.copy()
    model.observe_probes(families, np.full(10, 3), np.zeros(10), np.full(10, 8), 9)
    # no training since: no evidence
    np.testing.assert_array_equal(model.shortfall.probe_resid, resid)


def test_a_mastered_family_slipping_on_a_trickle_of_training_is_not_taken_for_a_hack() -> None:
    """A mastered family held to a trickle of practice slips a little: its top-tier probe
    reads 7 and 6 of 8 while its two training episodes a round pass. Against the training
    belief (long, confident evidence far above the top tier) that read as a hack, and the
    hack flag took its practice away; against the training of the same tier in the same
    window it is a small gap, well inside the noise of two episodes."""
    cat = _catalog()
    model = SkillModel(cat)
    for _ in range(20):
        _train_all(model, cat, tier=3, k=8, n=8)
        _probe_all(model, cat, tier=3, scores=1.0)
    slipping = np.arange(cat.n_families) == 4
    for passes in (7, 6, 6):
        _train_all(model, cat, tier=3, k=np.where(slipping, 2, 8), n=np.where(slipping, 2, 8))
        _probe_all(model, cat, tier=3, scores=np.where(slipping, passes / 8, 1.0))
    assert not model.hacked()[4]


def test_on_a_slow_learner_a_family_rising_slowly_is_not_stalled_but_a_plateau_is() -> None:
    # Every family climbs a tenth of a tier per 16 episodes (under min_gain per patience),
    # except family 9, which sits half a tier up (under tier 1: a plateau there is a stall).
    cat = _catalog()
    model = SkillModel(cat, SkillConfig(patience=16))
    skill = np.linspace(0.0, 0.5, cat.n_families)
    for _ in range(20):
        for f in range(cat.n_families):
            theta = 0.5 if f == 9 else skill[f]
            tier = int(np.clip(np.rint(theta), 0, 3))
            p = float(1.0 / (1.0 + np.exp(-3.0 * (theta - tier))))
            _train(model, cat, family=f, tier=tier, k=round(16 * p), n=16)
        skill[:9] += 0.1
    stalled = model.stalled()
    assert stalled[9]
    assert not stalled[:9].any()


def test_a_family_left_untrained_whose_probes_fall_is_not_taken_for_a_hack() -> None:
    cat = _catalog()
    model = SkillModel(cat)
    four = np.arange(cat.n_families) == 4
    for _ in range(3):
        _train_all(model, cat, tier=2, k=6, n=8)
        _probe_all(model, cat, tier=2, scores=0.75)
    for _ in range(4):  # family 4 is no longer trained, and forgets: its probes fall
        _train_all(model, cat, tier=2, k=6, n=np.where(four, 0, 8))
        _probe_all(model, cat, tier=2, scores=np.where(four, 0.0, 0.75))
    assert not model.hacked()[4]
    for _ in range(3):  # trained again, passing in training and failing the probes: a hack
        _train_all(model, cat, tier=2, k=np.where(four, 8, 6), n=8)
        _probe_all(model, cat, tier=2, scores=np.where(four, 0.0, 0.75))
    assert model.hacked()[4]


def test_state_round_trips_and_a_bad_state_is_refused() -> None:
    cat = _catalog()
    model = SkillModel(cat)
    _train(model, cat, family=0, tier=1, k=3, n=8)
    state = model.state_dict()
    other = SkillModel(cat)
    other.load_state_dict(state)
    assert np.array_equal(other.belief()[0], model.belief()[0])
    broken = dict(state, train_var=np.full(cat.n_families, -1.0))
    with pytest.raises(ValueError, match="variances"):
        other.load_state_dict(broken)
    with pytest.raises(ValueError, match="train_mu"):
        other.load_state_dict(dict(state, train_mu=np.zeros(3)))


def test_the_default_scheduler_draws_tiers_from_the_skill_model() -> None:
    cat = _catalog()
    sched = Scheduler(cat, seed=0)
    assert sched.skill is not None
    for _ in range(2):
        sched.record_probes(np.array([5]), np.array([1.0]), tiers=np.array([3]), n=np.array([16]))
    batch = sched.next_batch(4000)
    at = batch.family == 5
    assert at.any()
    # placed at the top by the probes; a contrast share goes one tier below it
    assert (batch.tier[at] == 3).mean() > 0.6
    assert (batch.tier[at] >= 2).all()
    assert sched.mastered[5]
    share = at.mean()
    assert share < 0.5 / cat.n_families  # a mastered family keeps a small share


@pytest.mark.parametrize(
    "field,value",
    [
        ("slope", 0.0),
        ("target", 1.0),
        ("prior_var", -1.0),
        ("patience", -1),
        ("drift", -0.1),
        ("mastered_weight", -1.0),
        ("stalled_weight", float("nan")),
        ("hacked_weight", -0.01),
        ("flat_z", "1e9"),  # YAML 1.1 reads 1e9 as a string
        ("patience", True),
    ],
)
def test_bad_skill_settings_are_refused_with_the_field_name(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"skill.{field}"):
        SkillConfig(**{field: value})


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 9),  # family
            st.integers(0, 3),  # tier
            st.integers(0, 16),  # passes
            st.integers(1, 16),  # trials
            st.booleans(),  # a probe (else training)
        ),
        min_size=1,
        max_size=40,
    )
)
def test_any_evidence_keeps_every_belief_finite_and_every_tier_in_range(
    events: list[tuple[int, int, int, int, bool]],
) -> None:
    cat = _catalog()
    model = SkillModel(cat)
    for family, tier, k, n, probe in events:
        k = min(k, n)
        if probe:
            model.observe_probes(
                np.array([family]), np.array([tier]), np.array([k / n]), np.array([n])
            )
        else:
            _train(model, cat, family, tier, k, n)
    mu, var = model.belief()
    assert np.isfinite(mu).all() and (var > 0).all() and np.isfinite(var).all()
    tiers = model.draw_tiers(np.arange(cat.n_families), np.random.default_rng(0))
    assert ((tiers >= 0) & (tiers < cat.n_tiers)).all()
    for flag in (model.mastered(), model.flat(), model.stalled(), model.out_of_reach()):
        assert flag.dtype == bool and flag.shape == (cat.n_families,)


def _bottom_up_run(model: SkillModel, cat: Catalog, learner: int, coin: int) -> tuple[bool, bool]:
    """30 episodes a batch for each of two families, at the model's tier and a fifth one tier
    beside it. ``learner`` learns its tiers bottom-up, as bench's ladder student does (a
    tier learns once the one below passes, faster the more it passes, and a fifth of its
    gain reaches the tier above); ``coin`` passes half of everything. Whether each was ever
    read flat."""
    rng = np.random.default_rng(0)
    competence = np.zeros(cat.n_tiers[learner])
    competence[0] = 0.3
    top = competence.shape[0] - 1
    learner_flat = coin_flat = False
    for _ in range(40):
        arms, success = [], []
        for family in (learner, coin):
            tier = int(model.tier()[family])
            beside = tier - 1 if tier > 0 else tier + 1
            tiers = np.array([tier] * 24 + [beside] * 6)
            p = competence[tiers] if family == learner else np.full(30, 0.5)
            arms.append(cat.arm_start[family] + tiers)
            success.append((rng.random(30) < p).astype(np.float64))
        model.observe_training(np.concatenate(arms), np.concatenate(success))
        count = np.bincount(arms[0] - cat.arm_start[learner], minlength=top + 1)
        for t in np.flatnonzero(count):
            ready = 1.0 if t == 0 else competence[t - 1] ** 2
            rate = 0.3 * ready * (0.05 + competence[t]) / 1.05
            gain = (1.0 - competence[t]) * -np.expm1(-rate * count[t])
            competence[t] += gain
            if t < top:
                competence[t + 1] = min(1.0, competence[t + 1] + 0.2 * gain)
        learner_flat |= bool(model.flat()[learner])
        coin_flat |= bool(model.flat()[coin])
    return learner_flat, coin_flat


def test_many_episodes_a_batch_of_a_family_learning_bottom_up_do_not_read_as_a_flat_slope() -> None:
    cat = _catalog()
    assert _bottom_up_run(SkillModel(cat), cat, learner=0, coin=1) == (False, True)
    # scored at the belief before each batch (bench/quality.py's no_slope_lag), it does
    model = SkillModel(cat)
    model._rise_share = 0.0
    assert _bottom_up_run(model, cat, learner=0, coin=1) == (True, True)


def test_built_counts_the_training_before_mastery_and_a_saturated_batch_follows_it() -> None:
    """Episodes count in ``built`` only while the top tier is not mastered; when every
    family is mastered, the spare share goes by it, so a family that came mastered (built
    by no training) keeps only its cap, a trickle of the mastered cap."""
    cat = _catalog(tiers=2)
    sched = Scheduler(cat, seed=0)
    sk = sched.skill
    _train(sk, cat, family=0, tier=0, k=10, n=12)  # not mastered: all 12 count
    assert sk.built[0] == 12 and sk.built[1:].sum() == 0
    for _ in range(8):  # every family's top tier passes in probes: all mastered
        sk.observe_probes(np.arange(10), np.ones(10, dtype=np.int64), np.ones(10), np.full(10, 64))
    assert sk.mastered().all()
    _train(sk, cat, family=1, tier=1, k=12, n=12)  # mastered already: counts for nothing
    assert sk.built[1] == 0
    sk.built[:] = 0.0
    sk.built[[0, 1]] = [300.0, 100.0]
    sched.pipeline.invalidate()
    family = sched.weights().family
    cap = sched.config.skill.mastered_weight / cat.n_families
    trickle = cap / sched.config.skill.trial  # built by none: counted as one episode
    np.testing.assert_allclose(family[2:], trickle)  # mastered with no training: the cap only
    spare = 1.0 - 2 * cap - (cat.n_families - 2) * trickle
    np.testing.assert_allclose(family[:2], cap + spare * np.array([0.75, 0.25]))
    older = {k: v for k, v in sk.state_dict().items() if k != "built"}  # a state from before
    other = SkillModel(cat)
    other.load_state_dict(older)
    np.testing.assert_array_equal(other.built, sk.episodes)  # every episode counted then
    with pytest.raises(ValueError, match="built"):
        other.load_state_dict(dict(older, built=np.full(cat.n_families, -1.0)))


def test_an_uncertain_familys_tiers_are_drawn_at_half_its_beliefs_spread() -> None:
    """The draw samples the skill from the belief with its spread halved: a family known
    only by the prior (sd 2 tiers, mean 0) lands two tiers or more up in about 9 % of its
    tasks (P(N(0, 1) >= 1.37)); a plain Thompson draw would send about 25 % there."""
    cat = _catalog()
    model = SkillModel(cat, SkillConfig(contrast=0.0))
    rng = np.random.default_rng(0)
    tiers = model.draw_tiers(np.zeros(20_000, dtype=np.int64), rng)
    high = float((tiers >= 2).mean())
    assert 0.07 < high < 0.11
    model._draw_spread = 1.0  # the ablation's plain Thompson draw
    plain = float((model.draw_tiers(np.zeros(20_000, dtype=np.int64), rng) >= 2).mean())
    assert 0.22 < plain < 0.28


def test_a_family_past_tier_1_that_pauses_is_on_a_plateau_not_stalled() -> None:
    """The stall test judges only families under tier 1: past it, a family that stops
    rising for ``patience`` episodes is before a harder tier (a network finding a sparse
    parity pauses for hundreds of steps), and holding it to a trickle there slows it."""
    cat = _catalog()
    model = SkillModel(cat)
    mu = np.array([-0.6, 0.5, 0.9, 1.1, 1.5, 2.5, 2.9, -0.2, 0.2, 1.8])
    state = model.state_dict()
    state.update(
        train_mu=mu, probe_mu=mu, slow_mu=mu, train_var=np.full(10, 0.08),
        probe_var=np.full(10, 0.08), episodes=np.full(10, 400.0), built=np.full(10, 400.0),
    )  # fmt: skip
    model.load_state_dict(state)
    np.testing.assert_array_equal(model.stalled(), mu < 1.0)
    model._stall_below = float("inf")  # bench/quality.py's no_stall_below: every tier
    assert model.stalled().all()


def _out_of_reach_among_mastered(trial: bool = True) -> tuple[Scheduler, float]:
    """Families 0 and 1 out of reach, 0 not yet tried; the rest mastered. Returns the
    scheduler and the out-of-reach cap."""
    cat = _catalog()
    sched = Scheduler(cat, seed=0)
    sk = sched.skill
    sk._reach_trial = trial
    mu = np.full(10, 6.0)  # mastered
    mu[[0, 1]] = -3.0  # out of reach
    episodes = np.full(10, 200.0)
    episodes[0] = sk.config.patience / 4 - 1  # not yet tried
    state = sk.state_dict()
    state.update(
        train_mu=mu, probe_mu=mu, slow_mu=mu, train_var=np.full(10, 0.05),
        probe_var=np.full(10, 0.05), episodes=episodes, built=np.full(10, 100.0),
    )  # fmt: skip
    sk.load_state_dict(state)
    return sched, sched.config.skill.stalled_weight / cat.n_families


def test_an_out_of_reach_family_takes_a_spare_share_until_it_has_been_tried() -> None:
    """A slow starter passes nothing at first, as an impossible family does: before a
    quarter of ``patience`` episodes it shares a saturated batch's spare share with the
    mastered; once tried, it keeps only its cap."""
    sched, cap = _out_of_reach_among_mastered()
    sk, names = sched.skill, sched.catalog.family_names
    np.testing.assert_array_equal(sk.out_of_reach(), np.arange(10) < 2)
    np.testing.assert_array_equal(sk.on_trial(), np.arange(10) == 0)
    family = sched.weights().family
    assert family[1] == pytest.approx(cap)  # tried: its cap only
    # untried: a spare share, as a mastered family gets (each raised by its cap)
    ratio = sched.config.skill.stalled_weight / sched.config.skill.mastered_weight
    assert family[0] > 5 * cap
    np.testing.assert_allclose(family[0], family[2:] * ratio)
    idle = [e for e in sched.drain_events() if e.kind == "idle"]
    assert [e.family for e in idle] == [names[0], names[1]]
    assert {e.payload["reason"] for e in idle} == {"out_of_reach"}
    # bench/quality.py's no_reach_trial: no spare share for it either
    ablated, _ = _out_of_reach_among_mastered(trial=False)
    assert ablated.weights().family[0] == pytest.approx(cap)


def test_a_slope_half_way_to_flat_keeps_its_contrast_draws() -> None:
    """At the tier a draw targets, a coin flip passes about as the belief predicts: only
    the tier beside tells it from a learner. A family whose slope reads half of
    ``flat_z`` flat keeps sending ``contrast`` of its draws there until the test decides;
    one whose slope reads as it should does not."""
    cat = _catalog()
    model = SkillModel(cat)
    mu = np.full(10, 2.0)
    state = model.state_dict()
    state.update(train_mu=mu, probe_mu=mu, train_var=np.full(10, 1e-4), probe_var=np.full(10, 1e-4))
    info = np.full(10, 4.0)
    z = np.array([-3.0, 0.0, 0.0, -5.0, -1.5, 0, 0, 0, 0, 0])
    info[2] = 0.1  # untested
    zero, one = np.zeros(10), np.ones(10)
    state["slope_test"] = np.stack([zero, z * np.sqrt(info), one, info, zero])
    model.load_state_dict(state)
    np.testing.assert_allclose(model._slope_z()[0][[0, 1, 3, 4]], z[[0, 1, 3, 4]])
    undecided = model.slope_undecided()
    assert undecided.tolist()[:5] == [True, False, True, True, False]
    assert model.flat().tolist()[:5] == [False, False, False, True, False]
    rng = np.random.default_rng(0)
    draws = 4000
    for family, share in [(0, 0.2), (1, 0.0), (2, 0.2), (4, 0.0)]:
        tiers = model.draw_tiers(np.full(draws, family, dtype=np.int64), rng)
        assert abs(float((tiers == 1).mean()) - share) < 0.03, family
    model._suspect = float("inf")  # bench/quality.py's no_suspect_contrast
    assert model.slope_undecided().tolist()[:5] == [False, False, True, False, False]


def test_a_probe_round_of_every_family_updates_the_beliefs_as_the_general_loop_does() -> None:
    """A round with one row per family in order takes the work-array loop (its arrays kept,
    at this size); the same rows in another order take the general one (a sum per family
    of one row each): the beliefs must be the same bits, whatever the evidence (passes,
    failures, every tier)."""
    from policies._workspace import KEEP_FROM_BYTES

    cat = Catalog.synthetic(16, KEEP_FROM_BYTES // 8 // 16 + 1, 4, chance_success=0.25)
    rng = np.random.default_rng(3)
    m = cat.n_families
    tiers = rng.integers(0, 4, m)
    n = rng.integers(1, 64, m).astype(np.float64)
    k = np.floor(n * rng.random(m))
    k[:10], k[10:20] = 0.0, n[10:20]  # all failed, all passed
    start_mu, start_var = rng.normal(0.0, 1.5, m), rng.uniform(0.2, 4.0, m)
    results = []
    for order in (np.arange(m), rng.permutation(m)):
        model = SkillModel(cat)
        model.probe_mu[:], model.probe_var[:] = start_mu, start_var
        families = np.arange(m)
        model._update(
            model.probe_mu, model.probe_var, families, order, tiers[order], k[order], n[order]
        )
        results.append((model.probe_mu.copy(), model.probe_var.copy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert not np.array_equal(results[0][0], start_mu)  # the evidence moved the beliefs


def _middle_fades_top_passes(model: SkillModel, cat: Catalog, top_probe: float) -> None:
    """Family 0 of three tiers passes every top-tier episode, its middle tier's probes read
    0.5 (left out of practice, it faded), its top tier's probes read ``top_probe``."""
    for _ in range(8):
        _train(model, cat, family=0, tier=2, k=16, n=16)
        families, n = np.array([0, 0, 0]), np.array([8, 8, 8])
        model.observe_probes(families, np.array([0, 1, 2]), np.array([1.0, 0.5, top_probe]), n)


def test_a_top_tier_that_passes_is_mastered_though_a_faded_middle_tier_confuses_the_belief() -> (
    None
):
    cat = _catalog(tiers=3)
    model = SkillModel(cat)
    _middle_fades_top_passes(model, cat, top_probe=1.0)
    assert model.mastered()[0]
    model._direct_top = False  # the belief alone (bench/quality.py's ablation)
    assert not model.mastered()[0], "the belief alone confirmed it: the case tests nothing"


def test_training_passes_the_top_tiers_probes_do_not_confirm_are_not_mastery() -> None:
    cat = _catalog(tiers=3)
    model = SkillModel(cat)
    _middle_fades_top_passes(model, cat, top_probe=0.5)  # a hack: held-out items fail
    assert not model.mastered()[0]


def test_the_top_tiers_counts_fade_so_a_family_that_forgets_is_mastered_no_longer() -> None:
    cat = _catalog(tiers=3)
    model = SkillModel(cat)
    _middle_fades_top_passes(model, cat, top_probe=1.0)
    assert model.mastered()[0]
    for _ in range(3):  # it forgot: its top tier now fails half its episodes
        _train(model, cat, family=0, tier=2, k=8, n=16)
    assert not model.mastered()[0]


def test_the_top_tiers_counts_round_trip_and_a_bad_one_is_refused_whole() -> None:
    cat = _catalog(tiers=3)
    model = SkillModel(cat)
    _middle_fades_top_passes(model, cat, top_probe=1.0)
    state = model.state_dict()
    other = SkillModel(cat)
    other.load_state_dict(state)
    assert np.array_equal(other.top_tier.counts, model.top_tier.counts) and other.mastered()[0]
    with pytest.raises(ValueError, match="top_tier"):
        other.load_state_dict({k: v for k, v in state.items() if k != "top_tier"})
    bad = state["top_tier"].copy()
    bad[0, 0] = bad[1, 0] + 1.0
    with pytest.raises(ValueError, match="top_tier"):
        other.load_state_dict(dict(state, top_tier=bad))
    assert np.array_equal(other.top_tier.counts, model.top_tier.counts), (
        "a refused state changed the model"
    )
    assert np.array_equal(other.top_tier.first, model.top_tier.first)
    first = state["top_tier_first"].copy()
    first[1, 0] = 17.0  # more first episodes than are kept
    with pytest.raises(ValueError, match="top_tier_first: more than 16 episodes"):
        other.load_state_dict(dict(state, top_tier_first=first))
    first = state["top_tier_first"].astype(np.float64)
    first[0, 0] = 0.5  # the first episodes are whole
    with pytest.raises(ValueError, match="top_tier_first: whole episodes only"):
        other.load_state_dict(dict(state, top_tier_first=first))


def test_the_top_tiers_kept_verdict_is_the_one_its_counts_give_after_any_outcomes() -> None:
    """The verdict is redone only for the families an outcome touched: after random
    training and probe rounds (repeats of a family in one round included) it equals the
    verdict of every family read afresh from the counts."""
    cat = _catalog(tiers=3)
    model = SkillModel(cat)
    rng = np.random.default_rng(0)
    top = model.top_tier
    for _ in range(60):
        arm = rng.integers(0, cat.n_arms, 24)
        model.observe_training(arm, (rng.random(24) < 0.97).astype(np.float64))
        families = rng.integers(0, cat.n_families, 12)
        tiers = np.where(rng.random(12) < 0.7, 2, rng.integers(0, 3, 12))
        model.observe_probes(families, tiers, (rng.random(12) < 0.95) * 1.0, np.full(12, 8))
    fresh = top._verdict(top.counts, top._need(None))
    np.testing.assert_array_equal(top.passed, fresh)
    assert fresh.any() and not fresh.all(), "every family alike: the case tests nothing"


def test_top_tier_probes_alone_do_not_master_a_family_by_the_counts() -> None:
    """A fixed probe set that happens to be easy reads high round after round: without
    training at the top tier (fresh samples) the counts never say mastered."""
    cat = _catalog(tiers=3)
    model = SkillModel(cat)
    for _ in range(10):
        model.observe_probes(np.array([0]), np.array([2]), np.array([1.0]), np.array([64]))
    assert model.top_tier.counts[3, 0] > 0 and not model.top_tier.passed[0]
    _train(model, cat, family=0, tier=2, k=32, n=32)
    assert model.top_tier.passed[0]


def _probe_top(model: SkillModel, score: float, rounds: int, n: int = 16) -> None:
    cat = model._catalog
    fam = np.arange(cat.n_families)
    top = (cat.n_tiers - 1).astype(np.int64)
    for _ in range(rounds):
        model.observe_probes(fam, top, np.full(fam.size, score), np.full(fam.size, n))


def test_a_top_tier_whose_probes_rose_since_the_first_ones_reads_risen() -> None:
    cat = Catalog.synthetic(n_domains=1, families_per_domain=2, n_tiers=3)
    model = SkillModel(cat)
    _probe_top(model, 0.5, rounds=4)  # the first 64 items: half pass
    assert model.top_tier.start[1].tolist() == [64.0, 64.0]
    _probe_top(model, 0.5, rounds=4)  # as it always did: a coin flip
    assert not model.top_tier.risen(3.0).any()
    _probe_top(model, 0.95, rounds=4)  # its top tier now passes far more often
    assert model.top_tier.risen(3.0).all()
    np.testing.assert_array_equal(model.top_tier.start[0], [32.0, 32.0])  # the start stays


@pytest.mark.usefixtures("right_grader")
def test_a_flat_family_whose_top_tier_probes_rose_is_not_flat() -> None:
    """A family passing half its episodes at every tier reads flat (a coin flip); once its
    top-tier probes pass far more often than its first ones did, it is learning."""
    cat = Catalog.synthetic(n_domains=1, families_per_domain=1, n_tiers=4)
    model = SkillModel(cat)
    rng = np.random.default_rng(0)
    _probe_top(model, 0.5, rounds=4)
    for _ in range(60):
        arm = rng.integers(0, cat.n_arms, size=32)
        model.observe_training(arm, (rng.random(32) < 0.5).astype(float))
    assert model.flat()[0]
    _probe_top(model, 0.9, rounds=3)
    assert not model.flat()[0]
    model._probe_rise = False  # the ablation: flat whatever the probes say
    assert model.flat()[0]


def test_top_tier_probes_failing_where_the_tiers_below_pass_read_under_top() -> None:
    """Training under the top passes 80 %: a top tier probed at 10 % reads under it (the
    pass rate falls with the tier), one probed at 80 % does not (as a coin flip passes
    every tier alike), and neither does anything before 16 probe items count (faded)."""
    model = SkillModel(Catalog.synthetic(n_domains=1, families_per_domain=2, n_tiers=4))
    two_tiers_alike(model, (0.1, 0.8), rounds=12)  # three probe rounds of 8 items
    assert model.top_tier.under_top(3.0, np.arange(2)).tolist() == [True, False]
    assert model.top_tier.under_top(3.0, np.array([1, 0])).tolist() == [False, True]
    early = SkillModel(Catalog.synthetic(n_domains=1, families_per_domain=2, n_tiers=4))
    two_tiers_alike(early, (0.1, 0.8), rounds=8)  # two rounds: 14.2 items once faded
    assert not early.top_tier.under_top(3.0, np.arange(2)).any()


def test_a_top_tier_that_passes_in_training_where_its_probes_fail_is_no_learner() -> None:
    """A hack passes every tier in training, the top one too, while its held-out probes
    fail: its top tier's own training above its probes keeps it out of ``under_top``."""
    cat = Catalog.synthetic(n_domains=1, families_per_domain=2, n_tiers=4)
    model = SkillModel(cat)
    two_tiers_alike(model, (0.1, 0.1), rounds=12)
    assert model.top_tier.under_top(3.0, np.arange(2)).all()
    _train(model, cat, family=1, tier=3, k=8, n=8)  # the hack passes the top tier too
    assert model.top_tier.under_top(3.0, np.arange(2)).tolist() == [True, False]


def test_a_ladder_reading_flat_whose_top_tier_probes_fail_is_not_flat() -> None:
    """Tiers 0 and 1 pass alike where the family trains, so the slope's test reads flat;
    its top-tier probes fail, so its pass rate falls with the tier and it is learning. The
    family whose top tier passes as its easier tiers do stays flat, and with the rule
    switched off (the ablation) both are."""
    model = SkillModel(Catalog.synthetic(n_domains=1, families_per_domain=2, n_tiers=4))
    two_tiers_alike(model, (0.1, 0.8))
    z, info = model._slope_z()
    assert model._reads_flat(z, info).all()
    assert model.flat().tolist() == [False, True]
    model._under_top = False
    assert model.flat().all()


def test_such_a_family_sends_its_contrast_draws_to_its_top_tier() -> None:
    """Its contrast draws go where a hack would show (training passing the top tier where
    the probes fail) and a learner fails alike; without the rule they go beside its tier."""
    model = SkillModel(Catalog.synthetic(n_domains=1, families_per_domain=2, n_tiers=4))
    two_tiers_alike(model, (0.1, 0.8))
    family = np.zeros(4000, dtype=np.int64)
    with_rule = model.draw_tiers(family, np.random.default_rng(1))
    model._under_top = False
    without = model.draw_tiers(family, np.random.default_rng(1))
    at_top = (with_rule == 3).mean()
    assert at_top >= (without == 3).mean() + 0.15
    assert at_top == pytest.approx(model.config.contrast + (without == 3).mean(), abs=0.03)


def _wide(families: int = 40) -> Catalog:
    return Catalog.synthetic(n_domains=4, families_per_domain=families // 4, n_tiers=4)


@pytest.mark.usefixtures("right_grader")
def test_a_lift_every_reading_of_a_probe_call_shares_is_taken_off_them() -> None:
    """An evaluator that drifts lifts every reading alike; where the belief says the tier
    surely fails, the lift is all that reads, and it is taken off the whole call."""
    cat = _wide()
    shifted, plain = SkillModel(cat), SkillModel(cat)
    plain._shift = False
    for model in (shifted, plain):
        _train_all(model, cat, tier=0, k=1, n=8)  # far below the top tier
        _probe_all(model, cat, tier=3, scores=0.25)  # nothing passes there, but reads 0.25
    assert shifted.last_shift == pytest.approx(0.25, abs=0.01)
    assert plain.last_shift == 0.0
    assert (shifted.belief()[0] < plain.belief()[0]).all()


def test_readings_that_agree_with_the_belief_are_taken_as_they_come() -> None:
    cat = _wide()
    model, plain = SkillModel(cat), SkillModel(cat)
    plain._shift = False
    for m in (model, plain):
        _train_all(m, cat, tier=0, k=1, n=8)
        _probe_all(m, cat, tier=3, scores=0.0)
    assert model.last_shift == 0.0
    assert np.array_equal(model.belief()[0], plain.belief()[0])


def test_a_fall_is_never_read_as_a_shift() -> None:
    """Readings under what the belief expects are taken as they come: only a lift is
    read (a fall where a tier surely passes may be forgetting)."""
    cat = replace(_wide(), chance_success=np.full(40, 0.25))
    model, plain = SkillModel(cat), SkillModel(cat)
    plain._shift = False
    for m in (model, plain):
        _train_all(m, cat, tier=0, k=2, n=8)
        _probe_all(m, cat, tier=3, scores=0.0)  # under the 0.25 that guessing passes
    assert model.last_shift == 0.0
    assert np.array_equal(model.belief()[0], plain.belief()[0])


@pytest.mark.usefixtures("right_grader")
def test_too_few_surely_failing_readings_give_no_shift() -> None:
    cat = Catalog.synthetic(n_domains=1, families_per_domain=7, n_tiers=4)  # under the 8
    model = SkillModel(cat)
    _train_all(model, cat, tier=0, k=1, n=8)
    _probe_all(model, cat, tier=3, scores=0.25)
    assert model.last_shift == 0.0
    eight = Catalog.synthetic(n_domains=1, families_per_domain=8, n_tiers=4)
    model = SkillModel(eight)
    _train_all(model, eight, tier=0, k=1, n=8)
    _probe_all(model, eight, tier=3, scores=0.25)
    assert model.last_shift == pytest.approx(0.25, abs=0.01)


@pytest.mark.usefixtures("right_grader")
def test_what_a_shift_leaves_under_half_an_item_is_no_pass() -> None:
    """A family far below the top tier reading a hundredth over the call's lift: that
    residue is the shift's error, and the logistic's tail would read it as skill."""
    cat = _wide()
    scores = np.full(cat.n_families, 0.25)
    scores[0] = 0.26  # the lift and a hundredth: 0.08 of an item of 8
    scores[1] = 0.25 + 1 / 8  # the lift and one item passed
    beliefs, reach = [], []
    for residue in (True, False):
        model = SkillModel(cat)
        model._shift_residue = residue
        _train_all(model, cat, tier=0, k=0, n=16)  # out of reach: fails tier 0
        for _ in range(4):
            _probe_all(model, cat, tier=3, scores=scores)
        assert model.last_shift == pytest.approx(0.25, abs=0.01)
        beliefs.append(model.belief()[0])
        reach.append(model.out_of_reach()[0])
    kept, plain = beliefs
    assert kept[0] == pytest.approx(kept[2])  # read as the families that read the lift
    assert plain[0] > kept[0] + 0.5  # without the rule the residue lifts the belief ...
    assert reach == [True, False]  # ... out of reach
    assert kept[1] > kept[2] + 0.5  # a whole item passed is still a pass


def test_only_the_surely_failing_readings_say_what_the_shift_is() -> None:
    """Families that may pass the tier read what they read; the shift comes from the ones
    the belief says cannot, and is taken off every reading."""
    cat = _wide(48)
    model = SkillModel(cat)
    learned = np.arange(cat.n_families) < 16
    for _ in range(3):
        _probe_all(model, cat, tier=3, scores=np.where(learned, 1.0, 0.0))
    _probe_all(model, cat, tier=3, scores=np.where(learned, 1.0, 0.125))
    assert model.last_shift == pytest.approx(0.125, abs=0.01)


def test_a_reading_clipped_at_one_is_taken_at_the_middle_of_what_it_allows() -> None:
    """Under a lift of 0.2 a reading of 1 says only a rate between 0.8 and 1."""
    model = SkillModel(_catalog())
    got = model._unshifted(np.array([0.0, 0.5, 1.0]), 0.2, np.full(3, 10.0))
    assert got.tolist() == pytest.approx([0.0, 0.3, 0.9])


def test_the_first_training_episodes_are_kept_apart_at_any_tier() -> None:
    cat = Catalog.synthetic(n_domains=1, families_per_domain=2, n_tiers=4)
    model = SkillModel(cat)
    _train(model, cat, family=0, tier=0, k=5, n=10)
    _train(model, cat, family=0, tier=3, k=10, n=10)  # 6 of these fill the first 16
    _train(model, cat, family=0, tier=1, k=0, n=10)  # after them: not counted
    np.testing.assert_array_equal(model.top_tier.first[:, 0], [11.0, 16.0])
    assert model.top_tier.first[:, 1].tolist() == [0.0, 0.0]  # never trained


def _coin_and_rule(chance: float) -> SkillModel:
    """Three families: 0 passes half its episodes from the start, 1 starts at 0 and
    passes half later, 2 passes half from the start but is probed on 8 top-tier items
    only; the top tier of 0 and 1 is probed on 32 items at half."""
    cat = Catalog.synthetic(n_domains=1, families_per_domain=3, n_tiers=4, chance_success=chance)
    model = SkillModel(cat)
    _train(model, cat, family=0, tier=1, k=8, n=16)
    _train(model, cat, family=1, tier=1, k=0, n=16)
    _train(model, cat, family=1, tier=1, k=8, n=16)
    _train(model, cat, family=2, tier=1, k=8, n=16)
    model.observe_probes(np.array([0, 1, 2]), np.full(3, 3), np.full(3, 0.5), np.array([32, 32, 8]))
    return model


@pytest.mark.usefixtures("right_grader")
def test_coin_like_reads_a_family_above_chance_from_its_first_episodes_and_at_its_top() -> None:
    """A coin flip passes above chance from its first episode and at its top tier; a
    family that started at chance (a network finding a rule) is not coin-like whatever it
    passes later, nor is one whose top tier has too few probe items."""
    model = _coin_and_rule(chance=0.0)
    assert model.top_tier.coin_like(3.0, np.arange(3)).tolist() == [True, False, False]
    assert model.top_tier.coin_like(3.0, np.array([2, 0])).tolist() == [False, True]
    at_chance = _coin_and_rule(chance=0.5)  # half is the chance level: nothing above it
    assert not at_chance.top_tier.coin_like(3.0, np.arange(3)).any()


@pytest.mark.usefixtures("right_grader")
def test_a_coin_like_family_reads_flat_on_less_information() -> None:
    """A slope test reading 5 standard errors flat on 0.4 units of information (under the
    0.5 any family needs) reads flat for the coin-like family only, and for none with the
    rule switched off (the ablation); on 0.6 units it reads flat for every family."""
    model = _coin_and_rule(chance=0.0)
    info = 0.4
    model.slope_test.terms[:] = np.array([[0.0], [-5.0 * np.sqrt(info)], [1.0], [info], [0.0]])
    assert model.flat().tolist() == [True, False, False]
    families = np.array([1, 0])
    z, got = model._slope_z(families)
    assert model._reads_flat(z, got, families).tolist() == [False, True]
    model._coin_info = False
    assert not model.flat().any()
    info = 0.6
    model.slope_test.terms[:] = np.array([[0.0], [-5.0 * np.sqrt(info)], [1.0], [info], [0.0]])
    assert model.flat().all()


def test_a_stalled_coin_like_family_of_one_tier_reads_flat() -> None:
    """One tier has no slope to test, so a coin flip there is found by its stall: once
    stalled, a family that passed above chance from its start and at its probes reads
    flat (no stalled spare share); one without the probes to say so stays stalled, and
    with the rule off (the ablation) both do. A family of several tiers is not touched."""
    cat = Catalog.synthetic(n_domains=1, families_per_domain=7, n_tiers=1)
    model = SkillModel(cat)
    for step in range(10):  # 160 episodes each
        for f in range(3):  # a coin at 50 %: no rise, under tier 1
            _train(model, cat, family=f, tier=0, k=8, n=16)
        for f in range(3, 7):  # learners, rising: the typical family's rise
            _train(model, cat, family=f, tier=0, k=min(16, 1 + 2 * step), n=16)
    # families 0 and 1 probed at their (only) tier, reading 50 % on 32 items; 2 never
    model.observe_probes(
        np.array([0, 1]), np.zeros(2, dtype=np.int64), np.full(2, 0.5), np.full(2, 32)
    )
    assert model.stalled().tolist() == [True] * 3 + [False] * 4
    assert model.flat().tolist() == [True, True, False] + [False] * 4
    assert model.idle()[:3].all()
    model._stalled_single = False
    assert not model.flat().any()
    ladder = SkillModel(_catalog(tiers=2))  # no family of one tier: nothing read
    assert ladder._single.size == 0 and not ladder.flat().any()


@pytest.mark.parametrize("chance", [0.25, 0.5])
def test_a_top_tier_passed_by_every_item_reads_mastered_where_answers_can_be_guessed(
    chance: float,
) -> None:
    """Above chance the likelihood of passes far above the belief is flat: Newton steps
    from the prior crawl along it (10 rounds of 8 of 8 at the top tier at chance 0.25, 28
    at chance 0.5, 2 at chance 0); the posterior's moments on a grid read it as at
    chance 0."""
    cat = replace(_wide(20), chance_success=np.full(20, chance))
    readings = np.full(20, round(chance * 8) / 8)  # the rest pass at chance
    readings[0] = 1.0
    rounds: dict[bool, int | None] = {}
    for match in (True, False):
        model = SkillModel(cat)
        model._match = match
        rounds[match] = None
        for r in range(1, 6):
            _probe_all(model, cat, tier=3, scores=readings)
            if model.mastered()[0]:
                rounds[match] = r
                break
    assert rounds[True] is not None and rounds[True] <= 2
    assert rounds[False] is None


def test_a_lucky_reading_at_chance_moves_the_belief_little_and_keeps_it_wide() -> None:
    """5 of 8 where half pass by guessing says little: the posterior's mean, not the peak
    of a flat likelihood far above the prior."""
    cat = replace(_wide(20), chance_success=np.full(20, 0.5))
    model = SkillModel(cat)
    readings = np.full(20, 0.5)
    readings[0] = 5 / 8
    _probe_all(model, cat, tier=3, scores=readings)
    mu, var = model.belief()
    assert abs(mu[0] - mu[1]) < 0.5
    assert var[0] > 1.0


@pytest.mark.usefixtures("right_grader")
def test_families_without_a_chance_level_update_as_before() -> None:
    cat = _wide(20)
    chance = np.where(np.arange(20) < 10, 0.25, 0.0)
    mixed, plain = SkillModel(replace(cat, chance_success=chance)), SkillModel(cat)
    readings = np.linspace(0.0, 1.0, 20)
    for m in (mixed, plain):
        m._shift = False  # the update alone (the families' chance also moves the shift)
        _probe_all(m, cat, tier=2, scores=readings)
    np.testing.assert_array_equal(mixed.probe_mu[10:], plain.probe_mu[10:])
    assert not np.allclose(mixed.probe_mu[:10], plain.probe_mu[:10])


def _nine_climb(
    model: SkillModel, cat: Catalog, still: tuple[int, int], chance: float = 0.0
) -> None:
    """Six rounds of 8 episodes a family: 0-8 climb a tier per 16 episodes from half a tier
    under tier 0, trained at the tier nearest their skill and passing there as a slope of 3
    logits a tier above ``chance``; family 9 trains at tier ``still[0]`` and passes
    ``still[1]`` of 8 every round, however much it trains."""
    skill = np.linspace(-0.5, 0.0, cat.n_families)
    top = int(cat.n_tiers.max()) - 1
    for _ in range(6):
        for f in range(9):
            tier = int(np.clip(np.rint(skill[f]), 0, top))
            p = chance + (1.0 - chance) / (1.0 + np.exp(-3.0 * (skill[f] - tier)))
            _train(model, cat, family=f, tier=tier, k=round(8 * p), n=8)
        _train(model, cat, family=9, tier=still[0], k=still[1], n=8)
        skill[:9] += 0.5


def test_a_guessable_family_that_never_rises_is_stalled_once_the_typical_family_rose_a_tier() -> (
    None
):
    # Guesses pass at every skill, so no outcome confirms family 9 out of reach this soon;
    # within 48 episodes (patience is 128) the others rose three tiers and it rose none.
    cat = Catalog.synthetic(n_domains=2, families_per_domain=5, n_tiers=4, chance_success=0.5)
    model = SkillModel(cat)
    _nine_climb(model, cat, still=(0, 4), chance=0.5)  # 9 passes at chance: a yes/no answer
    assert model.episodes[9] == 48 and not model.out_of_reach()[9]
    stalled = model.stalled()
    assert stalled[9] and model.stalled_early()[9]
    assert not stalled[:9].any()
    later = SkillModel(cat)  # the window off: judged at patience's 128 episodes only
    later._stall_span = 0.0
    _nine_climb(later, cat, still=(0, 4), chance=0.5)
    assert not later.stalled().any()


def test_a_family_that_cannot_be_guessed_is_not_judged_early() -> None:
    # At chance 0 out_of_reach speaks early, and a family that settled under the prior
    # (passing 1 of 8 at tier 0, a slow starter) is left to patience's test, while the
    # others rose: its fall from the prior is not read as a stall.
    cat = _catalog()
    model = SkillModel(cat)
    _nine_climb(model, cat, still=(0, 1))
    assert model.progress()[9] < 0.0 and not model.out_of_reach()[9]
    assert not model.stalled()[9]
    model._chance = np.full(cat.n_families, 0.5)  # the same beliefs, guessable: stalled
    model._changed()
    assert model.stalled()[9] and model.stalled_early()[9]


def _stalled_early_and_on_patience(early_cap: float | None = None) -> Scheduler:
    """Guessable families (chance 0.5): 0 and 1 fell from the prior and did not rise, 0
    in 40 episodes (the early test) and 1 in 200 (patience's); 2-9 rise a tier per 20."""
    cat = Catalog.synthetic(n_domains=2, families_per_domain=5, n_tiers=4, chance_success=0.5)
    sched = Scheduler(cat, seed=0)
    if early_cap is not None:
        sched.pipeline.early_stall_cap = early_cap
    sk = sched.skill
    mu, slow = np.full(10, 2.0), np.full(10, 1.0)
    mu[[0, 1]], slow[[0, 1]] = -0.5, 0.0
    episodes = np.full(10, 40.0)
    episodes[1] = 200.0
    state = sk.state_dict()
    state.update(
        train_mu=mu, probe_mu=mu, slow_mu=slow, train_var=np.full(10, 0.05),
        probe_var=np.full(10, 0.05), episodes=episodes, built=episodes,
    )  # fmt: skip
    sk.load_state_dict(state)
    return sched


def test_a_family_stalled_early_keeps_a_quarter_share_and_one_stalled_on_patience_a_tenth() -> None:
    """So soon a slow starter looks like a family that cannot learn: the early stall holds
    a guessable family to a quarter of a uniform share, not ``stalled_weight``'s tenth."""
    sched = _stalled_early_and_on_patience()
    sk, n = sched.skill, sched.catalog.n_families
    np.testing.assert_array_equal(sk.stalled(), np.arange(10) < 2)
    np.testing.assert_array_equal(sk.stalled_early(), np.arange(10) == 0)
    family = sched.weights().family
    assert family[0] == pytest.approx(0.25 / n)
    assert family[1] == pytest.approx(sched.config.skill.stalled_weight / n)
    idle = [e for e in sched.drain_events() if e.kind == "idle"]
    assert [e.payload["reason"] for e in idle] == ["stalled", "stalled"]
    # bench/quality.py's no_early_cap: held as any stalled family
    ablated = _stalled_early_and_on_patience(early_cap=0.0)
    assert ablated.weights().family[0] == pytest.approx(sched.config.skill.stalled_weight / n)


def test_a_coin_flip_of_one_tier_is_stalled_early_among_learners() -> None:
    # At one tier no contrast tests a slope: a coin flip (family 9, 4 of 8 every time)
    # is found only by a stall. Families 0-8 climb a tier per 16 episodes.
    cat = Catalog.synthetic(n_domains=2, families_per_domain=5, n_tiers=1)
    model = SkillModel(cat)
    _nine_climb(model, cat, still=(0, 4))  # 9 a coin flip: 4 of 8 every time
    if model.progress()[9] >= 0.0:  # a coin flip's belief wanders: judged once it falls
        _train(model, cat, family=9, tier=0, k=3, n=8)
    assert model.stalled_early()[9]
    assert not model.stalled()[:9].any()
    model._early_single = False  # bench/quality.py's no_early_single: patience's test only
    assert not model.stalled()[9]


def test_a_family_of_one_tier_not_risen_by_the_stall_gain_is_stalled_early() -> None:
    """A coin flip's belief wanders above its slow average as often as below: judged on no
    rise at all, its early stall came and went, and each time it went the family took an
    unflagged share. At one tier it is judged on patience's gain (a quarter tier here):
    risen 0.12 it is stalled, risen 0.26 it is not; with the rule off (bench/quality.py's
    no_single_gain), a rise of 0.12 clears it."""
    cat = Catalog.synthetic(n_domains=2, families_per_domain=5, n_tiers=1)
    model = SkillModel(cat)
    _nine_climb(model, cat, still=(0, 4))  # 9 a coin flip: 4 of 8 every time
    risen = copy.deepcopy(model)
    _train(model, cat, family=9, tier=0, k=5, n=8)
    assert 0.0 < model.progress()[9] < 0.25
    assert model.stalled_early()[9] and not model.stalled()[:9].any()
    model._single_gain = False
    assert not model.stalled_early()[9]
    _train(risen, cat, family=9, tier=0, k=6, n=8)
    assert risen.progress()[9] > 0.25
    assert not risen.stalled_early()[9]
