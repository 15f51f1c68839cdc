"""The flatness test's evidence: a score test of each family's slope over the tiers.

The skill belief assumes a family's pass rate falls with the tier at ``slope`` logits a
tier. A coin flip passes every tier alike, and no update of the skill alone can show it:
the belief just settles where the mean pass rate is. ``SlopeTest`` keeps, per family, the
efficient score and information of a slope parameter, from every training outcome scored
against the belief of its time, fading by ``1/_WINDOW`` per training episode, so a family
that changed is judged on its recent outcomes (over a longer window where guessing or a
grader's errors leave each outcome less to tell). ``SkillModel`` reads its z and
information (``flat``, ``slope_undecided``) and owns one, as it owns ``ShortfallTest`` and
``TopTierCounts``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from ._laplace import clip

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_WINDOW = 64.0  # the evidence fades by 1/64 per training episode


class SlopeTest:
    """float64 [5, n_families] ``terms``: the scores of skill and slope and their
    information (skill-skill, slope-slope, cross), each fading per training episode."""

    def __init__(self, n_families: int) -> None:
        self._n = n_families
        self.terms = np.zeros((5, n_families))

    def add(
        self,
        families: IntArray,
        owner: IntArray,
        tier: IntArray,
        k: FloatArray,
        n: FloatArray,
        per_family: FloatArray,
        mu: FloatArray,
        low: FloatArray,
        span: FloatArray,
        slope: float,
        share: FloatArray | float = 1.0,
    ) -> None:
        """Add these counts (``k`` of ``n`` at ``tier``, row i of ``families[owner[i]]``,
        passing at ``low + span * sigmoid`` per row) scored at the belief ``mu`` of each of
        ``families``, after fading their terms by ``per_family`` episodes. An episode of a
        family whose outcomes carry ``share`` of the information a right grader's
        unguessable outcome would fades them by ``share / _WINDOW``: the window holds as
        much evidence, over ``_WINDOW / share`` episodes."""
        m = families.shape[0]
        gap = mu[owner] - tier
        q = expit(slope * gap)
        p = clip(low + span * q, 1e-9, 1.0 - 1e-9)
        d_skill = span * q * (1.0 - q) * slope  # d p / d skill
        d_slope = span * q * (1.0 - q) * gap  # d p / d slope
        resid = (k - n * p) / (p * (1.0 - p))
        weight = n / (p * (1.0 - p))
        terms = np.stack(
            [
                resid * d_skill,
                resid * d_slope,
                weight * d_skill * d_skill,
                weight * d_slope * d_slope,
                weight * d_skill * d_slope,
            ]
        )
        window = _WINDOW / share  # in episodes
        fade = (1.0 - 1.0 / window) ** per_family
        # one bincount for the five rows: row r of family j lands in bin r * m + j
        rows = np.arange(5)[:, None] * m + owner[None, :]
        sums = np.bincount(rows.ravel(), weights=terms.ravel(), minlength=5 * m).reshape(5, m)
        self.terms[:, families] = self.terms[:, families] * fade + sums

    def z_info(self, families: IntArray | None = None) -> tuple[FloatArray, FloatArray]:
        """The slope's efficient score test, the skill profiled out (so a family that
        learned since, passing more often at every tier, reads neither flat nor steep):
        its z and its information (of ``families``, default all)."""
        test = self.terms if families is None else self.terms[:, families]
        u_skill, u_slope, i_ss, i_aa, i_sa = test
        ratio = i_sa / np.maximum(i_ss, 1e-12)
        info = np.maximum(i_aa - ratio * i_sa, 0.0)
        z = (u_slope - ratio * u_skill) / np.sqrt(np.maximum(info, 1e-12))
        return z, info

    def state_dict(self) -> dict[str, Any]:
        return {"slope_test": self.terms.copy()}

    def checked(self, state: dict[str, Any]) -> FloatArray:
        """The state's terms, checked (ValueError naming the field); nothing is applied."""
        if "slope_test" not in state:
            raise ValueError("skill.slope_test: missing")
        terms = np.asarray(state["slope_test"], dtype=np.float64)
        if terms.shape != (5, self._n) or not np.all(np.isfinite(terms)):
            raise ValueError(f"skill.slope_test: need 5 x {self._n} finite values")
        return terms.copy()

    def apply(self, terms: FloatArray) -> None:
        """Take the terms ``checked`` returned."""
        self.terms = terms
