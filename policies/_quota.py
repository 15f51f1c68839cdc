"""Quota projection: the closest feasible distribution to the policy's weights.

Domain shares are held within [min_share, max_share] and family shares under their caps. The
projection is the KL (I-)projection onto that box-constrained simplex, which has the closed
form x_i = clip(c * w_i, lo_i, hi_i) with one multiplier c per group; ``waterfill`` finds every
group's c exactly by sweeping the sorted breakpoints, vectorised over all groups at once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_TOL = 1e-12


def _grouped_cumsum(values: FloatArray, starts: IntArray) -> FloatArray:
    padded = np.concatenate([[0.0], np.cumsum(values)])
    result: FloatArray = padded[1:] - padded[starts]
    return result


def waterfill(
    score: FloatArray,
    lo: FloatArray,
    hi: FloatArray,
    total: FloatArray,
    group: IntArray,
) -> FloatArray:
    """Solve x_i = clip(c_g * score_i, lo_i, hi_i) with sum of x over group g equal to total[g].

    Requires sum(lo) <= total <= sum(hi) per group. Items with zero score stay at lo unless the
    positive items are all at hi and the group still needs mass; then the zero-score items share
    the rest evenly (up to their hi).
    """
    n_groups = total.shape[0]
    x = lo.astype(np.float64, copy=True)
    positive = np.flatnonzero(score > 0)
    if positive.size:
        g = group[positive]
        s = score[positive]
        ev_group = np.concatenate([g, g])
        ev_c = np.concatenate([lo[positive] / s, hi[positive] / s])
        ev_da = np.concatenate([-lo[positive], hi[positive]])
        ev_db = np.concatenate([s, -s])
        order = np.lexsort((ev_c, ev_group))
        ev_group, ev_c, ev_da, ev_db = ev_group[order], ev_c[order], ev_da[order], ev_db[order]
        starts = np.searchsorted(ev_group, ev_group, side="left")
        base = np.bincount(group, weights=lo, minlength=n_groups)
        a = base[ev_group] + _grouped_cumsum(ev_da, starts)
        b = _grouped_cumsum(ev_db, starts)
        reached = a + b * ev_c >= total[ev_group] - _TOL
        first = np.full(n_groups, ev_group.shape[0], dtype=np.int64)
        np.minimum.at(first, ev_group[reached], np.flatnonzero(reached))
        c = np.full(n_groups, np.inf)
        has = first < ev_group.shape[0]
        k = first[has]
        at_start = k == starts[k]
        prev = np.where(at_start, k, k - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            solved = (total[has] - a[prev]) / b[prev]
        c[has] = np.where(at_start | (b[prev] <= 0), ev_c[k], solved)
        x[positive] = np.clip(c[g] * s, lo[positive], hi[positive])
    deficit = total - np.bincount(group, weights=x, minlength=n_groups)
    needy = deficit > 1e-9
    if needy.any():
        zero = np.flatnonzero((score <= 0) & needy[group])
        if zero.size:
            zg = group[zero]
            inner_total = np.bincount(zg, weights=lo[zero], minlength=n_groups) + np.where(
                needy, deficit, 0.0
            )
            x[zero] = waterfill(np.ones(zero.size), lo[zero], hi[zero], inner_total, zg)
    return x


def project_quotas(
    family_weight: FloatArray,
    domain_of_family: IntArray,
    domain_min: FloatArray,
    domain_max: FloatArray,
    family_cap: FloatArray,
) -> FloatArray:
    """Family sampling probabilities closest to ``family_weight`` that respect every quota.

    A family with cap 0 (quarantined, circuit open) gets nothing; a domain whose open families
    cannot hold its min_share gets what they can hold. Raises ValueError if no distribution
    fits (the manifests loader rejects such quota sets at load time).
    """
    n_domains = domain_min.shape[0]
    w = np.clip(family_weight, 0.0, None)
    w = w / w.sum() if w.sum() > 0 else np.full(w.shape, 1.0 / w.shape[0])
    capacity = np.bincount(domain_of_family, weights=family_cap, minlength=n_domains)
    hi = np.minimum(domain_max, capacity)
    lo = np.minimum(domain_min, hi)
    if lo.sum() > 1.0 + 1e-9 or hi.sum() < 1.0 - 1e-9:
        raise ValueError(
            f"quotas are infeasible: sum of min shares {lo.sum():.4f}, "
            f"sum of reachable max shares {hi.sum():.4f}"
        )
    domain_mass = np.bincount(domain_of_family, weights=w, minlength=n_domains)
    zeros = np.zeros(n_domains, dtype=np.int64)
    domain_share = waterfill(domain_mass, lo, hi, np.array([1.0]), zeros)
    p = waterfill(w, np.zeros_like(w), family_cap, domain_share, domain_of_family)
    return p / p.sum()
