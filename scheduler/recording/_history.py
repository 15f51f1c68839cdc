"""RunHistory: one recorded run read back (from the store or from MLflow) as numpy arrays.

The analysis notebook and the figures work from this one shape, whatever the source. The
views (``domain_curves``, ``domain_weights``, ``tier_timeline``) are derived on demand with
vectorised numpy: a probe round may cover only some families, so every view forward-fills
each family's latest probe point to the later rounds before it aggregates.

Two sources, two resolutions:

- the store holds every probe point with its count and Jeffreys band, every weight snapshot
  and every event;
- MLflow holds per-family metrics only every ``detail_every`` steps (``probe/<domain>/<family>``
  is the family's latest probe score at that step, ``tier/...`` its current tier,
  ``weight/...`` its weight) and the events in the ``events.jsonl`` artifact. MLflow has no
  probe counts, so the bands are NaN unless a ``probe_n/<domain>/<family>`` metric was logged,
  in which case a Jeffreys band is derived from it.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from domains import Catalog, CurriculumError, load_catalog
from policies import binomial_interval

from .._events import Event
from ..store import RunInfo, Store, StoreError, open_store, require_existing
from ..tracking import mask_secrets

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

UNKNOWN_DOMAIN = "(unknown)"

# Event kinds that put a family on the attention list, and the kinds that clear each one:
# a family held back as idle (out of reach, flat or stalled: nothing to teach it now, or a
# broken environment), suspected of reward hacking, a mastered family whose top tier fell
# back (``mastered_cleared``: a regression), or an open circuit breaker (half-open is still
# on probation). Each flag's own ``*_cleared`` (or, for a regression, ``mastered`` again)
# ends it. The last three kinds are those of runs recorded before the skill model (format
# 2 and earlier), kept so such a store still reads: a tier change cleared a regression or a
# plateau, and ``released`` a quarantine.
_TIER_CHANGE = frozenset({"tier_promoted", "tier_demoted"})
CLEARED_BY: dict[str, frozenset[str]] = {
    "idle": frozenset({"idle_cleared"}),
    "suspected_reward_hacking": frozenset({"suspected_reward_hacking_cleared"}),
    "mastered_cleared": frozenset({"mastered"}),
    "breaker_opened": frozenset({"breaker_closed"}),
    "regression": _TIER_CHANGE,
    "plateau": _TIER_CHANGE,
    "quarantined": frozenset({"released"}),
}
ATTENTION_KINDS: tuple[str, ...] = tuple(CLEARED_BY)


def active_attention(events: Iterable[Event]) -> list[Event]:
    """The latest attention event of each family that no later event cleared
    (:data:`CLEARED_BY`), newest first (ties: by family). Events of one step keep the order
    they were written in."""
    active: dict[str, dict[str, Event]] = {}
    for e in sorted(events, key=lambda ev: ev.step):  # stable: keeps write order
        if e.family is None:
            continue
        kinds = active.setdefault(e.family, {})
        for kind, clearers in CLEARED_BY.items():
            if e.kind in clearers:
                kinds.pop(kind, None)
        if e.kind in CLEARED_BY:
            kinds[e.kind] = e
    latest = [max(k.values(), key=lambda ev: ev.step) for k in active.values() if k]
    latest.sort(key=lambda e: (-e.step, e.family or ""))
    return latest


class DomainCurves(NamedTuple):
    """Probe curves per domain at every probe round (NaN before a domain's first probe)."""

    steps: IntArray  # int64 [k], the probe rounds
    mean: FloatArray  # float64 [k, D], mean latest score of the domain's probed families
    low: FloatArray  # float64 [k, D], mean of those families' lower CI bounds
    high: FloatArray  # float64 [k, D], mean of their upper CI bounds


class TierTimeline(NamedTuple):
    """The tier each family was last probed at, at every probe round."""

    steps: IntArray  # int64 [k]
    tiers: IntArray  # int64 [k, F], -1 before the family's first probe


class EventCounts(NamedTuple):
    """Cumulative event counts per kind, at every step that had an event."""

    kinds: tuple[str, ...]  # K kinds, sorted
    steps: IntArray  # int64 [k]
    cumulative: IntArray  # int64 [k, K]


@dataclass(frozen=True)
class AttentionRow:
    """A family that needs attention: its latest still-active attention event."""

    family: str
    domain: str
    kind: str
    step: int
    evidence: str


@dataclass(frozen=True, eq=False)
class RunHistory:
    """A run as arrays. Probe columns are aligned ``[P]``; family ids index ``family_names``."""

    run_name: str
    source: str  # where it was read from, e.g. "store sqlite:///runs.db"
    domain_names: tuple[str, ...]
    family_names: tuple[str, ...]
    domain_of_family: IntArray  # int64 [F]
    probe_step: IntArray  # int64 [P]
    probe_family: IntArray  # int64 [P]
    probe_tier: IntArray  # int64 [P]
    probe_score: FloatArray  # float64 [P]
    probe_ci_low: FloatArray  # float64 [P], NaN when unknown
    probe_ci_high: FloatArray  # float64 [P], NaN when unknown
    weight_steps: IntArray  # int64 [k]
    weights: FloatArray  # float64 [k, F], family sampling weights; NaN where not logged
    events: tuple[Event, ...] = field(default=())

    def __post_init__(self) -> None:
        n_fam = len(self.family_names)
        if self.domain_of_family.shape != (n_fam,):
            raise ValueError("domain_of_family needs one domain id per family")
        if self.weights.shape != (self.weight_steps.shape[0], n_fam):
            raise ValueError(
                f"weights must have shape [k, {n_fam}], got {self.weights.shape} "
                f"for {self.weight_steps.shape[0]} steps"
            )
        sizes = {
            a.shape
            for a in (
                self.probe_step,
                self.probe_family,
                self.probe_tier,
                self.probe_score,
                self.probe_ci_low,
                self.probe_ci_high,
            )
        }
        if len(sizes) != 1:
            raise ValueError(f"probe columns must be aligned 1-D arrays, got shapes {sizes}")

    @property
    def n_domains(self) -> int:
        return len(self.domain_names)

    @property
    def n_families(self) -> int:
        return len(self.family_names)

    # Constructors --------------------------------------------------------------------------
    @classmethod
    def from_store(
        cls, url: str, run: str | None = None, *, catalog: Catalog | None = None
    ) -> RunHistory:
        """Read run ``run`` (the latest run when None) from the store at ``url``.

        Domains come from ``catalog`` when given, else from the manifests named in the run's
        params (when they still load to the same catalog fingerprint), else from the events;
        a family none of these place is put in the domain ``(unknown)``.
        """
        require_existing(url)  # a read creates no store
        store = open_store(url)
        try:
            return cls.from_open_store(store, run, catalog=catalog, source=mask_secrets(url))
        finally:
            store.close()

    @classmethod
    def from_open_store(
        cls,
        store: Store,
        run: str | None = None,
        *,
        catalog: Catalog | None = None,
        source: str = "",
    ) -> RunHistory:
        """Like ``from_store``, on a store that is already open (a recorder's own)."""
        info = _pick_run(store, run, source)
        points = store.probe_points(info.run_id)
        steps, weights = store.weights(info.run_id)
        events = store.events(info.run_id)
        n_fam = len(info.families)
        if weights.shape[0] == 0:
            weights = np.zeros((0, n_fam), np.float64)
        domain_names, domain_of_family = _store_domains(info, events, catalog)
        return cls(
            run_name=info.name,
            source=f"store {source}",
            domain_names=domain_names,
            family_names=info.families,
            domain_of_family=domain_of_family,
            probe_step=points.step,
            probe_family=points.family,
            probe_tier=points.tier,
            probe_score=points.score,
            probe_ci_low=points.ci_low,
            probe_ci_high=points.ci_high,
            weight_steps=steps,
            weights=weights,
            events=tuple(events),
        )

    @classmethod
    def from_mlflow(cls, tracking_uri: str, run_id: str) -> RunHistory:
        """Read MLflow run ``run_id``: per-family probe, tier and weight metrics and the
        ``events.jsonl`` artifact (see the module docstring for what MLflow lacks)."""
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri)
        try:
            run = client.get_run(run_id)
        except MlflowException as exc:
            raise StoreError(
                f"MLflow run {run_id!r} not found at {mask_secrets(tracking_uri)}: pass the run "
                f"id printed by `curriculum simulate` (or shown in `curriculum ui`) ({exc.message})"
            ) from None
        keys = sorted(run.data.metrics)
        paths = sorted({k.split("/", 1)[1] for k in keys if _is_family_key(k)})
        if not paths:
            raise StoreError(
                f"MLflow run {run_id!r}: no per-family metrics (probe/<domain>/<family>); it was "
                "recorded without detail (a baseline run?), so it cannot be plotted per family"
            )
        domain_of_path = [p.split("/", 1)[0] for p in paths]
        domain_names = tuple(sorted(set(domain_of_path)))
        domain_index = {d: i for i, d in enumerate(domain_names)}
        family_names = tuple(p.split("/", 1)[1] for p in paths)
        domain_of_family = np.array([domain_index[d] for d in domain_of_path], dtype=np.int64)
        present = set(keys)

        def history(kind: str) -> tuple[IntArray, IntArray, FloatArray]:
            """(family, step, value) of every logged point of ``kind/<path>``."""
            fam: list[int] = []
            step: list[int] = []
            value: list[float] = []
            for f, path in enumerate(paths):
                key = f"{kind}/{path}"
                if key not in present:
                    continue
                for m in client.get_metric_history(run_id, key):
                    fam.append(f)
                    step.append(int(m.step))
                    value.append(float(m.value))
            return (
                np.asarray(fam, dtype=np.int64),
                np.asarray(step, dtype=np.int64),
                np.asarray(value, dtype=np.float64),
            )

        p_fam, p_step, p_score = history("probe")
        t_fam, t_step, t_value = history("tier")
        w_fam, w_step, w_value = history("weight")
        n_fam, n_step, n_value = history("probe_n")
        tier = _lookup_at(t_fam, t_step, t_value, p_fam, p_step)
        count = _lookup_at(n_fam, n_step, n_value, p_fam, p_step)
        low, high = binomial_interval(p_score * count, count)
        unknown = ~np.isfinite(count)
        low[unknown] = np.nan
        high[unknown] = np.nan
        weight_steps = np.unique(w_step)
        weights = np.full((weight_steps.shape[0], len(paths)), np.nan)
        weights[np.searchsorted(weight_steps, w_step), w_fam] = w_value
        return cls(
            run_name=str(run.info.run_name or run_id),
            source=f"mlflow {mask_secrets(tracking_uri)} run {run_id}",
            domain_names=domain_names,
            family_names=family_names,
            domain_of_family=domain_of_family,
            probe_step=p_step,
            probe_family=p_fam,
            probe_tier=np.where(np.isfinite(tier), tier, -1).astype(np.int64),
            probe_score=p_score,
            probe_ci_low=low,
            probe_ci_high=high,
            weight_steps=weight_steps,
            weights=weights,
            events=tuple(_mlflow_events(client, run_id)),
        )

    # Views ---------------------------------------------------------------------------------
    def _one_hot(self) -> FloatArray:
        """float64 [F, D]: 1 where the family belongs to the domain (for matmul aggregation)."""
        hot = np.zeros((self.n_families, self.n_domains))
        hot[np.arange(self.n_families), self.domain_of_family] = 1.0
        return hot

    def _probe_grid(self) -> tuple[IntArray, IntArray]:
        """Probe rounds ``[k]`` and, per round and family, the index of the family's latest
        probe point up to that round ``[k, F]`` (-1 before its first). When a family was
        probed at several tiers in one round, the highest tier's point counts."""
        steps = np.unique(self.probe_step)
        grid = np.full((steps.shape[0], self.n_families), -1, dtype=np.int64)
        if steps.size == 0:
            return steps, grid
        order = np.lexsort((self.probe_tier, self.probe_family, self.probe_step))
        row = np.searchsorted(steps, self.probe_step[order])
        fam = self.probe_family[order]
        last = np.r_[(row[1:] != row[:-1]) | (fam[1:] != fam[:-1]), True]
        grid[row[last], fam[last]] = order[last]
        # Forward fill: the latest round at or before each round where the family has a point.
        rounds = np.where(grid >= 0, np.arange(steps.shape[0])[:, None], 0)
        filled_from = np.maximum.accumulate(rounds, axis=0)
        filled = grid[filled_from, np.arange(self.n_families)]
        seen = np.maximum.accumulate(grid >= 0, axis=0)
        return steps, np.where(seen, filled, -1)

    def _domain_mean(self, values: FloatArray) -> FloatArray:
        """float64 [k, D]: mean over each domain's finite family values; NaN when none."""
        ok = np.isfinite(values)
        hot = self._one_hot()
        total = np.where(ok, values, 0.0) @ hot
        count = ok.astype(np.float64) @ hot
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / count, np.nan)

    def domain_curves(self) -> DomainCurves:
        """Per-domain probe curves: at each round, the mean of each family's latest score
        (and of its CI bounds) over the domain's families probed so far."""
        steps, grid = self._probe_grid()
        seen = grid >= 0
        idx = np.where(seen, grid, 0)

        def column(values: FloatArray) -> FloatArray:
            if values.size == 0:
                return np.full((steps.shape[0], self.n_domains), np.nan)
            return self._domain_mean(np.where(seen, values[idx], np.nan))

        return DomainCurves(
            steps,
            column(self.probe_score),
            column(self.probe_ci_low),
            column(self.probe_ci_high),
        )

    def domain_weights(self) -> tuple[IntArray, FloatArray]:
        """Weight snapshot steps ``[k]`` and the domain shares ``[k, D]`` (sum of families)."""
        return self.weight_steps, np.nan_to_num(self.weights, nan=0.0) @ self._one_hot()

    def tier_timeline(self) -> TierTimeline:
        """The tier each family was probed at, carried forward between its probes."""
        steps, grid = self._probe_grid()
        if self.probe_tier.size == 0:
            return TierTimeline(steps, grid)
        tiers = np.where(grid >= 0, self.probe_tier[np.maximum(grid, 0)], -1)
        return TierTimeline(steps, tiers.astype(np.int64))

    def event_counts(self) -> EventCounts:
        """Cumulative number of events of each kind at every step that had one."""
        if not self.events:
            return EventCounts((), np.zeros(0, np.int64), np.zeros((0, 0), np.int64))
        kinds = tuple(sorted({e.kind for e in self.events}))
        kind_id = np.array([kinds.index(e.kind) for e in self.events], dtype=np.int64)
        step = np.array([e.step for e in self.events], dtype=np.int64)
        steps, row = np.unique(step, return_inverse=True)
        counts = np.zeros((steps.shape[0], len(kinds)), dtype=np.int64)
        np.add.at(counts, (row, kind_id), 1)
        return EventCounts(kinds, steps, np.cumsum(counts, axis=0))

    def attention(self) -> list[AttentionRow]:
        """Families that need attention, newest first: for each family, its latest event of
        a kind in :data:`ATTENTION_KINDS` that no later event has cleared
        (:func:`active_attention`)."""
        active = active_attention(self.events)
        names = dict(zip(self.family_names, self.domain_of_family.tolist(), strict=True))
        rows = []
        for latest in active:
            family = latest.family or ""
            d = names.get(family)
            domain = latest.domain or (self.domain_names[d] if d is not None else UNKNOWN_DOMAIN)
            rows.append(
                AttentionRow(family, domain, latest.kind, latest.step, evidence(latest.payload))
            )
        rows.sort(key=lambda r: (-r.step, r.family))
        return rows


