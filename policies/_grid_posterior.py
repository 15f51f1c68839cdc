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

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import expit

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

GRID_STEP = 0.125  # tiers between grid points (a belief's sd rarely falls under 0.2)
_CHUNK = 2048  # families per pass: bounds the [families, grid] work arrays
_MIN_VAR = 1e-4
# at most this many (family, pair) counts: beyond it (many distinct chance levels) each
# row's log-likelihood is gathered and summed per family instead
_PAIR_CELLS = 1 << 22

Chunks = Callable[[int, int], npt.NDArray[np.float32]]


class _Rows(NamedTuple):
    """A call's rows (family ``owner``, its (tier, chance) pair, counts ``k of n``) and the
    pairs' log pass and fail rates on the grid, for ``m`` families."""

    owner: IntArray
    pair_of_row: IntArray
    k: FloatArray
    n: FloatArray
    log_pass: npt.NDArray[np.float32]
    log_fail: npt.NDArray[np.float32]
    m: int


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
    rates are made once per distinct (tier, chance) pair, and a family's counts are
    summed per pair, so the rows cost two ``bincount`` passes."""
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
    loglik = _by_pairs if m * pairs.shape[0] <= _PAIR_CELLS else _by_rows
    chunks = loglik(_Rows(owner, pair_of_row, k, n, log_pass, log_fail, m))
    mean, var = np.empty(m), np.empty(m)
    for start in range(0, m, _CHUNK):
        stop = min(start + _CHUNK, m)
        post = chunks(start, stop)
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


def _by_pairs(rows: _Rows) -> Chunks:
    """The log-likelihood on the grid of families ``start:stop``: each family's passes and
    fails summed per (tier, chance) pair, times the pairs' log rates (two products of a
    [families, pairs] matrix by a [pairs, grid] one, with no [rows, grid] pass)."""
    m, n_pairs = rows.m, rows.log_pass.shape[0]
    key = rows.owner * n_pairs + rows.pair_of_row
    shape = (m, n_pairs)
    passes = np.bincount(key, weights=rows.k, minlength=m * n_pairs).reshape(shape)
    fails = np.bincount(key, weights=rows.n - rows.k, minlength=m * n_pairs).reshape(shape)
    passes32, fails32 = passes.astype(np.float32), fails.astype(np.float32)

    def chunk(start: int, stop: int) -> npt.NDArray[np.float32]:
        post: npt.NDArray[np.float32] = passes32[start:stop] @ rows.log_pass
        post += fails32[start:stop] @ rows.log_fail
        return post

    return chunk


def _by_rows(rows: _Rows) -> Chunks:
    """As ``_by_pairs``, where the pairs are too many to count per family: each row's
    log-likelihood gathered and summed per family (``reduceat``)."""
    order = np.argsort(rows.owner, kind="stable")
    # each family's first row in ``order``, and one past the last family's last
    first_row = np.searchsorted(rows.owner[order], np.arange(rows.m + 1))

    def chunk(start: int, stop: int) -> npt.NDArray[np.float32]:
        pick = order[first_row[start] : first_row[stop]]
        passed = rows.k[pick, None].astype(np.float32)
        pair = rows.pair_of_row[pick]
        loglik = passed * rows.log_pass[pair]
        loglik += (rows.n[pick, None].astype(np.float32) - passed) * rows.log_fail[pair]
        if pick.shape[0] == stop - start:  # one row per family: the rows are the sums
            return loglik
        summed: npt.NDArray[np.float32] = np.add.reduceat(
            loglik, first_row[start:stop] - first_row[start], axis=0
        )
        return summed

    return chunk
