"""How often the verifier passes what surely fails: a grader wrong either way.

A verifier that is wrong on a share ``e`` of its grades (an LLM judge, a flaky harness)
passes ``e`` of what surely fails and fails ``e`` of what surely passes. The skill model's
pass curve has no room for it: a ladder's easier tier passes less and its harder tier more
than the one slope says, and its flatness test reads a learner as a coin flip (the grid's
``*_judge`` regimes: half of the learnable families idled). ``VerifierFloor`` pools the
probe items read at tiers the belief says surely fail, and where they pass more than
``_FLOOR_MIN`` by ``_FLOOR_Z`` standard errors takes their pass rate for ``e``. The skill
model's likelihood then reads every outcome through the grader, ``P(pass) = e + (1 - 2e)
P_true`` (a binomial of the grader's rate, not the true rate's counts corrected, whose
variance near 0 and 1 the errors more than double). A grader wrong as often either way is
assumed: what surely passes is rarer early in a run, when the belief needs it most.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

_FLOOR_Z = 3.0  # standard errors above _FLOOR_MIN before the floor is taken
_FLOOR_MIN = 0.01  # a grader wrong once in a hundred grades or less is left as it is
_FLOOR_MAX = 0.25  # beyond this a grade says little; the floor is held here
# The floor is read from the first probe calls only: a grader's errors are there from the
# start, and a drifting evaluator (the shift SkillModel takes off a call) starts where it
# was calibrated and lifts the readings later
_FLOOR_CALLS = 3
_CALL_ITEMS = 16.0  # a call that reads fewer items at surely failing tiers is not counted


def graded(rate: Any, floor: float) -> Any:
    """The pass rate a grader wrong ``floor`` of the time, either way, shows for a true
    ``rate``."""
    return floor + (1.0 - 2.0 * floor) * rate


class VerifierFloor:
    """The pooled probe items at surely failing tiers (passed, read, of how many calls)
    and the floor they give (``rate``: 0 until it is clear)."""

    def __init__(self) -> None:
        # at tiers that surely fail: items passed, items read, readings, readings of none,
        # calls; then at tiers that surely pass, once a floor is read: items failed, read
        self.counts = np.zeros(7)
        self.rate = 0.0

    @property
    def reading(self) -> bool:
        """Whether probe calls are still read for the floor (the first ``_FLOOR_CALLS``)."""
        return bool(self.counts[4] < _FLOOR_CALLS)

    @property
    def information(self) -> float:
        """The share of a right grader's information about the slope that an outcome
        carries at most, ``(1 - 2e)^2`` (at a pass rate of one half; less elsewhere): the
        flatness test's bar is counted in a right grader's outcomes, so it is lowered by
        as much, or a coin flip's fading evidence never reaches it."""
        span = 1.0 - 2.0 * self.rate
        return span * span

    def add(self, passed: float, items: float, readings: float, none: float) -> bool:
        """Pool a call's items (``readings`` of them, ``none`` of which passed no item),
        while calls are still counted; True where the floor changed."""
        if items < _CALL_ITEMS or not self.reading:
            return False
        self.counts[:5] += (passed, items, readings, none, 1.0)
        before, self.rate = self.rate, self._rate()
        return self.rate != before

    def confirm(self, failed: float, items: float) -> bool:
        """Pool items read at tiers that surely pass, while a floor is read; True where
        that ends it. A grader fails them as often as it passes what surely fails; a drift
        that lifted the first calls, or a model that passed part of its top tiers before
        training, fails none of them."""
        if self.rate == 0.0 or items <= 0:
            return False
        self.counts[5:] += (failed, items)
        before, self.rate = self.rate, self._rate()
        return self.rate != before

    def _rate(self) -> float:
        """The floor the surely failing items give (``_floor``), unless the surely passing
        ones fail less often by ``_FLOOR_Z`` standard errors of the difference of the two
        rates (the pooled two-proportion test). Both rates are estimates: against the
        floor's rate taken as exact, a grader wrong 5 % of the time was withdrawn on a run
        of low readings (dev ``skill_judge`` seed 2, 185 of 3,896 failed against a floor
        of 0.059 from 6,184 items; its learners then read flat, final -0.024)."""
        e = self._floor()
        passed, read = self.counts[:2]
        failed, items = self.counts[5:]
        if e <= 0.0 or items <= 0:
            return e
        pooled = (passed + failed) / (read + items)
        spread = np.sqrt(pooled * (1.0 - pooled) * (1.0 / read + 1.0 / items))
        return 0.0 if failed / items - e < -_FLOOR_Z * spread else e

    def _floor(self) -> float:
        """The pass rate of the pooled items, or less where it would leave fewer readings of
        none than there are: a grader errs alike on every family, so its errors leave
        ``(1 - e)^n`` of the readings of ``n`` items empty, while a few families that
        already pass part of a tier lift the mean and leave the rest empty. That share is
        read within ``_FLOOR_Z`` standard errors too: from the 50 or so readings of a few
        slow starters it read a floor where no grader errs (dev ``skill_1tier``, 8 of 12
        seeds, each held for 20-200 steps)."""
        passed, items, readings, none, _ = self.counts[:5]
        if items <= 0:
            return 0.0
        p = passed / items
        if p - _FLOOR_Z * np.sqrt(p * (1.0 - p) / items) <= _FLOOR_MIN:
            return 0.0
        if none > 0:
            empty = none / readings
            p = min(p, 1.0 - empty ** (readings / items))
            most = min(empty + _FLOOR_Z * np.sqrt(empty * (1.0 - empty) / readings), 1.0)
            if 1.0 - most ** (readings / items) <= _FLOOR_MIN:
                return 0.0
        return float(min(p, _FLOOR_MAX)) if p > _FLOOR_MIN else 0.0

    def raw(self, rate: Any) -> Any:
        """The pass rate the grader shows for a true ``rate``."""
        return graded(rate, self.rate)

    def state_dict(self) -> dict[str, Any]:
        return {"verifier_floor": self.counts.copy()}

    def checked(self, state: dict[str, Any]) -> FloatArray:
        """The state's counts, checked (ValueError naming the field); nothing is applied.
        A state from before the floor reads none."""
        counts = np.asarray(state.get("verifier_floor", np.zeros(7)), dtype=np.float64)
        if counts.shape != (7,) or not np.all(np.isfinite(counts)):
            raise ValueError(
                "skill.verifier_floor: need 7 finite values (passed, read, readings, none,"
                " calls; failed, read where a tier surely passes)"
            )
        passed, items, readings, none, calls, failed, sure = counts
        if not (0 <= passed <= items and 0 <= none <= readings <= items and calls >= 0):
            raise ValueError(
                "skill.verifier_floor: need 0 <= passed <= read, 0 <= none <= readings <= read"
                " and calls >= 0"
            )
        if not 0 <= failed <= sure:
            raise ValueError(
                "skill.verifier_floor: need 0 <= failed <= read where it surely passes"
            )
        return counts.copy()

    def apply(self, counts: FloatArray) -> None:
        """Take the counts ``checked`` returned."""
        self.counts = counts
        self.rate = self._rate()