def evidence(payload: dict[str, Any], limit: int = 4) -> str:
    """A short ``key=value`` summary of an event payload (floats to 3 significant digits)."""
    parts = [
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in list(payload.items())[:limit]
    ]
    return ", ".join(parts)


# Store helpers -------------------------------------------------------------------------------
def _pick_run(store: Store, name: str | None, url: str) -> RunInfo:
    if name is not None:
        info = store.get_run(name)
        if info is None:
            known = ", ".join(r.name for r in store.runs()) or "(no runs yet)"
            raise StoreError(
                f"RUN: no run named {name!r} in {mask_secrets(url)}; known runs: {known}"
            )
        return info
    runs = store.runs()
    if not runs:
        raise StoreError(
            f"{mask_secrets(url)}: the store holds no runs yet: run `curriculum simulate` first"
        )
    return max(runs, key=lambda r: (r.created_at, r.run_id))


def _store_domains(
    info: RunInfo, events: Sequence[Event], catalog: Catalog | None
) -> tuple[tuple[str, ...], IntArray]:
    """Domain names and ``domain_of_family`` for a stored run (see ``from_store``)."""
    if catalog is None:
        catalog = _catalog_from_params(info)
    if catalog is not None:
        if catalog.family_names != info.families:
            raise StoreError(
                f"catalog: its {catalog.n_families} families do not match the "
                f"{len(info.families)} families of run {info.name!r}; pass the catalog the run "
                "was recorded with"
            )
        return catalog.domain_names, np.asarray(catalog.domain_of_family, dtype=np.int64)
    family_domain = {e.family: e.domain for e in events if e.family and e.domain}
    known = sorted(set(family_domain.values()))
    names = (*known, UNKNOWN_DOMAIN) if len(family_domain) < len(info.families) else tuple(known)
    index = {d: i for i, d in enumerate(names)}
    unknown = index.get(UNKNOWN_DOMAIN, -1)
    dof = np.array(
        [index.get(family_domain.get(f, UNKNOWN_DOMAIN), unknown) for f in info.families],
        dtype=np.int64,
    )
    log.info(
        "run %r: domains taken from its events (%d of %d families placed)",
        info.name,
        len(family_domain),
        len(info.families),
    )
    return names, dof


