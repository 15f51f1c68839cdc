"""Families whose tiers are separate skills (``tier_mode: separate``): every tier trained at
once, each by its own weight; mastered arm by arm; one curve point per family."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from domains import Catalog, ManifestError, load_catalog
from policies import ArmView, Stateless
from scheduler import Scheduler, SchedulerConfig

N_TIERS = 4


def _separate(n_families: int = 2, **kw: Any) -> Catalog:
    return Catalog.synthetic(1, n_families, N_TIERS, tier_mode="separate", **kw)


def _tier_share(sched: Scheduler, family: int, n: int = 40_000) -> npt.NDArray[np.float64]:
    batch = sched.next_batch(n)
    tiers = batch.tier[batch.family == family]
    return np.bincount(tiers, minlength=N_TIERS) / tiers.size


def _probe(sched: Scheduler, family: int, scores: list[float], n: int = 64) -> None:
    sched.record_probes([family] * N_TIERS, scores, tiers=list(range(N_TIERS)), n=[n] * N_TIERS)


class ArmWeights(Stateless):
    """A policy with fixed per-arm weights (the test sets them)."""

    def __init__(self, weights: npt.NDArray[np.float64]) -> None:
        self.arm_weights = weights

    def weights(self, view: ArmView, state: dict[str, Any]) -> npt.NDArray[np.float64]:
        return self.arm_weights


def test_a_manifest_declares_separate_tiers(tmp_path: Path) -> None:
    path = tmp_path / "skills.yaml"
    path.write_text(
        "domains:\n"
        "  - name: spreadsheets\n"
        "    families:\n"
        "      - name: formulas\n"
        "        environment: sheet\n"
        "        verification: cell values\n"
        "        tiers: [lookup, pivot, macro]\n"
        "        tier_mode: separate\n"
        "        variants: {count: 10}\n"
        "      - name: charts\n"
        "        environment: sheet\n"
        "        verification: image diff\n"
        "        tiers: 2\n"
        "        variants: {count: 10}\n"
    )
    cat = load_catalog(path)
    assert cat.tier_separate.tolist() == [True, False]
    text = path.read_text()
    path.write_text(text.replace("        tier_mode: separate\n", ""))
    assert load_catalog(path).fingerprint != cat.fingerprint  # a resume notices the change
    path.write_text(text.replace("tier_mode: separate", "tier_mode: rungs"))
    with pytest.raises(ManifestError) as info:
        load_catalog(path)
    message = str(info.value)
    assert "skills.yaml:8" in message and "tier_mode" in message


def test_every_tier_is_drawn_and_none_is_climbed() -> None:
    cat = _separate()
    sched = Scheduler(cat, "uniform", seed=0)
    for _ in range(30):  # perfect outcomes: a ladder would have been promoted
        batch = sched.next_batch(64)
        ones = np.ones(len(batch))
        sched.report(batch, rewards=ones, success=ones)
    assert sched.tiers.tier.tolist() == [0, 0]
    assert not any(e.kind.startswith("tier_") for e in sched.drain_events())
    np.testing.assert_allclose(_tier_share(sched, 0), [0.25] * N_TIERS, atol=0.015)


def test_draws_follow_the_arms_weights_above_the_floor() -> None:
    cat = _separate(n_families=1)
    raw = np.array([1.0, 1.0, 1.0, 5.0])
    config = SchedulerConfig(exploration_floor=0.2)
    sched = Scheduler(cat, ArmWeights(raw), config=config)
    expected = 0.8 * raw / raw.sum() + 0.2 / N_TIERS
    np.testing.assert_allclose(_tier_share(sched, 0), expected, atol=0.01)
    np.testing.assert_allclose(sched.weights().tier, expected)


def test_mastered_arms_keep_a_little_and_a_forgotten_one_reopens() -> None:
    cat = _separate()
    sched = Scheduler(cat, "uniform", config=SchedulerConfig(exploration_floor=0.0))
    _probe(sched, 0, [1.0, 1.0, 0.3, 0.3])
    assert sched.evidence.arm_mastered().tolist() == [True, True, False, False] + [False] * N_TIERS
    kept = sched.config.tiers.practice_share / N_TIERS
    share = _tier_share(sched, 0)
    np.testing.assert_allclose(share, [kept, kept, 0.5 - kept, 0.5 - kept], atol=0.01)
    assert sched.mastered.tolist() == [False, False]
    # Every arm mastered: the family as a whole is flagged and capped like a ladder's top.
    _probe(sched, 0, [1.0] * N_TIERS)
    assert sched.mastered.tolist() == [True, False]
    cap = sched.config.tiers.mastered_weight / cat.n_families
    assert sched.weights().family[0] == pytest.approx(cap)
    # One tier slips: it is open again and takes the family's draws.
    _probe(sched, 0, [1.0, 0.4, 1.0, 1.0])
    assert sched.mastered.tolist() == [False, False]
    share = _tier_share(sched, 0)
    assert share[1] == pytest.approx(1.0 - 3 * kept, abs=0.01)


def test_the_family_curve_is_the_mean_of_its_tiers_and_probes_rotate() -> None:
    cat = _separate()
    sched = Scheduler(cat, "uniform")
    assert sched.probe_tier.tolist() == [0, 0]
    families, tiers = sched.probe_targets()
    assert sorted(zip(families.tolist(), tiers.tolist(), strict=True)) == [
        (f, t) for f in (0, 1) for t in range(N_TIERS)
    ]
    sched.record_probes([0, 0, 0], [0.2, 0.4, 0.9], tiers=[1, 2, 3], n=[10, 10, 10])
    assert sched.curves.count[:2].tolist() == [1, 0]  # one point for the family
    assert sched.curves.latest[0] == pytest.approx(0.5)  # the mean of the tiers probed
    assert sched.probe_tier.tolist() == [0, 0]  # tier 0 is the one never probed
    sched.record_probes([0], [0.5], tiers=[0], n=[10], step=1)
    assert sched.curves.count[:2].tolist() == [2, 0]
    assert sched.curves.latest[0] == pytest.approx(np.mean([0.5, 0.2, 0.4, 0.9]))
    assert sched.probe_tier.tolist()[0] == 1  # now the stalest (lowest first among ties)
    # The ProbeRunner's snapshot asks for the same tier, one per family and round.
    assert sched.probe_snapshot().tiers.tolist() == sched.probe_tier.tolist()


def test_a_probe_round_probes_every_tier_of_a_separate_family_once() -> None:
    cat = Catalog.synthetic(1, 2, N_TIERS)
    object.__setattr__(cat, "tier_separate", np.array([True, False]))
    sched = Scheduler(cat, "uniform")
    asked: list[tuple[int, int]] = []

    def probe(
        families: npt.NDArray[np.int64], tiers: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        asked.extend(zip(families.tolist(), tiers.tolist(), strict=True))
        return 0.1 + 0.2 * tiers, np.full(families.size, 20)

    points = sched.probe_round(probe)
    assert sorted(asked) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert sorted(points.families.tolist()) == [0, 0, 0, 0, 1]
    # One curve point per family: the separate one at the mean over its tiers.
    assert sched.curves.count[:2].tolist() == [1, 1]
    np.testing.assert_allclose(sched.curves.latest[:2], [0.4, 0.1])


def test_ladders_are_unchanged_beside_separate_families() -> None:
    """A catalog of ladders draws exactly what it drew before tier modes existed: the tier
    distribution is not consulted and no extra random number is taken."""
    ladder = Catalog.synthetic(1, 3, N_TIERS)
    a, b = Scheduler(ladder, "uniform", seed=4), Scheduler(ladder, "uniform", seed=4)
    np.testing.assert_allclose(a.weights().tier, 1.0 / N_TIERS)
    for _ in range(5):
        x, y = a.next_batch(50), b.next_batch(50)
        np.testing.assert_array_equal(x.arm, y.arm)
        np.testing.assert_array_equal(x.variant, y.variant)
