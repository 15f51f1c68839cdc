"""Property: any valid manifest (a dict dumped to YAML) loads, with one arm per tier."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domains import load_catalog

TIER_WORDS = ["easy", "medium", "hard", "expert", "frontier", "x-1", "y.2"]


@st.composite
def families(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], list[int]]:
    """A valid family and the pool size it should get per tier."""
    n = draw(st.integers(1, 5))
    named = draw(st.booleans())
    names = draw(st.permutations(TIER_WORDS))[:n] if named else None
    family: dict[str, Any] = {
        draw(st.sampled_from(["name", "task_family"])): name,
        "environment": "env",
        "verification": "check",
    }
    if names is not None or n > 1 or draw(st.booleans()):
        family["tiers"] = names if names is not None else n
    form = draw(st.sampled_from(["count", "counts", "inline"]))
    if form == "count":
        size = draw(st.integers(1, 1000))
        family["variants"] = {"count": size}
        sizes = [size] * n
    elif form == "counts":
        sizes = draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))
        family["variants"] = {"count": sizes}
    else:
        per_tier = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
        shared = draw(st.integers(0, 2))
        items: list[dict[str, Any]] = [{"shared": i} for i in range(shared)]
        for t, k in enumerate(per_tier):
            label: Any = names[t] if names is not None and draw(st.booleans()) else t
            items += [{"id": f"{t}-{j}", "tier": label} for j in range(k)]
        family["variants"] = draw(st.permutations(items))
        sizes = [k + shared for k in per_tier]
    probe = draw(st.sampled_from(["none", "size", "items"]))
    if probe == "size":
        family["probe"] = {"size": draw(st.integers(0, 100)), "source": "held out"}
    elif probe == "items":
        family["probe"] = {"items": [{"probe": i} for i in range(draw(st.integers(1, 4)))]}
    if draw(st.booleans()):
        family["cost_s"] = draw(st.floats(0.01, 1e4))
        family["chance_success"] = draw(st.floats(0.0, 0.99))
        family["reward_range"] = [-1.0, draw(st.floats(0.5, 10.0))]
    return family, sizes


@st.composite
def manifests(draw: st.DrawFn) -> tuple[dict[str, Any], list[int]]:
    domains = []
    all_sizes: list[int] = []
    for d in range(draw(st.integers(1, 3))):
        fams = []
        for f in range(draw(st.integers(1, 4))):
            family, sizes = draw(families(f"d{d}.f{f}"))
            fams.append(family)
            all_sizes += sizes
        domain: dict[str, Any] = {"name": f"d{d}", "families": fams}
        if d > 0 and draw(st.booleans()):
            domain["quota"] = {"min_share": draw(st.sampled_from([0.0, 0.1, 0.3]))}
        domains.append(domain)
    return {"version": 1, "domains": domains}, all_sizes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests(), st.booleans())
def test_valid_manifests_load(case: tuple[dict[str, Any], list[int]], flow: bool) -> None:
    manifest, sizes = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.yaml"
        path.write_text(yaml.safe_dump(manifest, sort_keys=False, default_flow_style=flow))
        catalog = load_catalog(path)
    n_tiers = [len(t) for t in catalog.tier_names]
    assert catalog.n_arms == sum(n_tiers) == len(sizes)
    assert catalog.pool_size.tolist() == sizes
    assert catalog.n_families == sum(len(d["families"]) for d in manifest["domains"])