def _catalog_from_params(info: RunInfo) -> Catalog | None:
    """The run's catalog reloaded from the manifest paths in its params, if still the same."""
    raw = info.config.get("params", {}).get("domains")
    try:
        paths = json.loads(raw) if isinstance(raw, str) else raw
        if not paths or not all(Path(p).exists() for p in paths):
            return None
        catalog = load_catalog(*paths)
    except (CurriculumError, TypeError, ValueError, OSError) as exc:
        log.info("run %r: manifests %r do not load (%s)", info.name, raw, exc)
        return None
    if catalog.fingerprint != info.catalog_fingerprint:
        log.info("run %r: manifests %r changed since the run", info.name, raw)
        return None
    return catalog


# MLflow helpers ------------------------------------------------------------------------------
_FAMILY_KINDS = ("probe/", "tier/", "weight/")


def _is_family_key(key: str) -> bool:
    return key.startswith(_FAMILY_KINDS) and key.count("/") == 2


def _lookup_at(
    fam: IntArray, step: IntArray, value: FloatArray, at_fam: IntArray, at_step: IntArray
) -> FloatArray:
    """The latest ``value`` of family ``at_fam[i]`` logged at or before ``at_step[i]``;
    NaN when there is none."""
    out = np.full(at_fam.shape[0], np.nan)
    if fam.size == 0 or at_fam.size == 0:
        return out
    span = int(max(step.max(), at_step.max())) + 1
    key = fam * span + step  # sortable (family, step) pairs
    order = np.argsort(key, kind="stable")
    pos = np.searchsorted(key[order], at_fam * span + at_step, side="right") - 1
    ok = pos >= 0
    hit = order[np.maximum(pos, 0)]
    ok &= fam[hit] == at_fam
    out[ok] = value[hit[ok]]
    return out


def _mlflow_events(client: Any, run_id: str) -> list[Event]:
    """Events from the run's ``events.jsonl`` artifact (none when it was never uploaded)."""
    from ..tracking._mlflow import EVENTS_FILE

    if EVENTS_FILE not in {a.path for a in client.list_artifacts(run_id)}:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(client.download_artifacts(run_id, EVENTS_FILE, tmp)).read_text()
    events = []
    for line in text.splitlines():
        if line.strip():
            d = json.loads(line)
            events.append(
                Event(
                    int(d["step"]),
                    d["kind"],
                    d.get("family"),
                    d.get("domain"),
                    d.get("payload") or {},
                )
            )
    return events
