"""Each family's top tier, counted on its own: a second road to mastery beside the belief.

A ladder whose middle tier, left out of practice, reads lower than its top fits no
one-slope belief, and the fused belief settles between them and never confirms a top tier
that passes (docs/policies.md). ``TopTierCounts`` keeps the top tier's recent training
episodes and probe items, passed and run, each fading per outcome, and the verdict read
from them: both pass at ``mastered_at``. ``SkillModel`` owns one and reads the verdict in
its mastered test. The verdict is kept per family and redone only for the families an
outcome at their top tier touched, so reading it costs one index.

It also keeps each family's first ``_START`` top-tier probe items apart (``start``), so
``risen`` can tell a family whose top tier has come to pass more often since then from one
that passes as it always did (a coin flip): the flatness test reads both as flat. And it
keeps the recent training under the top tier (``below``), so ``under_top`` can tell a
family whose held-out top tier fails where its easier tiers pass (a learner, whatever the
one-slope belief's test reads) from a coin flip, which passes its top tier as it passes
the rest. And it keeps each family's first ``_FIRST`` training episodes at any tier
(``first``), so ``coin_like`` can tell a family that passed above chance from its first
episode and still passes its top tier so (a coin flip) from one that started at chance
and passes every tier alike only while it learns (a network finding a rule).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._verifier_floor import graded

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# Each count fades by this per outcome (the last 32 or so count: a family left out of
# practice forgets), and the training passes at the lower bound of a two-sided 80 % Wilson
# interval (z = 1.2816)
_FADE = 1.0 - 1.0 / 32.0
_Z = 1.2815515655446004
_TRAIN, _PROBE = 0, 2  # rows of the passed counts; the counts run are the row after
_START = 64.0  # the first top-tier probe items of a family, kept apart (``start``)
_RECENT_MIN = 16.0  # recent probe items ``risen`` needs (and ``under_top``, of each side)
# ``under_top``: a hack passes the top tier in training where its probes fail, so a family
# whose top tier's own training (this many episodes at least) passes above its probes by
# this many standard errors is not taken for a learner
_HACK_MIN = 4.0
_HACK_Z = 2.0
# ``coin_like``: a family's first training episodes at any tier, kept apart (``first``)
_FIRST = 16.0


def _above(a: FloatArray, b: FloatArray, z: float) -> BoolArray:
    """bool: the pass rate of counts ``a`` (passed, run: [2, ...]) above that of ``b`` by
    ``z`` standard errors (each rate's own binomial error)."""
    pa = a[0] / np.maximum(a[1], 1e-12)
    pb = b[0] / np.maximum(b[1], 1e-12)
    var = pa * (1.0 - pa) / np.maximum(a[1], 1e-12) + pb * (1.0 - pb) / np.maximum(b[1], 1e-12)
    result: BoolArray = pa - pb > z * np.sqrt(var + 1e-12)
    return result


def _above_level(a: FloatArray, level: FloatArray, z: float) -> BoolArray:
    """bool: the pass rate of counts ``a`` (passed, run: [2, ...]) above ``level`` by ``z``
    standard errors (the rate's own binomial error)."""
    pa = a[0] / np.maximum(a[1], 1e-12)
    se = np.sqrt(pa * (1.0 - pa) / np.maximum(a[1], 1e-12))
    result: BoolArray = pa - level > z * se
    return result


def _fade_in(counts: FloatArray, family: IntArray, k: FloatArray, n: FloatArray) -> None:
    """In ``counts`` (passed, run: [2, n_families], a view is written through), fade these
    distinct families' counts by ``n`` outcomes and add ``k`` passed of ``n``."""
    both = counts[:, family] * _FADE**n
    both[0] += k
    both[1] += n
    counts[:, family] = both


class TopTierCounts:
    """float64 [4, n_families] ``counts``: the top tier's training episodes passed and run,
    and its probe items passed and probed, fading; bool [n_families] ``passed``: the
    verdict read from them; float64 [2, n_families] ``below``: the training episodes under
    the top tier, passed and run, fading; uint8 [2, n_families] ``first``: each family's
    first ``_FIRST`` training episodes, passed and run (whole episodes)."""

    FIRST = _FIRST  # the first training episodes kept (a migrated checkpoint counts them run)

    def __init__(self, catalog: Catalog, mastered_at: float) -> None:
        self._catalog = catalog
        self._top_arm = catalog.tier_of_arm == catalog.n_tiers[catalog.family_of_arm] - 1
        self._mastered_at = mastered_at
        self.floor = 0.0  # the grader's error rate (VerifierFloor): levels are read through it
        self.counts = np.zeros((4, catalog.n_families))
        self.passed = np.zeros(catalog.n_families, dtype=bool)
        # float64 [2, n_families]: the first _START top-tier probe items, passed and probed
        self.start = np.zeros((2, catalog.n_families))
        # float64 [2, n_families]: the training episodes under the top tier, passed and run
        self.below = np.zeros((2, catalog.n_families))
        # uint8 [2, n_families]: the first _FIRST training episodes, passed and run (whole
        # episodes: the state stays small)
        self.first = np.zeros((2, catalog.n_families), dtype=np.uint8)

    def trained(
        self,
        arms: IntArray,
        k: FloatArray,
        n: FloatArray,
        families: IntArray,
        owner: IntArray,
        per_family: FloatArray,
    ) -> None:
        """Training passes ``k`` of ``n`` at these distinct arms (one top arm a family, so
        the families at their top are distinct too), arm i of family
        ``families[owner[i]]`` (``distinct``'s grouping), ``per_family`` episodes each."""
        size = families.shape[0]
        new = self.first[1, families] < _FIRST
        if new.any():  # only families still within their first episodes are counted
            run = per_family[new]
            passed = np.bincount(owner, k, size).astype(np.float64, copy=False)[new]
            family = families[new]
            take = np.minimum(run, _FIRST - self.first[1, family])
            got = np.rint(passed * take / np.maximum(run, 1e-12))  # whole where run <= take
            self.first[0, family] += got.astype(np.uint8)
            self.first[1, family] += take.astype(np.uint8)
        at_top = self._top_arm[arms]
        if at_top.any():
            family = self._catalog.family_of_arm[arms[at_top]]
            self._add(_TRAIN, family, k[at_top], n[at_top])
        if not at_top.all():
            # weighted bincounts are float64 already: no copy, only the type said
            run = np.bincount(owner, np.where(at_top, 0.0, n), size).astype(np.float64, copy=False)
            passed = np.bincount(owner, np.where(at_top, 0.0, k), size).astype(
                np.float64, copy=False
            )
            hit = run > 0
            _fade_in(self.below, families[hit], passed[hit], run[hit])

    def probed(
        self, families: IntArray, owner: IntArray, tiers: IntArray, k: FloatArray, n: FloatArray
    ) -> None:
        """Probe items passed ``k`` of ``n`` at tiers ``tiers``, reading i of family
        ``families[owner[i]]`` (``distinct``'s grouping: repeats of a family are summed)."""
        at_top = tiers == self._catalog.n_tiers[families[owner]] - 1
        if not at_top.any():
            return
        size = families.shape[0]
        run = np.bincount(owner[at_top], weights=n[at_top], minlength=size)
        passed = np.bincount(owner[at_top], weights=k[at_top], minlength=size)
        hit = run > 0
        family = families[hit]
        k_hit = passed[hit].astype(np.float64)
        n_hit = run[hit].astype(np.float64)
        take = np.minimum(n_hit, np.maximum(_START - self.start[1, family], 0.0))
        self.start[0, family] += k_hit * take / n_hit
        self.start[1, family] += take
        self._add(_PROBE, family, k_hit, n_hit)

    def risen(self, z: float) -> BoolArray:
        """bool [n_families]: the recent top-tier probes (the fading counts) pass more often
        than the family's first ``_START`` probe items, by ``z`` standard errors. The
        evaluator keeps probing a family however small its share, so this has the power
        that a held family's trickle of training lacks."""
        recent = self.counts[_PROBE : _PROBE + 2]
        enough = (self.start[1] >= _START) & (recent[1] >= _RECENT_MIN)
        result: BoolArray = enough & _above(recent, self.start, z)
        return result

    def under_top(self, z: float, families: IntArray) -> BoolArray:
        """bool, one per family of ``families``: the recent top-tier probes pass less
        often than the recent training under the top tier, by ``z`` standard errors, and
        the top tier's own training does not pass where its probes fail (a hack passes
        every tier in training). The pass rate falls with the tier, so the family is
        learning, whatever the one-slope belief's test reads: a ladder whose tiers 0 and 1
        pass alike, trained there, reads flat to it. A coin flip passes its top tier as it
        passes the rest."""
        enough = (self.below[1, families] >= _RECENT_MIN) & (
            self.counts[_PROBE + 1, families] >= _RECENT_MIN
        )
        result: BoolArray = np.zeros(families.shape[0], dtype=bool)
        if enough.any():  # the tests on the families with the counts for them only
            read = families[enough]
            probe = self.counts[_PROBE : _PROBE + 2, read]
            top = self.counts[_TRAIN : _TRAIN + 2, read]
            hack = (top[1] >= _HACK_MIN) & _above(top, probe, _HACK_Z)
            result[enough] = _above(self.below[:, read], probe, z) & ~hack
        return result

    def coin_like(self, z: float, families: IntArray) -> BoolArray:
        """bool, one per family of ``families``: its recent top-tier probes (``_RECENT_MIN``
        items at least) pass above the chance level by ``z`` standard errors, and so did
        its first ``_FIRST`` training episodes. A coin flip passes above chance from its
        first episode and at every tier; a network that must find a rule (the torch
        learner's parity families) starts at chance, and passes every tier alike only
        while it has partly learned the rule."""
        probe = self.counts[_PROBE : _PROBE + 2, families]
        first = self.first[:, families].astype(np.float64)
        chance = self._chance(families)
        result: BoolArray = (
            (probe[1] >= _RECENT_MIN)
            & (first[1] >= _FIRST)
            & _above_level(probe, chance, z)
            & _above_level(first, chance, z)
        )
        return result

    def _add(self, row: int, family: IntArray, k: FloatArray, n: FloatArray) -> None:
        """Fade rows ``row``, ``row + 1`` of these distinct families by ``n`` outcomes, add
        them, and redo their verdicts."""
        _fade_in(self.counts[row : row + 2], family, k, n)
        self.passed[family] = self._verdict(self.counts[:, family], self._need(family))

    def set_floor(self, floor: float) -> None:
        """Read every level through a grader wrong ``floor`` of the time, either way, and
        redo every verdict."""
        self.floor = floor
        self.passed = self._verdict(self.counts, self._need(None))

    def _chance(self, families: IntArray | None) -> FloatArray:
        """The chance level of these families (all: None), as a raw pass rate."""
        chance = self._catalog.chance_success
        result: FloatArray = graded(
            (chance if families is None else chance[families]).astype(np.float64), self.floor
        )
        return result

    def _need(self, families: IntArray | None) -> FloatArray:
        """The raw pass rate that counts as mastered for these families (all: None)."""
        chance = self._catalog.chance_success
        chance = (chance if families is None else chance[families]).astype(np.float64)
        result: FloatArray = graded(chance + self._mastered_at * (1.0 - chance), self.floor)
        return result

    @staticmethod
    def _verdict(c: FloatArray, need: FloatArray) -> BoolArray:
        """The training passes at ``need`` with confidence (Wilson's lower bound), and the
        probes on average. Training is fresh samples each time (a fixed probe set that
        happens to be easy is not: the torch learner's read mastered early from probes
        alone), and the probes agreeing keeps a hack's training passes out."""
        n = np.maximum(c[1], 1e-12)
        p = c[0] / n
        z2 = _Z * _Z / n
        low = (p + 0.5 * z2 - _Z * np.sqrt(p * (1.0 - p) / n + 0.25 * z2 / n)) / (1.0 + z2)
        result: BoolArray = (c[1] > 0) & (low >= need) & (c[3] > 0) & (c[2] >= need * c[3])
        return result

    def state_dict(self) -> dict[str, Any]:
        return {
            "top_tier": self.counts.copy(),
            "top_tier_start": self.start.copy(),
            "top_tier_below": self.below.copy(),
            "top_tier_first": self.first.copy(),
        }

    def checked(
        self, state: dict[str, Any]
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """The counts, start, below and first of ``state``, checked (ValueError naming the
        field), not yet applied."""
        n = self._catalog.n_families
        parts = []
        names = (("top_tier", 4), ("top_tier_start", 2), ("top_tier_below", 2))
        for name, rows in (*names, ("top_tier_first", 2)):
            if name not in state:
                raise ValueError(f"skill.{name}: missing")
            values = np.asarray(state[name], dtype=np.float64)
            if values.shape != (rows, n) or not np.all(np.isfinite(values)) or (values < 0).any():
                raise ValueError(f"skill.{name}: need {rows} x {n} finite values >= 0")
            if any((values[r] > values[r + 1]).any() for r in range(0, rows, 2)):
                raise ValueError(f"skill.{name}: more passed than run")
            parts.append(values.copy())
        if (parts[1][1] > _START).any():
            raise ValueError(f"skill.top_tier_start: more than {_START:g} items probed")
        if (parts[3][1] > _FIRST).any():
            raise ValueError(f"skill.top_tier_first: more than {_FIRST:g} episodes run")
        if (parts[3] != np.rint(parts[3])).any():
            raise ValueError("skill.top_tier_first: whole episodes only")
        return parts[0], parts[1], parts[2], parts[3]

    def apply(self, checked: tuple[FloatArray, FloatArray, FloatArray, FloatArray]) -> None:
        self.counts, self.start, self.below, first = checked
        self.first = first.astype(np.uint8)
        self.passed = self._verdict(self.counts, self._need(None))
