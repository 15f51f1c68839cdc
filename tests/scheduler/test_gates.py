"""Gates: flagged families' caps, and who takes a spare share when every family is flagged."""

from __future__ import annotations

import numpy as np
import pytest

from domains import Catalog
from policies import SkillConfig
from scheduler import Scheduler
from scheduler._breakers import CircuitBreakers
from scheduler._flags import Idle
from scheduler._gates import Gates


def _gates(catalog: Catalog) -> Gates:
    return Gates(catalog, CircuitBreakers(catalog), max_repeats=None, epoch_episodes=100_000)


def test_when_every_family_is_flagged_the_first_ones_take_the_spare_share() -> None:
    cat = Catalog.synthetic(1, 4, 2)
    gates = _gates(cat)
    caps = np.ones(4)
    flag_cap = np.full(4, 0.05)  # every family flagged: the caps hold 0.2 of a batch
    first = np.array([True, True, False, False])  # e.g. mastered, or stalled
    held = gates.hold_flagged(caps, flag_cap, first=first)
    assert held.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(held[2:], 0.05)  # the others stay at their caps ...
    np.testing.assert_allclose(held[:2], 0.45)  # ... and the first ones fill the rest
    even = gates.hold_flagged(caps, flag_cap)  # without an order: raised evenly
    np.testing.assert_allclose(even, 0.25)


def test_the_first_ones_take_the_spare_share_by_their_weights() -> None:
    """Weights split the spare share; a first family of weight 0 (a mastered family that
    no training built) keeps its cap while the others can take the rest."""
    cat = Catalog.synthetic(1, 4, 2)
    gates = _gates(cat)
    caps = np.ones(4)
    flag_cap = np.full(4, 0.05)
    first = np.array([3.0, 1.0, 0.0, 0.0])
    held = gates.hold_flagged(caps, flag_cap, first=first)
    assert held.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(held[2:], 0.05)
    np.testing.assert_allclose(held[:2], [0.05 + 0.6, 0.05 + 0.2])  # 0.8 spare, 3 : 1
    capped = gates.hold_flagged(np.array([0.3, 1.0, 1.0, 1.0]), flag_cap, first=first)
    assert capped[0] == pytest.approx(0.3)  # at its own ceiling: the rest goes on ...
    assert capped[1] == pytest.approx(0.6)  # ... to the other weighted one
    np.testing.assert_allclose(capped[2:], 0.05)


def test_the_others_are_raised_only_when_the_first_ones_cannot_fill_a_batch() -> None:
    cat = Catalog.synthetic(1, 4, 2)
    gates = _gates(cat)
    caps = np.array([0.3, 1.0, 1.0, 1.0])
    flag_cap = np.array([0.01, 0.05, 0.05, 0.05])
    first = np.array([True, False, False, False])
    held = gates.hold_flagged(caps, flag_cap, first=first)
    assert held.sum() == pytest.approx(1.0)
    assert held[0] == pytest.approx(0.3)  # the first one at its own ceiling
    np.testing.assert_allclose(held[1:], 0.7 / 3)  # the rest share what is left evenly


def test_an_unflagged_family_is_held_to_the_ceiling_while_others_can_take_the_rest() -> None:
    cat = Catalog.synthetic(1, 10, 2)
    gates = _gates(cat)
    caps = np.ones(10)
    flag_cap = np.full(10, np.inf)
    flag_cap[2:] = 0.5  # eight flagged families whose caps can hold the rest
    held = gates.hold_flagged(caps, flag_cap, ceiling=0.2)
    np.testing.assert_allclose(held[:2], 0.2)
    np.testing.assert_allclose(held[2:], 0.5)
    assert gates.hold_flagged(caps, np.full(10, np.inf), ceiling=0.2).tolist() == [0.2] * 10


def test_the_ceiling_is_lifted_after_the_first_flagged_families_but_before_the_others() -> None:
    cat = Catalog.synthetic(1, 4, 2)
    gates = _gates(cat)
    caps = np.array([1.0, 0.2, 1.0, 1.0])
    flag_cap = np.array([np.inf, 0.05, 0.05, 0.05])  # one unflagged, three flagged
    first = np.array([False, True, False, False])
    held = gates.hold_flagged(caps, flag_cap, first=first, ceiling=0.1)
    assert held.sum() == pytest.approx(1.0)
    assert held[1] == pytest.approx(0.2)  # the first one, raised to its own cap
    np.testing.assert_allclose(held[2:], 0.05)  # the other flagged ones stay held
    assert held[0] == pytest.approx(0.7)  # the unflagged one takes the rest, past 0.1


