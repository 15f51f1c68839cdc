"""Build the Catalog's arrays from loaded manifests (the loader does not build arrays)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ._catalog import Catalog, Items, PoolTable
from ._files import SourcePolicy
from ._loader import LoadedManifest, cyclic_gc_paused, load_manifests


def build_catalog(manifests: Sequence[LoadedManifest]) -> Catalog:
    """Families in (file, domain, family) order; arms of a family contiguous, tier order."""
    with cyclic_gc_paused():
        return _build(manifests)


def _build(manifests: Sequence[LoadedManifest]) -> Catalog:
    domains = [d for m in manifests for d in m.spec.domains]
    families = [f for m in manifests for f in m.families]
    domain_index = {d.name: i for i, d in enumerate(domains)}
    specs = [f.spec for f in families]

    def per_family(values: Sequence[float]) -> np.ndarray:
        return np.asarray(values, dtype=np.float64).reshape(len(families))

    tier_pools = [f.pools for f in families]
    offsets = np.cumsum([0] + [len(p) for p in tier_pools]).tolist()
    items: dict[int, Items] = {
        offsets[i] + t: listed
        for i, p in enumerate(tier_pools)
        if p.items
        for t, listed in p.items.items()
    }
    probe_items = {i: f.probe.items for i, f in enumerate(families) if f.probe.items is not None}
    pools = PoolTable(np.concatenate([p.sizes for p in tier_pools]) if tier_pools else [], items)
    probe_pools = PoolTable([f.probe.size for f in families], probe_items)
    source_hashes = {m.path: m.sha256 for m in manifests}
    for m in manifests:
        source_hashes.update(m.data_files)
    return Catalog(
        domain_names=tuple(d.name for d in domains),
        family_names=tuple(s.name for s in specs),
        tier_names=tuple(s.tier_names for s in specs),
        tier_separate=np.array([s.tier_mode == "separate" for s in specs], dtype=bool),
        domain_of_family=np.array([domain_index[f.domain] for f in families], dtype=np.int64),
        domain_min_share=np.array([d.min_share for d in domains], dtype=np.float64),
        domain_max_share=np.array([d.max_share for d in domains], dtype=np.float64),
        domain_priority=np.array([d.priority for d in domains], dtype=np.float64),
        domain_compute_basis=np.array(
            [d.quota is not None and d.quota.basis == "compute" for d in domains], dtype=bool
        ),
        family_max_share=per_family([s.max_share for s in specs]),
        family_weight=per_family([s.weight for s in specs]),
        family_priority=per_family([s.priority for s in specs]),
        cost_s=per_family([s.cost_s for s in specs]),
        reward_low=per_family([s.reward_range[0] for s in specs]),
        reward_high=per_family([s.reward_range[1] for s in specs]),
        chance_success=per_family([s.chance_success for s in specs]),
        pools=pools,
        probe_pools=probe_pools,
        sources=tuple(m.path for m in manifests),
        source_hashes=source_hashes,
        specs=tuple(domains),
    )


def load_catalog(*paths: str | os.PathLike[str], sources: SourcePolicy | None = None) -> Catalog:
    """Load manifests (files, directories or globs) into a Catalog, or raise ManifestError."""
    return build_catalog(load_manifests(*paths, sources=sources))
