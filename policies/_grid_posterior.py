"""A belief's update by its moments on a grid of skills, for tasks that pass by chance.

Where an answer can be guessed, the likelihood of passes at a tier far above the belief is
flat: every pass there could be a guess. The log-posterior then has a plateau round the
prior and a peak far above it, and Newton steps from the prior crawl along the plateau
(a family passing 8 of 8 items of its top tier every round read mastered after 10 rounds
where a quarter passes by chance, 28 where half do, 2 where none do), while a step to the
peak trusts a lucky reading (5 of 8 at chance 0.5) as if it were sure. ``match_moments``
takes the posterior's mean and variance instead, over a grid that covers every skill a
belief may take: as far as the evidence says, no further.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.special import expit

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

GRID_STEP = 0.125  # tiers between grid points (a belief's sd rarely falls under 0.2)
_CHUNK = 2048  # families per pass: bounds the [families, grid] work arrays
_MIN_VAR = 1e-4


def match_moments(
    prior_mu: FloatArray,
    prior_var: FloatArray,
    owner: IntArray,
    chance: FloatArray,
    tiers: FloatArray,
    k: FloatArray,
    n: FloatArray,
    *,
    slope: float,
    low: float,
    high: FloatArray,
    floor: float = 0.0,
) -> tuple[FloatArray, FloatArray]:
    """The posterior mean and variance of each family's skill (prior ``N(prior_mu,
    prior_var)``, one per family) given binomial counts ``k of n`` at ``tiers``, row i of
    family ``owner[i]`` (sorted, as ``distinct`` gives them, or not), where a row passes at
    ``chance + (1 - chance) * sigmoid(slope * (skill - tier))``; the skill on a grid from
    ``low`` to each family's ``high``; a grader wrong ``floor`` of the time either way
    shows ``floor + (1 - 2 floor)`` times that (``VerifierFloor``). The log pass and fail
    rates are made once per distinct (tier, chance) pair, so a row costs a gather and two
    multiply-adds."""
    m = prior_mu.shape[0]
    grid = np.arange(low, float(high.max()) + GRID_STEP / 2, GRID_STEP)
    # tier + chance / 2 tells the pairs apart: tiers are whole and chance is under 1
    pairs, pair_of_row = np.unique(tiers + 0.5 * chance, return_inverse=True)
    pair_tier = np.floor(pairs)
    pair_chance = 2.0 * (pairs - pair_tier)
    q = expit(slope * (grid[None, :] - pair_tier[:, None]))
    rate = pair_chance[:, None] + (1.0 - pair_chance[:, None]) * q
    if floor > 0.0:
        rate = floor + (1.0 - 2.0 * floor) * rate
    # float32 past here: the weights need no more, and the [families, grid] passes run
    # at twice the speed
    log_pass = np.log(np.clip(rate, 1e-12, 1.0)).astype(np.float32)
    log_fail = np.log(np.clip(1.0 - rate, 1e-12, 1.0)).astype(np.float32)
    grid32 = grid.astype(np.float32)
    order = np.argsort(owner, kind="stable")
    # each family's first row in ``order``, and one past the last family's last
    first_row = np.searchsorted(owner[order], np.arange(m + 1))
    mean, var = np.empty(m), np.empty(m)
    for start in range(0, m, _CHUNK):
        stop = min(start + _CHUNK, m)
        rows = order[first_row[start] : first_row[stop]]
        passed = k[rows, None].astype(np.float32)
        loglik = passed * log_pass[pair_of_row[rows]]
        loglik += (n[rows, None].astype(np.float32) - passed) * log_fail[pair_of_row[rows]]
        if rows.shape[0] == stop - start:  # one row per family: the rows are the sums
            post = loglik
        else:
            post = np.add.reduceat(loglik, first_row[start:stop] - first_row[start], axis=0)
        mu0 = prior_mu[start:stop, None].astype(np.float32)
        half_prec = (0.5 / prior_var[start:stop, None]).astype(np.float32)
        post -= half_prec * (grid32[None, :] - mu0) ** 2
        post[grid[None, :] > high[start:stop, None] + 1e-9] = -np.inf
        post -= post.max(axis=1, keepdims=True)
        weight = np.exp(post, out=post)
        weight /= weight.sum(axis=1, keepdims=True)
        mean[start:stop] = weight @ grid
        var[start:stop] = weight @ (grid * grid) - mean[start:stop] ** 2  # in float64
    return mean, np.maximum(var, _MIN_VAR)