def test_the_default_scheduler_holds_the_last_unflagged_families_to_its_ceiling() -> None:
    from scheduler import Scheduler

    cat = Catalog.synthetic(4, 25, 3)  # 100 families
    sched = Scheduler(cat, seed=0)
    sched.flags.refresh(sched.skill, 0)  # read once; the skill model then stays unchanged
    mastered = np.ones(cat.n_families, dtype=bool)
    mastered[[7, 42]] = False  # every family mastered but two
    sched.flags.flags[0] = mastered
    sched.pipeline.invalidate()
    family = sched.weights().family
    ceiling = sched.config.skill.max_weight / cat.n_families
    assert ceiling < 0.475  # the ceiling binds: without it each would take 0.475
    np.testing.assert_allclose(family[[7, 42]], ceiling)
    assert family.sum() == pytest.approx(1.0)
    assert (family[mastered] > 0.05 / cat.n_families).all()  # the mastered take the rest


def _every_family_flagged(stalled_spare: float | None = None) -> np.ndarray:
    """The family shares of a scheduler whose families 0 and 1 are mastered (each built
    alike, by more than a trial) and 2 and 3 stalled: every family is flagged, so the
    caps leave a spare share."""
    cat = Catalog.synthetic(1, 4, 2)
    sched = Scheduler(cat, seed=0)
    board = sched.flags
    idle = next(d for d in board.detectors if isinstance(d, Idle))
    names = [d.name for d in board.detectors]
    board.flags[:] = False
    board.flags[names.index("mastered"), :2] = True
    board.flags[names.index("idle"), 2:] = True
    idle._codes = np.array([0, 0, 3, 3], dtype=np.int8)  # 3: stalled
    assert board.stalled().tolist() == [False, False, True, True]
    if stalled_spare is not None:
        sched.pipeline.stalled_spare = stalled_spare
    sched.pipeline.compute(
        np.ones(cat.n_arms), np.zeros(4, dtype=np.int64), board, sched.evidence,
        sched.costs.cost, 1, built=np.full(4, 100.0),
    )  # fmt: skip
    assert sched.pipeline.weights is not None
    return sched.pipeline.weights.family


def test_a_stalled_family_takes_less_of_a_spare_share_than_a_mastered_one() -> None:
    """A stall is weaker evidence of something left to learn than mastery is of something
    to keep (and a coin flip on one tier is found only by its stall): the stalled take
    some of the spare share, about half of a mastered family's, though their cap is twice
    theirs."""
    family = _every_family_flagged()
    assert family.sum() == pytest.approx(1.0)
    mastered, stalled = family[:2], family[2:]
    np.testing.assert_allclose(mastered[0], mastered[1])
    assert stalled.max() < 0.6 * mastered.min()
    assert stalled.min() > SkillConfig().stalled_weight / 4  # above its cap: it takes some
    as_mastered = _every_family_flagged(stalled_spare=1.0)  # the ablation: by cap alone
    assert as_mastered[2:].min() > as_mastered[:2].max()


def _two_mastered(built: np.ndarray, built_cap: bool = True) -> np.ndarray:
    """The family shares of 100 families, of which 0 and 1 are mastered and the rest
    unflagged (the caps bind: no spare share), the mastered built by ``built``."""
    cat = Catalog.synthetic(4, 25, 3)
    sched = Scheduler(cat, seed=0)
    board = sched.flags
    board.flags[:] = False
    board.flags[[d.name for d in board.detectors].index("mastered"), :2] = True
    sched.pipeline.built_cap = built_cap
    full = np.zeros(cat.n_families)
    full[:2] = built
    sched.pipeline.compute(
        np.ones(cat.n_arms), np.zeros(cat.n_families, dtype=np.int64), board, sched.evidence,
        sched.costs.cost, 1, built=full,
    )  # fmt: skip
    assert sched.pipeline.weights is not None
    return sched.pipeline.weights.family


def test_a_mastered_family_keeps_practice_in_proportion_to_the_training_that_built_it() -> None:
    """Practice keeps what training built: a family that came mastered (no training
    built it) keeps a trickle of the mastered cap, one mastered after a trial's worth of
    training keeps the whole cap, and one between them its share of a trial."""
    sk = SkillConfig()
    cap = sk.mastered_weight / 100
    family = _two_mastered(np.array([0.0, 4 * sk.trial]))
    assert family[1] == pytest.approx(cap)
    assert family[0] == pytest.approx(cap / sk.trial)  # counted as one episode's worth
    half = _two_mastered(np.array([sk.trial / 2, sk.trial]))
    assert half[0] == pytest.approx(cap / 2)
    assert half[1] == pytest.approx(cap)
    assert family.sum() == pytest.approx(1.0)
    even = _two_mastered(np.array([0.0, 4 * sk.trial]), built_cap=False)  # the ablation
    np.testing.assert_allclose(even[:2], cap)
