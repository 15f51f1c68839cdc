"""The current tier of every family, following the skill model.

A ladder family's current tier is the one the skill model would draw at its mean belief;
views, probes and metrics read it, and each move is an event with the evidence. Only the
families a report or a probe touched can move, so only those are looked at. A family whose
tiers are separate skills has no ladder: it stays at tier 0 here and the weights spread its
draws over all its tiers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog
from policies import SkillModel

from ._events import Event

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_NEVER = -(10**9)


@dataclass(frozen=True, eq=False)  # arrays inside: == would be ambiguous
class TierMoves:
    """Tier moves kept as one array until read, then built into events: rows family, old
    tier, new tier, pass rate and its band (low, high), samples; a column a family (one
    array: a move of a few families costs about as little as its Event objects would)."""

    catalog: Catalog
    step: int
    # float32 [7, moves] (float64 past 2**24 families): family and tiers are exact; rates
    # keep 6 decimals and samples 1 in the events (half the bytes of an undrained log)
    rows: npt.NDArray[np.floating[Any]]

    def __len__(self) -> int:
        return int(self.rows.shape[1])

    def build(self) -> list[Event]:
        cat = self.catalog
        family = self.rows[0].astype(np.int64)
        old, new = self.rows[1].astype(np.int64).tolist(), self.rows[2].astype(np.int64).tolist()
        rate, low, high = (np.round(r.astype(np.float64), 6).tolist() for r in self.rows[3:6])
        samples = np.round(self.rows[6].astype(np.float64), 1).tolist()
        return [
            Event(
                step=self.step,
                kind="tier_promoted" if n > o else "tier_demoted",
                family=cat.family_names[f],
                domain=cat.domain_names[d],
                payload={
                    "old_tier": o,
                    "new_tier": n,
                    "pass_rate": p,
                    "ci": [lo, hi],
                    "samples": e,
                },
            )
            for f, d, o, n, p, lo, hi, e in zip(
                family.tolist(),
                cat.domain_of_family[family].tolist(),
                old,
                new,
                rate,
                low,
                high,
                samples,
                strict=True,
            )
        ]


class CurrentTiers:
    """int64 [n_families] ``tier`` and the step of its ``last_change``."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self.tier: IntArray = np.zeros(catalog.n_families, dtype=np.int64)
        self.last_change: IntArray = np.full(catalog.n_families, _NEVER, dtype=np.int64)
        self._ladder = ~catalog.tier_separate

    def follow(self, skill: SkillModel, families: IntArray, step: int) -> TierMoves | list[Event]:
        """Move these ladder families to the skill model's tier; an event per move."""
        fam = families[self._ladder[families]]
        if fam.size == 0:
            return []
        new = skill.tier_of(fam)
        moved = new != self.tier[fam]
        if not moved.any():
            return []
        fam, new = fam[moved], new[moved]
        old = self.tier[fam].copy()
        low, rate, high = skill.pass_rate_band(fam, new)
        samples = np.round(skill.episodes[fam], 1)
        exact = self._catalog.n_families < 2**24  # every family id exact in float32
        rows = np.stack([fam, old, new, rate, low, high, samples])
        moves = TierMoves(self._catalog, step, rows.astype(np.float32) if exact else rows)
        self.tier[fam] = new
        self.last_change[fam] = step
        return moves

    def state_dict(self) -> dict[str, Any]:
        return {"tier": self.tier.copy(), "last_change": self.last_change.copy()}

    def check_state(self, state: Any, where: str = "tiers") -> list[str]:
        """Problems with ``state`` as this object's state (pure: nothing is applied)."""
        if not isinstance(state, Mapping):
            return [f"{where}: must be a mapping, got {type(state).__name__}"]
        problems: list[str] = []
        n_tiers = self._catalog.n_tiers
        for name in ("tier", "last_change"):
            if name not in state:
                problems.append(f"{where}.{name}: missing")
                continue
            value = np.asarray(state[name])
            if value.dtype.kind not in "iu":
                problems.append(f"{where}.{name}: must be an array of int64, got {value.dtype}")
                continue
            if value.shape != (self._catalog.n_families,):
                problems.append(
                    f"{where}.{name}: expected shape ({self._catalog.n_families},), "
                    f"got {value.shape}"
                )
                continue
            if name == "tier":
                bad = np.flatnonzero((value < 0) | (value >= n_tiers))
                if bad.size:
                    i = int(bad[0])
                    problems.append(
                        f"{where}.tier: must be in [0, {n_tiers[i]}), got {value[i].item()!r} "
                        f"at [{i}]"
                    )
        return problems

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.tier = np.asarray(state["tier"], dtype=np.int64).copy()
        self.last_change = np.asarray(state["last_change"], dtype=np.int64).copy()
