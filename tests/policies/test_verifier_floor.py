"""The grader's floor (policies/_verifier_floor.py): read only where the probes that surely
fail pass clearly more than a grader right 99 times in 100, from the first probe calls
only; and a skill model that reads it does not take a learner graded by a noisy verifier
for a coin flip, while one that does not does."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from scipy.special import expit

from domains import Catalog
from policies import SkillModel
from policies._slope_test import SlopeTest
from policies._verifier_floor import VerifierFloor


def test_no_floor_until_the_surely_failing_items_pass_clearly_more_than_one_in_a_hundred() -> None:
    floor = VerifierFloor()
    assert not floor.add(3.0, 600.0, 75.0, 72.0)  # 0.5 %: a belief that lags, not a grader
    assert floor.rate == 0.0
    floor = VerifierFloor()
    # 10 %, far from 1 %, and as many readings of 8 items empty as a grader's errors leave
    assert floor.add(60.0, 600.0, 75.0, 75.0 * 0.9**8)
    assert floor.rate == pytest.approx(0.1)
    assert floor.raw(0.0) == pytest.approx(0.1) and floor.raw(1.0) == pytest.approx(0.9)


def test_a_few_families_that_pass_part_of_a_tier_are_not_a_grader() -> None:
    # 10 % of the items pass, all of them in a fifth of the readings: four in five are
    # empty, where a grader wrong 10 % of the time leaves 43 % of readings of 8 items empty
    floor = VerifierFloor()
    floor.add(480.0, 4800.0, 600.0, 480.0)
    assert floor.rate == pytest.approx(1.0 - 0.8 ** (1 / 8))
    floor = VerifierFloor()
    floor.add(60.0, 600.0, 75.0, 74.0)  # one reading passes them all: no grader at all
    assert floor.rate == 0.0


def test_the_empty_readings_must_show_a_grader_clearly_too() -> None:
    # dev skill_1tier seed 5: slow starters at their only tier, 22 of 368 items passed and
    # 36 of 46 readings empty; the raw rate is clear of 1 %, the empty share's is not
    floor = VerifierFloor()
    floor.add(22.0, 368.0, 46.0, 36.0)
    assert floor.rate == 0.0
    floor = VerifierFloor()
    floor.add(220.0, 3680.0, 460.0, 360.0)  # the same shares, ten times the readings
    assert floor.rate == pytest.approx(1.0 - (36.0 / 46.0) ** (1 / 8))


def test_only_the_first_calls_with_enough_items_count() -> None:
    floor = VerifierFloor()
    assert not floor.add(1.0, 8.0, 1.0, 0.0)  # too few items to count as a call
    for _ in range(3):
        floor.add(30.0, 600.0, 75.0, 75.0 * 0.95**8)
    assert floor.rate == pytest.approx(0.05)
    assert not floor.add(600.0, 600.0, 75.0, 0.0)  # a later lift is a drift's, not the grader's
    assert floor.rate == pytest.approx(0.05)


def test_its_state_is_checked_and_an_older_state_reads_no_floor() -> None:
    floor = VerifierFloor()
    floor.add(60.0, 600.0, 75.0, 32.0)
    again = VerifierFloor()
    again.apply(again.checked(floor.state_dict()))
    assert again.rate == floor.rate > 0
    assert VerifierFloor().checked({}).tolist() == [0.0] * 7
    bad_states = (
        [1.0, 2.0],
        [3.0, 2.0, 1.0, 0.0, 1.0, 0.0, 0.0],
        [np.nan, 2.0, 1.0, 0.0, 1.0, 0.0, 0.0],
        [0.0, 2.0, 1.0, 0.0, -1.0, 0.0, 0.0],
        [0.0, 8.0, 1.0, 2.0, 1.0, 0.0, 0.0],
        [0.0, 8.0, 1.0, 1.0, 1.0, 5.0, 4.0],
    )
    for bad in bad_states:
        with pytest.raises(ValueError, match=r"skill\.verifier_floor"):
            again.checked({"verifier_floor": np.array(bad)})


def test_a_floor_ends_where_what_surely_passes_fails_less_often_than_it() -> None:
    grader = VerifierFloor()
    grader.add(60.0, 600.0, 75.0, 75.0 * 0.9**8)
    assert not grader.confirm(24.0, 240.0)  # a grader fails a tenth of what surely passes
    assert grader.rate == pytest.approx(0.1)
    start = VerifierFloor()
    start.add(60.0, 600.0, 75.0, 75.0 * 0.9**8)
    assert start.confirm(0.0, 240.0)  # none failed: a drift or a competent start
    assert start.rate == 0.0
    again = VerifierFloor()
    again.apply(again.checked(start.state_dict()))
    assert again.rate == 0.0
    assert not VerifierFloor().confirm(0.0, 240.0)  # nothing to confirm before a floor


def test_a_floor_is_not_ended_by_a_gap_within_both_rates_errors() -> None:
    # dev skill_judge seed 2, a grader wrong 5 % of the time: the floor read 0.059 from
    # 6,184 items, and 185 of 3,896 surely passing items failed (0.047). Against the floor
    # taken as exact that is 3.0 standard errors fewer, and the floor was ended; the two
    # rates' own errors make it 2.4
    floor = VerifierFloor()
    floor.add(374.0, 6184.0, 773.0, 476.0)
    assert floor.rate == pytest.approx(0.0588, abs=1e-4)
    assert not floor.confirm(185.0, 3896.0)
    assert floor.rate == pytest.approx(0.0588, abs=1e-4)
    assert floor.confirm(60.0, 3000.0)  # 245 of 6,896: 0.036, clearly fewer
    assert floor.rate == 0.0


def _graded_at_every_tier(model: SkillModel, rng: np.random.Generator, rounds: int) -> None:
    """Every family, a learner at skill 1.5 on the model's own curve, trained at each of
    its 4 tiers alike, graded by a verifier wrong 10 % of the time either way."""
    cat = model._catalog
    families = np.arange(cat.n_families)
    for _ in range(rounds):
        fam = np.repeat(families, 4)
        tiers = np.tile(np.arange(4), cat.n_families)
        p = 0.1 + 0.8 * expit(model.config.slope * (1.5 - tiers))
        success = (rng.random(fam.shape[0]) < p).astype(np.float64)
        model.observe_training(cat.arm_start[fam] + tiers, success)


def test_the_floor_is_read_from_probes_at_tiers_that_surely_fail() -> None:
    cat = Catalog.synthetic(n_domains=1, families_per_domain=40, n_tiers=6)
    rng = np.random.default_rng(1)
    families = np.arange(cat.n_families)
    top = (cat.n_tiers - 1).astype(np.int64)
    for noise, want in ((0.1, 0.1), (0.0, 0.0)):
        model = SkillModel(cat)
        for step in range(3):
            scores = rng.binomial(8, np.full(cat.n_families, noise)) / 8.0
            model.observe_probes(families, top, scores, np.full(cat.n_families, 8), step=step)
        assert model.verifier.rate == pytest.approx(want, abs=0.03)
        assert model.top_tier.floor == model.verifier.rate


def test_a_learner_graded_by_a_noisy_verifier_reads_flat_unless_the_floor_is_read() -> None:
    cat = Catalog.synthetic(n_domains=1, families_per_domain=40, n_tiers=4)
    plain, floored = SkillModel(cat), SkillModel(cat)
    floored.verifier.add(80.0, 800.0, 100.0, 100.0 * 0.9**8)  # a grader wrong 10 % of the time
    for model in (plain, floored):
        _graded_at_every_tier(model, np.random.default_rng(0), rounds=40)
    assert plain.flat().mean() > 0.3, "the failure this guards against no longer shows"
    assert floored.flat().mean() < 0.05
    z, _ = floored._slope_z()
    assert abs(float(np.median(z))) < 1.0
    mu, _ = floored.belief()
    assert abs(float(np.median(mu)) - 1.5) < 0.3


def test_a_lift_in_the_first_calls_reads_as_the_grader_and_a_later_one_as_a_drift() -> None:
    # at tiers that surely fail the two look alike; a drifting evaluator starts where it
    # was calibrated, so only the first three calls are read for the grader
    cat = Catalog.synthetic(n_domains=1, families_per_domain=40, n_tiers=6)
    families = np.arange(cat.n_families)
    top = (cat.n_tiers - 1).astype(np.int64)
    items = np.full(cat.n_families, 8)
    model = SkillModel(cat)
    for step in range(3):
        model.observe_probes(families, top, np.zeros(cat.n_families), items, step=step)
    assert model.verifier.rate == 0.0
    model.observe_probes(families, top, np.full(cat.n_families, 0.25), items, step=3)
    assert model.verifier.rate == 0.0
    assert model.last_shift == pytest.approx(0.25, abs=0.01)
    early = SkillModel(cat)
    early.observe_probes(families, top, np.full(cat.n_families, 0.25), items, step=0)
    assert early.verifier.rate == pytest.approx(0.25)
    assert early.last_shift == 0.0


def test_the_flatness_bars_are_lowered_by_what_the_grader_leaves_of_an_outcome() -> None:
    # a coin flip graded wrong a tenth of the time: each outcome tells (1 - 0.2)^2 of what a
    # right grader's would, so evidence that fades per episode reaches a right grader's
    # bar late; read at the lowered bar, more coin flips read flat by the same episode
    assert VerifierFloor().information == 1.0
    cat = Catalog.synthetic(n_domains=1, families_per_domain=40, n_tiers=4)
    families = np.arange(cat.n_families)
    flat = {}
    for lowered in (True, False):
        model = SkillModel(cat)
        model._floor_info = lowered
        model.verifier.add(80.0, 800.0, 100.0, 100.0 * 0.9**8)
        assert model.verifier.information == pytest.approx(0.8**2)
        rng = np.random.default_rng(0)
        for _ in range(150):
            tiers = model.draw_tiers(families, rng)
            coin = (rng.random(families.shape[0]) < 0.5).astype(np.float64)
            model.observe_training(cat.arm_start[families] + tiers, coin)
        flat[lowered] = float(model.flat().mean())
    assert flat[True] > flat[False] + 0.15, flat


def test_the_slope_tests_window_lengthens_by_what_the_grader_leaves_of_an_outcome() -> None:
    test = SlopeTest(1)
    test.terms[:] = 1.0
    e, ei = np.zeros(0), np.zeros(0, dtype=np.int64)  # no outcomes: the fade alone
    # two outcomes now tell what one did: twice the window
    test.add(np.array([0]), ei, ei, e, e, np.array([64.0]), np.zeros(1), e, e, 3.0, 0.5)
    assert test.terms[0, 0] == pytest.approx((1.0 - 1.0 / 128.0) ** 64)
    cat = Catalog.synthetic(n_domains=1, families_per_domain=40, n_tiers=4)
    families = np.arange(cat.n_families)
    top = (cat.n_tiers - 1).astype(np.int64)
    model = SkillModel(cat)
    assert np.all(model._information() == 1.0)  # a right grader, nothing guessable
    for step in range(3):  # a grader wrong a tenth of the time, at tiers surely failing
        scores = np.random.default_rng(step).binomial(8, np.full(cat.n_families, 0.1)) / 8
        model.observe_probes(families, top, scores, np.full(cat.n_families, 8), step=step)
    assert model.verifier.rate == pytest.approx(0.1, abs=0.03)
    assert np.allclose(model._information(), model.verifier.information)
    assert model.verifier.information == pytest.approx((1.0 - 2.0 * model.verifier.rate) ** 2)
    model._floor_info = False
    assert np.all(model._information() == 1.0)
    # answers that pass a quarter of the time by guessing: (1 - 0.25)^2 of what an outcome
    # tells, on top of the grader's share
    guessed = SkillModel(
        Catalog.synthetic(n_domains=1, families_per_domain=8, n_tiers=4, chance_success=0.25)
    )
    assert np.allclose(guessed._information(np.arange(3)), 0.75**2)
    guessed._chance_info = False
    assert guessed._information() == 1.0


def test_guessing_lowers_the_slope_tests_bars_but_not_its_window() -> None:
    # a plateau's flat evidence must fade as fast as an unguessable family's: with the
    # window 1 / (1 - 0.5)^2 = 4 times longer, the torch learner's parity families were
    # held long after they began to learn; the grader's share still lengthens it
    cat = Catalog.synthetic(n_domains=1, families_per_domain=8, n_tiers=4, chance_success=0.5)
    model = SkillModel(cat)
    arms = cat.arm_start[:-1]
    with mock.patch.object(model.slope_test, "add", wraps=model.slope_test.add) as add:
        model.observe_training(arms, np.ones(arms.shape[0]))
        assert [call.args[-1] for call in add.call_args_list] == [1.0]  # the window's share
        assert np.allclose(model._information(), 0.25)  # the bars count unguessable outcomes
        model.verifier.add(80.0, 800.0, 100.0, 100.0 * 0.9**8)  # a grader wrong a tenth
        model.observe_training(arms, np.ones(arms.shape[0]))
    share = add.call_args.args[-1]
    assert share == pytest.approx(model.verifier.information) and share < 1.0


def test_the_flatness_threshold_is_lowered_by_what_the_grader_leaves_of_an_outcome() -> None:
    # z -3 on a whole unit of information: short of a right grader's bar of -4; through a
    # grader wrong a tenth of the time a coin flip's z grows (1 - 0.2)^2 as fast with its
    # information, and the bar is -4 * 0.64 = -2.56
    cat = Catalog.synthetic(n_domains=1, families_per_domain=8, n_tiers=4)
    flat = {}
    for graded, scaled in ((False, True), (True, True), (True, False)):
        model = SkillModel(cat)
        model._floor_z = scaled
        if graded:
            model.verifier.add(80.0, 800.0, 100.0, 100.0 * 0.9**8)
        model.slope_test.terms[:] = 0.0
        model.slope_test.terms[1] = -3.0  # the slope's score
        model.slope_test.terms[2] = 1.0  # skill-skill information
        model.slope_test.terms[3] = 1.0  # slope-slope information
        assert np.allclose(model._slope_z()[0], -3.0)
        flat[(graded, scaled)] = bool(model.flat().all())
    assert flat == {(False, True): False, (True, True): True, (True, False): False}


def test_a_guessable_familys_slope_is_decided_on_less_information() -> None:
    # 0.4 units of information about the slope, none of it flat: under a right grader's
    # bar of 0.5 the test is undecided (contrast draws go on); at chance 0.25 each outcome
    # tells 0.5625 as much, and 0.4 is past the bar counted in unguessable outcomes
    cat = Catalog.synthetic(n_domains=1, families_per_domain=8, n_tiers=4, chance_success=0.25)
    decided = {}
    for counted in (True, False):
        model = SkillModel(cat)
        model._chance_info = counted
        model.slope_test.terms[:] = 0.0
        model.slope_test.terms[2] = 1.0  # skill-skill information
        model.slope_test.terms[3] = 0.4  # slope-slope information
        decided[counted] = not model.slope_undecided().any()
    assert decided == {True: True, False: False}


def test_one_pass_by_the_graders_error_does_not_lift_a_family_out_of_reach() -> None:
    """Under a floor, a low belief's posterior after one pass has a plateau and a peak far
    above it: Newton steps climbed to the peak (about -0.53, 0.30) and cut the spread; its
    moments stay low (``SkillModel._by_moments``)."""
    cat = Catalog.synthetic(n_domains=1, families_per_domain=4, n_tiers=4)
    beliefs = {}
    for moments in (True, False):
        model = SkillModel(cat)
        model.verifier.add(40.0, 800.0, 100.0, 100.0 * 0.95**8)  # wrong 5 % of the time
        assert model.verifier.rate == pytest.approx(0.05)
        model._floor_moments = moments
        model.train_mu[0], model.train_var[0] = -1.74, 1.3
        arm = cat.arm_start[0] + np.array([0, 1, 0, 1, 0])
        model.observe_training(arm, np.array([1.0, 0.0, 0.0, 0.0, 0.0]))
        beliefs[moments] = (float(model.train_mu[0]), float(model.train_var[0]))
    mu, var = beliefs[True]
    assert mu < -1.0 and var > 0.6  # the grid's moments (about -1.23, 0.77)
    newton_mu, newton_var = beliefs[False]
    assert newton_mu > -0.8 and newton_var < 0.4, "the failure this guards against no longer shows"
