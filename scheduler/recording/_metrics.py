"""Metric names and values for a run, built from scheduler state with no loop over families.

One naming scheme, grouped by the MLflow UI on the first path segment:

- every step: ``run/score_mean`` and ``run/score_p10`` (chance-normalised latest probes),
  ``run/weight_entropy``, ``run/pass_rate``, ``run/fault_rate``, ``run/quarantined``,
  ``run/breakers_open``;
- every ``domain_every`` steps (default every step): ``weight/<domain>`` (planned share),
  ``share/<domain>`` (the batch's share of samples, or of compute for a compute-basis
  domain), ``quota_use/<domain>`` (share over max_share), ``pass_rate/<domain>``,
  ``probe/<domain>``;
- every ``detail_every`` steps: ``weight/<domain>/<family>``, ``tier/<domain>/<family>``,
  ``pass_rate/<domain>/<family>``, ``probe/<domain>/<family>``, ``slope/<domain>/<family>``,
  and the count ``run/mastered``.

The tracker adds ``events/<kind>`` counts and ``tracking/*`` accounting.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from domains import Catalog

from .._batch import Status
from .._listeners import Reported
from .._snapshot import SchedulerSnapshot

FloatArray = npt.NDArray[np.float64]


class RunMetrics:
    """Builds the metric dicts of one run; names are made once, values are array slices."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        domains = catalog.domain_names
        family_path = [
            f"{domains[int(d)]}/{name}"
            for d, name in zip(catalog.domain_of_family, catalog.family_names, strict=True)
        ]
        self._domain_keys = {
            kind: [f"{kind}/{d}" for d in domains]
            for kind in ("weight", "share", "quota_use", "pass_rate", "probe")
        }
        self._family_keys = {
            kind: [f"{kind}/{p}" for p in family_path]
            for kind in ("weight", "tier", "pass_rate", "probe", "slope")
        }

    def per_step(self, snap: SchedulerSnapshot, reported: Reported) -> dict[str, float]:
        """Aggregates: cheap enough for every step."""
        status, success = reported.status, reported.success
        family = snap.weights.family
        positive = family[family > 0]
        scores = snap.curves.normalized
        probed = scores[np.isfinite(scores)]
        counted = np.isin(status, (int(Status.OK), int(Status.FAILED)))
        metrics = {
            "run/weight_entropy": float(-(positive * np.log(positive)).sum()),
            "run/pass_rate": float(success[counted].mean()) if counted.any() else float("nan"),
            "run/fault_rate": float(1.0 - counted.mean()) if len(reported) else 0.0,
            "run/quarantined": float(snap.held_back.sum()),
            "run/breakers_open": float(snap.breakers_open.sum()),
        }
        if probed.size:
            metrics["run/score_mean"] = float(probed.mean())
            metrics["run/score_p10"] = float(np.percentile(probed, 10))
        return metrics

    def per_domain(self, snap: SchedulerSnapshot, reported: Reported) -> dict[str, float]:
        """Weight (planned share), share (this batch's realised share of samples, or of
        compute for a compute-basis domain), quota use (share over max_share), pass rate
        and probe score of every domain."""
        cat = self.catalog
        w = snap.weights
        current = cat.arm_start[:-1] + snap.tier
        pass_rate = snap.success_fast[current]
        seen = snap.count[current] > 0
        n_dom = cat.n_domains
        dom = cat.domain_of_family
        seen_n = np.bincount(dom, weights=seen, minlength=n_dom)
        passed = np.bincount(dom, weights=np.where(seen, pass_rate, 0.0), minlength=n_dom)
        dom_pass: FloatArray = np.where(seen_n > 0, passed / np.maximum(seen_n, 1), np.nan)
        probe = snap.domain_probe
        drawn = cat.domain_of_family[reported.family]
        samples = np.bincount(drawn, minlength=n_dom).astype(np.float64)
        spent = np.bincount(drawn, weights=snap.cost[reported.family], minlength=n_dom)
        share: FloatArray = np.where(
            cat.domain_compute_basis,
            spent / max(float(spent.sum()), 1e-300),
            samples / max(len(reported), 1),
        )
        values: dict[str, FloatArray] = {
            "weight": w.domain,
            "share": share,
            "quota_use": share / cat.domain_max_share,
            "pass_rate": dom_pass,
            "probe": probe,
        }
        return _finite(self._domain_keys, values)

    def per_family(self, snap: SchedulerSnapshot) -> dict[str, float]:
        """Every family's weight, tier, pass rate, probe and slope, and how many families are
        mastered: these need a pass over the mastery bounds, so they come at
        this cadence rather than every step."""
        cat = self.catalog
        current = cat.arm_start[:-1] + snap.tier
        slope, _, _ = snap.curves.slope()
        values = {
            "weight": snap.weights.family,
            "tier": snap.tier.astype(np.float64),
            "pass_rate": np.where(snap.count[current] > 0, snap.success_fast[current], np.nan),
            "probe": snap.curves.latest,
            "slope": slope,
        }
        counts = {"run/mastered": float(snap.mastered.sum())}
        return counts | _finite(self._family_keys, values)


def _finite(keys: dict[str, list[str]], values: dict[str, FloatArray]) -> dict[str, float]:
    """Pair names with values, leaving out NaN (MLflow charts a gap rather than a zero)."""
    out: dict[str, float] = {}
    for kind, arr in values.items():
        ok = np.isfinite(arr)
        names = keys[kind]
        out.update(
            (names[i], v)
            for i, v in zip(np.flatnonzero(ok).tolist(), arr[ok].tolist(), strict=True)
        )
    return out
