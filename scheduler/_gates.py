"""Gates: one weight factor and one share cap per family, applied once in the projection.

The factor comes from the circuit breakers (0 while open, a trickle half-open). The cap is
the tightest of the manifest's ``max_share``, the share that keeps a small variant pool
under ``max_repeats`` draws per epoch, and a flagged family's cap (mastered, idle,
suspected of hacking: a trickle that keeps evidence coming). A cap, not a multiplier: a
family a policy overrates is held to it however large its weight, and the mass that
quotas move goes to families that can still learn.
"""

from __future__ import annotations

import logging

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._breakers import CircuitBreakers

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def fill_to_one(
    caps: FloatArray, ceiling: FloatArray, weight: FloatArray | None = None
) -> FloatArray:
    """Scale up the caps below their ceiling until they sum to at least 1 (if they can).
    With ``weight``, each cap grows by its cap times its weight, in proportion: a cap of
    weight 0 grows only once the others are at their ceilings."""
    for _ in range(8):  # each pass fills the room left by caps that hit their ceiling
        if caps.sum() >= 1.0 - 1e-12:
            break
        below = caps < ceiling
        room = caps[below].sum()
        need = 1.0 - caps[~below].sum()
        if room <= 0:  # nothing to scale: spread what is missing over the room left
            spare = (ceiling - caps)[below]
            caps = caps.copy()
            caps[below] += spare * min(1.0, need / max(spare.sum(), 1e-300))
            continue
        share = None if weight is None else np.where(below, caps * weight, 0.0)
        total = 0.0 if share is None else float(share.sum())
        if share is None or total <= 0:
            caps = np.where(below, np.minimum(ceiling, caps * need / room), caps)
        else:
            caps = np.where(
                below, np.minimum(ceiling, caps + share * ((need - room) / total)), caps
            )
    return caps


class Gates:
    """Each family's factor (breakers) and cap (manifest, scarcity, flags)."""

    def __init__(
        self,
        catalog: Catalog,
        breakers: CircuitBreakers,
        *,
        max_repeats: float | None,
        epoch_episodes: int,
    ) -> None:
        self._catalog = catalog
        self._breakers = breakers
        self._max_repeats = max_repeats
        self._epoch_episodes = epoch_episodes
        # float64 [n_families]: the breakers' factor the weights were computed with
        self.factor: FloatArray = np.ones(catalog.n_families)
        self._seen_version = -1  # the breakers' version the factor was read at

    def factor_changed(self) -> bool:
        """Take the breakers' current factor; whether it differs from the one in use (a
        blocked family must stop being drawn at once, whatever the refresh rule says).
        Read only when a breaker moved since the last look."""
        if self._breakers.version == self._seen_version:
            return False
        self._seen_version = self._breakers.version
        factor = self._breakers.sampling_factor
        if np.array_equal(factor, self.factor):
            return False
        self.factor = np.asarray(factor, dtype=np.float64).copy()
        return True

    def caps(self, current_pool: npt.NDArray[np.int64]) -> FloatArray:
        """Each family's share cap before flags: 0 while its breaker is open, else its
        manifest cap and, for a small variant pool (``current_pool``: the size of the pool
        it draws from), the share that draws it ``max_repeats`` times per epoch. Where the
        caps cannot fill a batch, the scarcity caps, then the manifest caps, are scaled up
        evenly (logged), never the breakers."""
        cat = self._catalog
        open_ = ~self._breakers.open_mask
        if not open_.any():
            raise RuntimeError("every family's circuit breaker is open: nothing can be drawn")
        caps = np.where(open_, cat.family_max_share, 0.0)
        if self._max_repeats is not None:
            scarce = self._max_repeats * current_pool / self._epoch_episodes
            caps = fill_to_one(np.minimum(caps, scarce), caps)
        if caps.sum() < 1.0:
            log.warning("family caps sum to %.3f < 1; relaxing them evenly", caps.sum())
            caps = fill_to_one(caps, open_.astype(np.float64))
        return caps

    def hold_flagged(
        self,
        caps: FloatArray,
        flag_cap: FloatArray,
        first: FloatArray | None = None,
        ceiling: float = 1.0,
    ) -> FloatArray:
        """Apply the flagged families' caps (``flag_cap``, inf where not flagged), raised
        evenly in a domain whose ``min_share`` could not be met otherwise, and hold every
        other family to ``ceiling``. Where the caps cannot fill a batch, the caps of the
        flagged families with a ``first`` weight above 0 are raised first, each by its cap
        times that weight, then the ceiling, then every cap evenly."""
        cat = self._catalog
        flagged = np.isfinite(flag_cap) & (caps > 0)
        if not flagged.any():
            capped = np.minimum(caps, ceiling)
            return capped if capped.sum() >= 1.0 else fill_to_one(capped, caps)
        capped = np.where(flagged, np.minimum(caps, flag_cap), np.minimum(caps, ceiling))
        dom = cat.domain_of_family
        free = np.bincount(dom, weights=np.where(flagged, 0.0, capped), minlength=cat.n_domains)
        held = np.bincount(dom, weights=np.where(flagged, capped, 0.0), minlength=cat.n_domains)
        need = cat.domain_min_share * 1.001 - free  # what the flagged ones must hold
        scale = np.where(need > held, need / np.maximum(held, 1e-300), 1.0)[dom]
        result: FloatArray = np.where(flagged, np.minimum(caps, capped * scale), capped)
        if result.sum() < 1.0 and first is not None:  # most flagged: these take it first
            chosen = (first > 0) & flagged
            result = fill_to_one(result, np.where(chosen, caps, result), first)
        if result.sum() < 1.0:  # then the unflagged, beyond the ceiling
            result = fill_to_one(result, np.where(flagged, result, caps))
        if result.sum() < 1.0:  # then relax evenly rather than starve
            result = fill_to_one(result, caps)
        return result
