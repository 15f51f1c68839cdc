"""Checks that need more than one model: unique names, feasible quotas, held-out probes.

Each check takes what the loader resolved and returns problems; none of them raises.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._errors import Problem
from ._yaml import FieldPath, format_path, position_of


@dataclass(frozen=True)
class Where:
    """A place in a manifest (or a JSONL file) that a problem can point at."""

    file: str
    line: int
    column: int
    field: str

    def problem(self, message: str) -> Problem:
        return Problem(self.file, self.line, self.column, self.field, message)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class FieldAt:
    """A field of a manifest, placed only when asked: a clean load never looks up a line,
    so its positions (see ``LazyPositions``) are never parsed."""

    file: str
    positions: Mapping[FieldPath, tuple[int, int]] = dataclasses.field(repr=False, compare=False)
    path: FieldPath

    @property
    def where(self) -> Where:
        line, col = position_of(self.positions, self.path)
        return Where(self.file, line, col, format_path(self.path))

    @property
    def line(self) -> int:
        return self.where.line

    @property
    def column(self) -> int:
        return self.where.column

    @property
    def field(self) -> str:
        return format_path(self.path)

    def problem(self, message: str) -> Problem:
        return self.where.problem(message)

    def __str__(self) -> str:
        return str(self.where)


Place = Where | FieldAt  # a place a problem can name, now or when it is raised


@dataclass(frozen=True)
class NamedAt:
    """A name and where it was defined."""

    name: str
    where: Place


def _canonical(value: Any) -> Any:
    """JSON-equal values alike: 2 and 2.0 are one number, key order is ignored."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def canonical_hash(item: Mapping[str, Any], tier_field: str = "tier") -> str:
    """The identity of a variant regardless of key order and of the tier it is placed in.

    Both the family's tier field and the default ``tier`` key are left out, so an item is
    the same whichever of the two places it in a tier."""
    body = {k: v for k, v in item.items() if k not in (tier_field, "tier")}
    text = json.dumps(_canonical(body), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def duplicate_names(names: Sequence[NamedAt], what: str) -> list[Problem]:
    """One problem per repeated name, at the repeat, naming the first definition."""
    first: dict[str, Place] = {}
    problems = []
    for named in names:
        if named.name in first:
            msg = (
                f"duplicate {what} name {named.name!r}; {what} names must be unique across all "
                f"manifests (first defined at {first[named.name]})"
            )
            problems.append(named.where.problem(msg))
        else:
            first[named.name] = named.where
    return problems


@dataclass(frozen=True)
class DomainQuota:
    name: str
    min_share: float
    max_share: float
    family_caps: float  # sum of the families' max_share
    where: Place  # of quota.min_share (or the closest recorded ancestor)


def quota_problems(domains: Sequence[DomainQuota]) -> list[Problem]:
    """Feasible iff every lo_d <= hi_d and sum(lo) <= 1 <= sum(hi), hi_d capped by families."""
    if not domains:
        return []
    lo = np.array([d.min_share for d in domains])
    hi = np.minimum([d.max_share for d in domains], [d.family_caps for d in domains])
    problems = [
        d.where.problem(
            f"min_share {lo[i]:g} cannot be met: the domain's families can take at most "
            f"{hi[i]:g} (sum of their max_share caps {d.family_caps:g}, quota max_share "
            f"{d.max_share:g}); lower min_share or raise the family caps"
        )
        for i, d in enumerate(domains)
        if lo[i] > hi[i] + 1e-12
    ]
    if lo.sum() > 1 + 1e-12:
        parts = [f"{d.name} {lo[i]:g}" for i, d in enumerate(domains) if lo[i] > 0]
        anchor = domains[int(np.flatnonzero(lo > 0)[-1])]
        problems.append(
            anchor.where.problem(
                f"the domains' min_share values sum to {lo.sum():g} ({', '.join(parts)}); "
                "the sum must be at most 1"
            )
        )
    if hi.sum() < 1 - 1e-12:
        parts = [f"{d.name} {hi[i]:g}" for i, d in enumerate(domains)]
        anchor = domains[int(np.argmin(hi))]
        problems.append(
            anchor.where.problem(
                f"the domains' largest possible shares sum to {hi.sum():g} ({', '.join(parts)}); "
                "the sum must be at least 1 so every sample has a domain to go to; raise a "
                "max_share"
            )
        )
    return problems


def overlap_problems(
    family: str,
    training: Sequence[tuple[Mapping[str, Any], Place]],
    probe: Sequence[tuple[Mapping[str, Any], Place]],
    tier_field: str = "tier",
) -> list[Problem]:
    """A probe item that is also a training variant is not held out; name both places."""
    if not training or not probe:
        return []
    trained: dict[str, Place] = {}
    for item, where in training:
        trained.setdefault(canonical_hash(item, tier_field), where)
    problems = []
    for i, (item, where) in enumerate(probe):
        hit = trained.get(canonical_hash(item, tier_field))
        if hit is not None:
            problems.append(
                where.problem(
                    f"probe item {i} of family {family!r} is also a training variant "
                    f"({hit.field} at {hit}); probe items must be held out"
                )
            )
    return problems
