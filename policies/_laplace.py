"""The Laplace update of a skill belief by binomial counts at tiers.

``SkillModel`` keeps a Gaussian belief per family of its skill on the tier axis, with
``P(pass at tier t) = low + span * sigmoid(slope * (theta - t))`` (``low`` the chance level,
``span`` what is left of the rate, each read through the grader's errors). A report or a
probe call is a batch of counts ``k of n`` at (family, tier); the belief moves by a few
damped Newton steps on the log-posterior, summed per family with ``bincount`` over the
families touched (a Laplace approximation, as Glicko and online IRT do). Kept apart from
the model so its one job, and the arithmetic a probe round of every family pays for, can
be read on its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from ._workspace import Workspace

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_NEWTON_STEPS = 5
_CONVERGED = 1e-6  # tiers: a Newton step smaller than this for every family ends the update
_MAX_STEP = 1.0  # tiers one Newton step may move the mean (far tiers: a flat likelihood)
REACH = 3.0  # tiers the mean may go below tier 0 or above the top tier


def clip(values: Any, low: Any, high: Any) -> Any:
    """``np.clip`` as two ufuncs, the same values (NaN stays NaN): its wrapper cost more
    than the work on a batch's rows, and the Newton loop clips three times a step."""
    return np.minimum(np.maximum(values, low), high)


def laplace_update(
    mean: FloatArray,
    var: FloatArray,
    families: IntArray,
    owner: IntArray,
    tier: IntArray,
    k: FloatArray,
    n: FloatArray,
    *,
    low: FloatArray,
    span: FloatArray,
    top: FloatArray,
    slope: float,
    work: Workspace,
) -> None:
    """Update the belief (``mean``, ``var``, written in place) of ``families`` by counts
    ``k of n`` at ``tier``, row i of family ``families[owner[i]]``; ``low``, ``span`` per row,
    ``top`` (the top tier) per family. ``work`` keeps a probe round's work arrays."""
    m = families.shape[0]
    prior_mu, prior_prec = mean[families].copy(), 1.0 / var[families]
    tiers = tier.astype(np.float64)
    mu = prior_mu.copy()
    # one row per family, in order (a probe round of every family): the sums per family
    # are the rows themselves, with no gather and no bincount (the same values)
    if owner.shape[0] == m and bool((owner == np.arange(m)).all()):
        info = _newton_each(mu, prior_mu, prior_prec, low, span, tiers, top, k, n, slope, work)
        mean[families] = mu
        var[families] = 1.0 / (prior_prec + info)
        return
    info = np.zeros(m)
    for _ in range(_NEWTON_STEPS):
        q = expit(slope * (mu[owner] - tiers))
        p = clip(low + span * q, 1e-9, 1.0 - 1e-9)
        dp = span * slope * q * (1.0 - q)
        pq = p * (1.0 - p)
        grad = np.bincount(owner, weights=(k - n * p) * dp / pq, minlength=m)
        info = np.bincount(owner, weights=n * dp * dp / pq, minlength=m).astype(np.float64)
        g = grad - prior_prec * (mu - prior_mu)
        move = clip(g / (info + prior_prec), -_MAX_STEP, _MAX_STEP)  # damped
        mu = clip(mu + move, -REACH, top + REACH)
        if np.abs(move).max() < _CONVERGED:
            break
    mean[families] = mu
    var[families] = 1.0 / (prior_prec + info)


def _newton_each(
    mu: FloatArray,
    prior_mu: FloatArray,
    prior_prec: FloatArray,
    low: FloatArray,
    span: FloatArray,
    tiers: FloatArray,
    top: FloatArray,
    k: FloatArray,
    n: FloatArray,
    slope: float,
    work: Workspace,
) -> FloatArray:
    """The Newton steps of ``laplace_update`` where row i is family i (a probe round of
    every family), moving ``mu`` in place; returns the information. Each expression (in its
    comment) is written into work arrays kept between rounds (``Workspace``): at 25,000
    families a fresh array is 200 KB, and its page faults cost several times the
    arithmetic. The sums per family are the rows, so ``+ 0.0`` stands for bincount's
    turning -0.0 into 0.0: the bits of the general loop."""
    m = mu.shape[0]
    a, b, q, p, dp = (work.array(name, m) for name in ("a", "b", "q", "p", "dp"))
    grad = q  # q is spent once dp is made
    info = np.empty(m)
    rest_slope = span * slope
    ceiling = top + REACH
    for _ in range(_NEWTON_STEPS):
        expit(np.multiply(np.subtract(mu, tiers, out=a), slope, out=a), out=q)
        # p = clip(low + span * q, 1e-9, 1 - 1e-9)
        np.add(low, np.multiply(span, q, out=p), out=p)
        np.minimum(np.maximum(p, 1e-9, out=p), 1.0 - 1e-9, out=p)
        # dp = span * slope * q * (1 - q); pq = p * (1 - p), in b
        np.multiply(np.multiply(rest_slope, q, out=dp), np.subtract(1.0, q, out=a), out=dp)
        np.multiply(p, np.subtract(1.0, p, out=b), out=b)
        # grad = (k - n * p) * dp / pq + 0.0; info = n * dp * dp / pq + 0.0
        np.subtract(k, np.multiply(n, p, out=grad), out=grad)
        np.add(np.divide(np.multiply(grad, dp, out=grad), b, out=grad), 0.0, out=grad)
        np.multiply(np.multiply(n, dp, out=info), dp, out=info)
        np.add(np.divide(info, b, out=info), 0.0, out=info)
        # move = clip((grad - prior_prec * (mu - prior_mu)) / (info + prior_prec), +-1)
        np.multiply(prior_prec, np.subtract(mu, prior_mu, out=a), out=a)
        move = np.subtract(grad, a, out=grad)
        np.divide(move, np.add(info, prior_prec, out=a), out=move)
        np.minimum(np.maximum(move, -_MAX_STEP, out=move), _MAX_STEP, out=move)
        # mu = clip(mu + move, -REACH, top + REACH)
        np.add(mu, move, out=mu)
        np.minimum(np.maximum(mu, -REACH, out=mu), ceiling, out=mu)
        if np.abs(move, out=a).max() < _CONVERGED:
            break
    return info
