"""Catalog: an immutable, array-indexed view of domains, families and tiers.

An arm is one (family, tier) pair. The arms of a family are contiguous:
``arm = arm_start[family] + tier``. Everything the scheduler needs per family or per arm is a
numpy array here, so the scheduler never walks the pydantic specs on a hot path.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class VariantPool:
    """The variants of one arm (or the probe items of one family).

    ``items`` is None when the pool is declared by size only: the trainer's environment then
    materialises variant ``i`` itself from the id.
    """

    size: int
    items: tuple[Mapping[str, Any], ...] | None = None

    def item(self, index: int) -> Mapping[str, Any] | None:
        return None if self.items is None else self.items[index]


Items = tuple[Mapping[str, Any], ...]


class PoolTable(Sequence[VariantPool]):
    """Many pools as one array of sizes, plus the item lists of the few that have them.

    A catalog of 100,000 arms declared by ``count:`` then holds one int64 array instead of
    100,000 ``VariantPool`` objects; indexing still gives a ``VariantPool``, made on demand.
    """

    def __init__(self, sizes: npt.ArrayLike, items: Mapping[int, Items] | None = None) -> None:
        self.sizes: IntArray = np.array(sizes, dtype=np.int64).reshape(-1)  # [n_pools]
        self.sizes.setflags(write=False)
        self.items: Mapping[int, Items] = dict(items or {})  # pool index -> its items

    @classmethod
    def of(cls, pools: Iterable[VariantPool]) -> PoolTable:
        """The table of a sequence of pools (the identity on a table)."""
        if isinstance(pools, PoolTable):
            return pools
        listed = list(pools)
        items = {i: p.items for i, p in enumerate(listed) if p.items is not None}
        return cls(np.fromiter((p.size for p in listed), np.int64, len(listed)), items)

    def __len__(self) -> int:
        return int(self.sizes.shape[0])

    @overload
    def __getitem__(self, index: int) -> VariantPool: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[VariantPool]: ...

    def __getitem__(self, index: int | slice) -> VariantPool | Sequence[VariantPool]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(len(self))[index])
        i = range(len(self))[index]  # IndexError, and negative indices, as a tuple does
        return VariantPool(int(self.sizes[i]), self.items.get(i))

    def __iter__(self) -> Iterator[VariantPool]:
        for i, size in enumerate(self.sizes.tolist()):
            yield VariantPool(size, self.items.get(i))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PoolTable({len(self)} pools, {len(self.items)} with items)"


@dataclass(frozen=True, eq=False)
class Catalog:
    """Array view of a set of domains, built by :func:`domains.load_catalog` or `synthetic`."""

    domain_names: tuple[str, ...]
    family_names: tuple[str, ...]
    tier_names: tuple[tuple[str, ...], ...]  # per family
    domain_of_family: IntArray  # int64 [n_families]
    domain_min_share: FloatArray  # float64 [n_domains]
    domain_max_share: FloatArray  # float64 [n_domains]
    domain_priority: FloatArray  # float64 [n_domains]
    family_max_share: FloatArray  # float64 [n_families], 1.0 when uncapped
    family_weight: FloatArray  # float64 [n_families], static weight from the manifest
    family_priority: FloatArray  # float64 [n_families]
    cost_s: FloatArray  # float64 [n_families], estimated seconds per episode
    reward_low: FloatArray  # float64 [n_families]
    reward_high: FloatArray  # float64 [n_families]
    chance_success: FloatArray  # float64 [n_families], success rate of a random policy
    pools: Sequence[VariantPool]  # per arm; a PoolTable after construction
    probe_pools: Sequence[VariantPool]  # per family; a PoolTable after construction
    sources: tuple[str, ...] = ()  # manifest files the catalog was loaded from
    source_hashes: Mapping[str, str] = field(default_factory=dict)  # file -> sha256 of its bytes
    specs: tuple[Any, ...] = ()  # the DomainSpec models, when loaded from manifests
    # bool [n_domains]: the domain's quota counts compute (cost-weighted), not samples
    domain_compute_basis: npt.NDArray[np.bool_] = field(
        default_factory=lambda: np.zeros(0, dtype=bool)  # empty: all on a samples basis
    )
    # bool [n_families]: the family's tiers are separate skills (tier_mode: separate), all
    # trained at once, instead of a ladder climbed one current tier at a time
    tier_separate: npt.NDArray[np.bool_] = field(
        default_factory=lambda: np.zeros(0, dtype=bool)  # empty: every family a ladder
    )

    # Derived index arrays, filled in __post_init__.
    arm_start: IntArray = field(init=False)  # int64 [n_families + 1]
    family_of_arm: IntArray = field(init=False)  # int64 [n_arms]
    tier_of_arm: IntArray = field(init=False)  # int64 [n_arms]
    n_tiers: IntArray = field(init=False)  # int64 [n_families]
    pool_size: IntArray = field(init=False)  # int64 [n_arms]
    probe_size: IntArray = field(init=False)  # int64 [n_families]

    def __post_init__(self) -> None:
        n_tiers = np.array([len(t) for t in self.tier_names], dtype=np.int64)
        arm_start = np.concatenate([[0], np.cumsum(n_tiers)]).astype(np.int64)
        family_of_arm = np.repeat(np.arange(len(n_tiers), dtype=np.int64), n_tiers)
        tier_of_arm = np.arange(int(arm_start[-1]), dtype=np.int64) - arm_start[family_of_arm]
        derived: dict[str, Any] = {
            "n_tiers": n_tiers,
            "arm_start": arm_start,
            "family_of_arm": family_of_arm,
            "tier_of_arm": tier_of_arm,
            "pools": PoolTable.of(self.pools),
            "probe_pools": PoolTable.of(self.probe_pools),
        }
        derived["pool_size"] = derived["pools"].sizes
        derived["probe_size"] = derived["probe_pools"].sizes
        if self.domain_compute_basis.shape != (len(self.domain_names),):
            derived["domain_compute_basis"] = np.zeros(len(self.domain_names), dtype=bool)
        if self.tier_separate.shape != (len(self.family_names),):
            derived["tier_separate"] = np.zeros(len(self.family_names), dtype=bool)
        for name, value in derived.items():
            object.__setattr__(self, name, value)
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        if len(self.pools) != self.n_arms or len(self.probe_pools) != self.n_families:
            raise ValueError("one variant pool per arm and one probe pool per family are needed")
        object.__setattr__(self, "_family_index", {n: i for i, n in enumerate(self.family_names)})
        object.__setattr__(self, "_domain_index", {n: i for i, n in enumerate(self.domain_names)})

    # Sizes -------------------------------------------------------------------------------
    @property
    def n_domains(self) -> int:
        return len(self.domain_names)

    @property
    def n_families(self) -> int:
        return len(self.family_names)

    @property
    def n_arms(self) -> int:
        return int(self.arm_start[-1])

    # Name <-> id ---------------------------------------------------------------------------
    def family_id(self, name: str) -> int:
        try:
            return int(self._family_index[name])  # type: ignore[attr-defined]
        except KeyError:
            raise KeyError(f"unknown family {name!r}") from None

    def domain_id(self, name: str) -> int:
        try:
            return int(self._domain_index[name])  # type: ignore[attr-defined]
        except KeyError:
            raise KeyError(f"unknown domain {name!r}") from None

    def family_ids(self, names: Sequence[str]) -> IntArray:
        return np.fromiter((self.family_id(n) for n in names), dtype=np.int64, count=len(names))

    def arm_id(self, family: int | str, tier: int) -> int:
        f = self.family_id(family) if isinstance(family, str) else int(family)
        if not 0 <= tier < int(self.n_tiers[f]):
            raise KeyError(f"family {self.family_names[f]!r} has no tier {tier}")
        return int(self.arm_start[f]) + tier

    def variant(self, arm: int, variant: int) -> Mapping[str, Any] | None:
        """The inline or JSONL item of a variant, or None for a pool declared by size."""
        return self.pools[arm].item(variant)

    # Identity ----------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """A hash of what the scheduler depends on: names, tiers, quotas, pool sizes, costs."""
        h = hashlib.sha256()
        h.update(json.dumps([self.domain_names, self.family_names, self.tier_names]).encode())
        for arr in (
            self.domain_of_family,
            self.domain_min_share,
            self.domain_max_share,
            self.family_max_share,
            self.family_weight,
            self.cost_s,
            self.reward_low,
            self.reward_high,
            self.chance_success,
            self.pool_size,
            self.domain_compute_basis,
        ):
            h.update(np.ascontiguousarray(arr).tobytes())
        if self.tier_separate.any():  # (catalogs of ladders keep their earlier fingerprint)
            h.update(b"tier_separate" + np.ascontiguousarray(self.tier_separate).tobytes())
        return h.hexdigest()

    def summary(self) -> dict[str, Any]:
        return {
            "domains": self.n_domains,
            "families": self.n_families,
            "arms": self.n_arms,
            "tiers": int(self.n_tiers.sum()),
            "min_share_sum": float(self.domain_min_share.sum()),
            "max_share_sum": float(np.minimum(self.domain_max_share, 1.0).sum()),
            # Python ints: an int64 sum of many large pools would wrap around silently.
            "variants": sum(self.pool_size.tolist()),
            "probe_items": sum(self.probe_size.tolist()),
        }

    # Construction for tests and benchmarks -------------------------------------------------
    @classmethod
    def synthetic(
        cls,
        n_domains: int = 3,
        families_per_domain: int = 4,
        n_tiers: int = 3,
        pool_size: int = 16,
        *,
        min_share: float = 0.0,
        max_share: float = 1.0,
        chance_success: float = 0.0,
        tier_mode: str = "ladder",
    ) -> Catalog:
        """A regular catalog with no manifest behind it: for tests, benchmarks and examples."""
        n_fam = n_domains * families_per_domain
        ones = np.ones(n_fam)
        return cls(
            domain_names=tuple(f"domain_{d}" for d in range(n_domains)),
            family_names=tuple(
                f"domain_{d}.family_{j}"
                for d in range(n_domains)
                for j in range(families_per_domain)
            ),
            tier_names=tuple(tuple(f"t{t}" for t in range(n_tiers)) for _ in range(n_fam)),
            domain_of_family=np.repeat(np.arange(n_domains), families_per_domain),
            domain_min_share=np.full(n_domains, min_share),
            domain_max_share=np.full(n_domains, max_share),
            domain_priority=np.ones(n_domains),
            family_max_share=ones.copy(),
            family_weight=ones.copy(),
            family_priority=ones.copy(),
            cost_s=ones.copy(),
            reward_low=np.zeros(n_fam),
            reward_high=ones.copy(),
            chance_success=np.full(n_fam, chance_success),
            pools=PoolTable(np.full(n_fam * n_tiers, pool_size)),
            probe_pools=PoolTable(np.full(n_fam, 32)),
            tier_separate=np.full(n_fam, tier_mode == "separate"),
        )
