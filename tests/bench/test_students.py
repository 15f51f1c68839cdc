"""bench/_students.py's group student: it learns only from groups that mix passes and
fails, its trap families behave as their kinds say, and its oracle trains only what is left
to learn; and the noisy verifier grades any student wrong at its share, either way."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from _runners import batch_of  # noqa: E402
from _students import GroupStudent, make_student, scored, top_score  # noqa: E402

from domains import Catalog  # noqa: E402
from scheduler import Status  # noqa: E402
from scheduler.backends import FamilyKind  # noqa: E402


def _student(**config: object) -> GroupStudent:
    cat = Catalog.synthetic(n_domains=2, families_per_domain=10, n_tiers=4)
    return GroupStudent(cat, seed=0, **config)


def _train(student: GroupStudent, family: int, tier: int, episodes: int) -> None:
    arm = np.full(episodes, student.catalog.arm_start[family] + tier, dtype=np.int64)
    student.run(batch_of(student.catalog, 0, arm))


def test_a_family_learns_where_its_groups_mix_and_not_where_every_rollout_fails() -> None:
    # tiers 0, 1, 2, 3 in skill units and every skill at 0: tier 0 passes a third of the
    # time, tier 3 (three units above) never at this steepness
    student = _student(
        share_impossible=0.0,
        share_noise=0.0,
        share_mastered=0.0,
        gap=(1.0, 1.0),
        start=(0.0, 0.0),
        sharpness=8.0,
        share_slow_click=0.0,
    )
    _train(student, 0, tier=3, episodes=64)
    assert student._skill[0] == 0.0, "groups that never pass taught something"
    _train(student, 0, tier=0, episodes=64)
    assert student._skill[0] > 0.1


def test_trap_families_behave_as_their_kind_says() -> None:
    student = _student(share_impossible=0.2, share_noise=0.2, share_hackable=0.2, hack_rate=0.5)
    cat = student.catalog
    kind = student.kind
    noise = np.flatnonzero(kind == FamilyKind.NOISE)
    impossible = np.flatnonzero(kind == FamilyKind.IMPOSSIBLE)
    hackable = np.flatnonzero(kind == FamilyKind.HACKABLE)
    arms = np.arange(cat.n_arms)
    p_probe = student._p(arms, train=False)
    np.testing.assert_allclose(p_probe[np.isin(cat.family_of_arm, noise)], 0.5)
    assert (p_probe[np.isin(cat.family_of_arm, impossible)] == 0.0).all()
    for f in hackable:
        _train(student, int(f), tier=0, episodes=16)
    hack_arms = cat.arm_start[hackable + 1] - 1  # their top tiers, over every start skill
    train = student._p(hack_arms, train=True)
    assert (train > student._p(hack_arms, train=False) + 0.5).all()
    assert not scored(student)[np.concatenate([noise, impossible, hackable])].any()


def test_the_oracle_trains_only_learnable_families_not_yet_at_their_top() -> None:
    student = _student()
    rng = np.random.default_rng(0)
    arms = student.oracle_arms(512, rng)
    fam = student.catalog.family_of_arm[arms]
    assert scored(student)[fam].all()
    assert (top_score(student)[fam] < 0.97).all()


def test_a_noisy_verifier_flips_its_share_of_grades_either_way_and_teaches_the_same() -> None:
    cat = Catalog.synthetic(n_domains=2, families_per_domain=10, n_tiers=4)
    clean = make_student("ladder", cat, 3)
    noisy = make_student("ladder", cat, 3, verifier_noise=0.1)
    kind = noisy.kind
    impossible = np.flatnonzero(kind == FamilyKind.IMPOSSIBLE)
    mastered = np.flatnonzero(kind == FamilyKind.MASTERED)
    assert impossible.size and mastered.size
    # training: an impossible family passes about a tenth, a mastered one fails as often
    for fams, want in ((impossible, 0.1), (mastered, 0.9)):
        arm = np.repeat(cat.arm_start[fams + 1] - 1, 2000)
        out = noisy.run(batch_of(cat, 0, arm))
        clean.run(batch_of(cat, 0, arm))
        assert abs(out.success.mean() - want) < 0.02
        np.testing.assert_array_equal(out.status == int(Status.OK), out.success > 0.5)
        low, high = cat.reward_low[fams[0]], cat.reward_high[fams[0]]
        assert set(np.unique(out.reward)) <= {low, high}
    # the student learned exactly as the clean one did from the same batches
    np.testing.assert_array_equal(noisy.true_arm(), clean.true_arm())
    # probes: the same share, read from items
    tiers = cat.n_tiers[impossible] - 1
    reads = np.concatenate([noisy.probe(impossible, tiers, 50) for _ in range(40)])
    assert abs(reads.mean() - 0.1) < 0.02
    assert np.allclose(reads * 50, np.rint(reads * 50))
