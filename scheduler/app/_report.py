"""`curriculum report`: a run read back from the store, for a person at a terminal."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from .._events import Event
from ..recording import active_attention
from ..store import RunInfo, Store, StoreError, open_store, require_existing
from ._settings import Settings


def _pick_run(store: Store, name: str | None) -> RunInfo:
    if name:
        info = store.get_run(name)
        if info is None:
            known = ", ".join(r.name for r in store.runs()) or "(no runs yet)"
            raise StoreError(f"no run named {name!r} in the store; known runs: {known}")
        return info
    runs = store.runs()
    if not runs:
        raise StoreError("the store holds no runs yet: run `curriculum simulate` first")
    return max(runs, key=lambda r: r.created_at)


def print_report(db: str | None, run: str | None, out: Console, *, limit: int = 20) -> int:
    url = db or Settings.load().db
    require_existing(url)
    store = open_store(url)
    try:
        info = _pick_run(store, run)
        _print(store, info, out, limit)
    finally:
        store.close()
    return 0


def _print(store: Store, info: RunInfo, out: Console, limit: int) -> None:
    checkpoint = store.latest_checkpoint(info.run_id)
    policy = info.config.get("policy", {})
    out.print(
        f"run {info.name!r} (id {info.run_id}), created {info.created_at:%Y-%m-%d %H:%M}Z, "
        f"seed {info.seed}, policy {policy.get('name', '?')}, {len(info.families)} families"
    )
    out.print(
        "latest checkpoint: "
        + (f"step {checkpoint[0]}" if checkpoint else "none (the run never committed)")
    )
    points = store.probe_points(info.run_id)
    if len(points):
        # The latest probe of every family, then a mean per step for the curve's ends.
        order = np.lexsort((points.step, points.family))
        last = np.r_[points.family[order][1:] != points.family[order][:-1], True]
        latest = order[last]
        steps = np.unique(points.step)
        first_mean = float(points.score[points.step == steps[0]].mean())
        out.print(
            f"probe curve: {len(points)} points over {steps.size} rounds; mean score "
            f"{first_mean:.3f} at step {steps[0]} -> {float(points.score[latest].mean()):.3f} "
            f"at step {steps[-1]}"
        )
    events = store.events(info.run_id)
    counts = Counter(e.kind for e in events)
    if counts:
        out.print("events: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    # Families that need attention: the latest attention event of each family that no later
    # event cleared (held back as idle, suspected hacking, a regression, an open breaker).
    active = active_attention(events)
    if active:
        table = Table(title="families that need attention (latest event of each)")
        for col in ("family", "domain", "event", "step", "evidence"):
            table.add_column(col)
        for e in active[:limit]:
            table.add_row(e.family or "", e.domain or "", e.kind, str(e.step), _evidence(e))
        out.print(table)
    if events:
        table = Table(title=f"last {min(limit, len(events))} events")
        for col in ("step", "kind", "family / domain", "evidence"):
            table.add_column(col)
        for e in events[-limit:]:
            table.add_row(str(e.step), e.kind, e.family or e.domain or "", _evidence(e))
        out.print(table)


def _evidence(event: Event) -> str:
    """The first four payload entries, each at a readable precision."""
    return ", ".join(f"{k}={_short(v)}" for k, v in list(event.payload.items())[:4])


def _short(value: Any) -> str:
    """A payload value at a precision a person reads: 3 significant digits, also inside
    lists (a confidence interval) and mappings."""
    if isinstance(value, float):
        return f"{value:.3f}" if value == 0 or 1e-3 <= abs(value) < 1e4 else f"{value:.3g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    return str(value)
