"""RunHistory read back from a recorded run, its derived views, and the figures made from it.

The run is recorded by a RunRecorder listening to a Scheduler (no subprocess). Probe rounds
cover a rotating subset of families at random tiers, with one family probed at two tiers in
the same round, so the forward fill and the "highest tier wins" rule are both exercised.
The views are checked against brute-force loops over the raw store rows.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
import torch

from domains import Catalog
from scheduler import Event, Scheduler
from scheduler._errors import ConfigError
from scheduler.backends import SimulatedLearner
from scheduler.recording import RecordingConfig, RunRecorder
from scheduler.recording._figures import (
    events_figure,
    probe_curves_figure,
    save_figures,
    tier_timeline_figure,
    weights_heatmap_figure,
)
from scheduler.recording._history import UNKNOWN_DOMAIN, RunHistory
from scheduler.store import ProbePoints, StoreError, open_store
from scheduler.tracking import Tracker

torch.set_num_threads(1)
STEPS = 30


@dataclass
class Recorded:
    url: str
    catalog: Catalog
    points: ProbePoints
    weight_steps: np.ndarray
    weights: np.ndarray
    events: list[Event]
    mlflow_run_id: str | None = None


def _record(tmp: Path, tracker: Tracker | None = None, detail_every: int = 50) -> Recorded:
    catalog = Catalog.synthetic(n_domains=3, families_per_domain=4, n_tiers=3)
    sched = Scheduler(catalog, "learning_progress", seed=0)
    learner = SimulatedLearner(catalog, seed=0)
    url = f"sqlite:///{tmp}/runs.db"
    store = open_store(url)
    rec = RunRecorder(
        sched,
        run_name="fig",
        store=store,
        tracker=tracker,
        config=RecordingConfig(checkpoint_every=10, domain_every=5, detail_every=detail_every),
    )
    rec.open()
    rng = np.random.default_rng(1)
    n_fam = catalog.n_families
    for _ in range(STEPS):
        batch = sched.next_batch(32)
        out = learner.run(batch)
        sched.report(batch, rewards=out.reward, success=out.success, process=out.process,
                     cost=out.cost, status=out.status)  # fmt: skip
        if sched.step % 3 == 0:
            fam = np.flatnonzero(np.arange(n_fam) % 3 == (sched.step // 3) % 3)
            fam = np.r_[fam, fam[0]]  # the first family twice: two tiers in one round
            tiers = rng.integers(0, 3, size=fam.size)
            tiers[-1] = (tiers[0] + 1) % 3
            scores, n = learner.probe_many(fam, tiers)
            sched.record_probes(fam, scores, tiers=tiers, n=n)  # the recorder hears it
    rec.close()
    info = store.get_run("fig")
    assert info is not None
    steps, weights = store.weights(info.run_id)
    recorded = Recorded(
        url, catalog, store.probe_points(info.run_id), steps, weights,
        store.events(info.run_id), rec.mlflow_run_id,
    )  # fmt: skip
    store.close()
    return recorded


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return _record(tmp_path_factory.mktemp("history"))


@pytest.fixture(scope="module")
def history(recorded: Recorded) -> RunHistory:
    return RunHistory.from_store(recorded.url, "fig", catalog=recorded.catalog)


def _latest_point(points: ProbePoints, family: int, step: int) -> int | None:
    """Oracle: the index of the family's latest point at or before ``step``, highest tier
    among the points of that latest step."""
    best = None
    for i in range(len(points)):
        if points.family[i] != family or points.step[i] > step:
            continue
        key = (int(points.step[i]), int(points.tier[i]))
        if best is None or key > best[0]:
            best = (key, i)
    return None if best is None else best[1]


def test_history_mirrors_the_store(recorded: Recorded, history: RunHistory) -> None:
    cat = recorded.catalog
    assert history.family_names == cat.family_names
    assert history.domain_names == cat.domain_names
    np.testing.assert_array_equal(history.domain_of_family, cat.domain_of_family)
    assert history.probe_step.size == len(recorded.points) > 0
    np.testing.assert_array_equal(history.weights, recorded.weights)
    assert history.weights.shape == (STEPS, cat.n_families)
    assert list(history.events) == recorded.events


def test_domain_curves_match_the_raw_points(recorded: Recorded, history: RunHistory) -> None:
    pts, cat = recorded.points, recorded.catalog
    curves = history.domain_curves()
    np.testing.assert_array_equal(curves.steps, np.unique(pts.step))
    k, n_dom = curves.steps.size, cat.n_domains
    assert curves.mean.shape == curves.low.shape == curves.high.shape == (k, n_dom)
    expected = np.full((3, k, n_dom), np.nan)
    for r, step in enumerate(curves.steps.tolist()):
        for d in range(n_dom):
            idx = [_latest_point(pts, f, step) for f in np.flatnonzero(cat.domain_of_family == d)]
            idx = [i for i in idx if i is not None]
            if idx:
                expected[:, r, d] = [pts.score[idx].mean(), pts.ci_low[idx].mean(),
                                     pts.ci_high[idx].mean()]  # fmt: skip
    np.testing.assert_allclose(curves.mean, expected[0], equal_nan=True)
    np.testing.assert_allclose(curves.low, expected[1], equal_nan=True)
    np.testing.assert_allclose(curves.high, expected[2], equal_nan=True)
    assert np.isnan(curves.mean[0]).sum() < n_dom  # the first round covers some domains
    assert np.isfinite(curves.mean[-1]).all()  # by the end every domain has been probed
    ok = np.isfinite(curves.mean)
    assert (curves.low[ok] <= curves.mean[ok]).all() and (curves.mean[ok] <= curves.high[ok]).all()


def test_tier_timeline_follows_the_probe_points(recorded: Recorded, history: RunHistory) -> None:
    pts = recorded.points
    timeline = history.tier_timeline()
    assert timeline.tiers.shape == (timeline.steps.size, history.n_families)
    for r, step in enumerate(timeline.steps.tolist()):
        for f in range(history.n_families):
            i = _latest_point(pts, f, step)
            assert timeline.tiers[r, f] == (-1 if i is None else pts.tier[i]), (step, f)
    assert (timeline.tiers[0] == -1).any() and (timeline.tiers[-1] >= 0).all()
    assert len(np.unique(timeline.tiers[timeline.tiers >= 0])) > 1


def test_domain_weights_sum_the_families(recorded: Recorded, history: RunHistory) -> None:
    steps, dom = history.domain_weights()
    np.testing.assert_array_equal(steps, recorded.weight_steps)
    for d in range(history.n_domains):
        cols = recorded.weights[:, recorded.catalog.domain_of_family == d]
        np.testing.assert_allclose(dom[:, d], cols.sum(axis=1))
    np.testing.assert_allclose(dom.sum(axis=1), 1.0, rtol=1e-9)


def _ev(step: int, kind: str, family: str) -> Event:
    return Event(step, kind, family, None, {"why": kind, "value": step / 10})


def test_attention_keeps_only_active_latest_events(history: RunHistory) -> None:
    f = history.family_names
    events = (
        _ev(3, "quarantined", f[0]),
        _ev(9, "released", f[0]),  # quarantine ended: f0 not listed
        _ev(4, "regression", f[1]),
        _ev(6, "tier_promoted", f[1]),  # tier change clears the regression: f1 not listed
        _ev(7, "plateau", f[2]),  # nothing clears it: listed
        _ev(5, "breaker_opened", f[3]),
        _ev(8, "breaker_half_open", f[3]),  # still on probation: listed as breaker_opened
        _ev(2, "suspected_reward_hacking", f[4]),
        _ev(11, "quarantined", f[4]),  # both active: the latest is shown
        _ev(12, "plateau", f[5]),
        _ev(12, "tier_demoted", f[5]),  # written after the plateau: clears it
        _ev(1, "tier_promoted", f[6]),  # not an attention kind
    )
    rows = replace(history, events=tuple(sorted(events, key=lambda e: e.step))).attention()
    got = {r.family: (r.kind, r.step) for r in rows}
    assert got == {
        f[2]: ("plateau", 7),
        f[3]: ("breaker_opened", 5),
        f[4]: ("quarantined", 11),
    }
    assert [r.step for r in rows] == sorted((r.step for r in rows), reverse=True)
    row = next(r for r in rows if r.family == f[4])
    assert row.domain == history.domain_names[history.domain_of_family[4]]
    assert row.evidence == "why=quarantined, value=1.1"


def test_attention_follows_the_flags_the_scheduler_raises_and_clears(history: RunHistory) -> None:
    """The kinds the skill model's flags write: each ``*_cleared`` ends its flag, a mastered
    family that falls back is a regression until it is mastered again, and flags the
    scheduler no longer raises (a tier change) clear nothing."""
    f = history.family_names
    events = (
        _ev(3, "idle", f[0]),
        _ev(8, "idle_cleared", f[0]),  # learning again: not listed
        _ev(4, "idle", f[1]),
        _ev(6, "tier_promoted", f[1]),  # a tier change does not end idleness: listed
        _ev(5, "suspected_reward_hacking", f[2]),
        _ev(9, "suspected_reward_hacking_cleared", f[2]),
        _ev(2, "mastered", f[3]),
        _ev(7, "mastered_cleared", f[3]),  # its top tier fell back: listed
        _ev(3, "mastered_cleared", f[4]),
        _ev(10, "mastered", f[4]),  # mastered again: not listed
        _ev(1, "mastered", f[5]),  # not an attention kind
    )
    rows = replace(history, events=tuple(sorted(events, key=lambda e: e.step))).attention()
    assert {r.family: (r.kind, r.step) for r in rows} == {
        f[3]: ("mastered_cleared", 7),
        f[1]: ("idle", 4),
    }
    assert [r.family for r in rows] == [f[3], f[1]]  # newest first


def test_from_store_errors_and_domain_fallback(recorded: Recorded, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"no run named 'nope'.*fig"):
        RunHistory.from_store(recorded.url, "nope")
    with pytest.raises(StoreError, match="no SQLite file at"):  # a read creates no store
        RunHistory.from_store(f"sqlite:///{tmp_path}/missing.db")
    assert not (tmp_path / "missing.db").exists()
    open_store(f"sqlite:///{tmp_path}/empty.db").close()
    with pytest.raises(StoreError, match="no runs yet"):
        RunHistory.from_store(f"sqlite:///{tmp_path}/empty.db")
    other = Catalog.synthetic(n_domains=2, families_per_domain=2)
    with pytest.raises(StoreError, match="do not match"):
        RunHistory.from_store(recorded.url, catalog=other)
    # Without a catalog (a synthetic one has no manifests), domains come from the events.
    store = open_store(recorded.url)
    info = store.get_run("fig")
    assert info is not None
    names = recorded.catalog.family_names
    store.add_events(info.run_id, [Event(STEPS, "plateau", names[5], "domain_1", {})])
    store.close()
    latest = RunHistory.from_store(recorded.url)  # None: the latest run
    assert latest.run_name == "fig"
    placed = {e.family: e.domain for e in latest.events if e.family and e.domain}
    for f, name in enumerate(latest.family_names):
        domain = latest.domain_names[latest.domain_of_family[f]]
        assert domain == placed.get(name, UNKNOWN_DOMAIN)
    assert latest.attention()[0].family == names[5]


def _png(fig: object) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40)  # type: ignore[attr-defined]
    return buf.getvalue()


def test_figures_have_the_expected_axes(history: RunHistory, tmp_path: Path) -> None:
    from matplotlib.collections import QuadMesh
    from matplotlib.figure import Figure

    fig = probe_curves_figure(history)
    assert isinstance(fig, Figure) and len(fig.axes) == history.n_domains
    assert [ax.get_title() for ax in fig.axes] == list(history.domain_names)
    assert all(len(ax.collections) == 1 and len(ax.lines) == 1 for ax in fig.axes)  # band+mean
    assert len(probe_curves_figure(history, max_domains=2).axes) == 2

    for level, rows in (("domain", history.n_domains), ("family", history.n_families)):
        fig = weights_heatmap_figure(history, level=level)
        assert len(fig.axes) == 2  # heatmap and colorbar
        (image,) = fig.axes[0].images
        assert image.get_array().shape == (rows, history.weight_steps.size)

    fig = tier_timeline_figure(history, max_families=5)
    assert len(fig.axes) == 2
    (mesh,) = [c for c in fig.axes[0].collections if isinstance(c, QuadMesh)]
    assert mesh.get_array().shape == (5, history.tier_timeline().steps.size)
    assert len(fig.axes[0].get_yticklabels()) == 5

    events = (_ev(2, "plateau", "a"), _ev(5, "plateau", "b"), _ev(5, "regression", "a"))
    fig = events_figure(replace(history, events=events))
    assert [line.get_label() for line in fig.axes[0].lines] == ["plateau", "regression"]
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_ydata(), [1, 2])
    assert _png(fig).startswith(b"\x89PNG")

    paths = save_figures(history, tmp_path / "figs")
    assert [p.name for p in paths] == [
        "probe_curves.png", "weights_heatmap.png", "tier_timeline.png", "events.png"
    ]  # fmt: skip
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths)


def test_figures_of_an_empty_run_and_bad_arguments(history: RunHistory) -> None:
    none = np.zeros(0, np.int64)
    empty = replace(
        history,
        probe_step=none, probe_family=none, probe_tier=none,
        probe_score=np.zeros(0), probe_ci_low=np.zeros(0), probe_ci_high=np.zeros(0),
        weight_steps=none, weights=np.zeros((0, history.n_families)), events=(),
    )  # fmt: skip
    assert empty.domain_curves().mean.shape == (0, history.n_domains)
    assert empty.attention() == []
    for make in (probe_curves_figure, weights_heatmap_figure, tier_timeline_figure, events_figure):
        fig = make(empty)
        assert "no " in fig.axes[0].texts[0].get_text()
        assert _png(fig)
    with pytest.raises(ConfigError, match="level: must be one of domain, family, got 'arm'"):
        weights_heatmap_figure(history, level="arm")
    with pytest.raises(ConfigError, match="max_domains"):
        probe_curves_figure(history, max_domains=0)


@pytest.mark.slow
def test_from_mlflow_matches_the_store(tmp_path: Path) -> None:
    from scheduler.tracking import MLflowTracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracker = MLflowTracker(uri, "figures", flush_interval_s=0.05, sink="thread")
    rec = _record(tmp_path, tracker=tracker, detail_every=5)
    tracker.close()
    assert rec.mlflow_run_id
    got = RunHistory.from_mlflow(uri, rec.mlflow_run_id)
    cat = rec.catalog
    assert got.run_name == "fig"
    assert got.domain_names == cat.domain_names
    order = [cat.family_id(n) for n in got.family_names]
    assert sorted(order) == list(range(cat.n_families))
    np.testing.assert_array_equal(got.domain_of_family, cat.domain_of_family[order])
    # Each MLflow probe value is the family's latest probe score at that detail step (one of
    # them when the family was probed at two tiers in its latest round).
    assert got.probe_step.size > 0 and set(np.unique(got.probe_step) % 5) == {0}
    pts = rec.points
    for f, step, score in zip(got.probe_family, got.probe_step, got.probe_score, strict=True):
        i = _latest_point(pts, order[f], int(step))
        assert i is not None
        same = (pts.family == order[f]) & (pts.step == pts.step[i])
        assert np.isclose(pts.score[same], score).any(), (got.family_names[f], step)
    assert np.isnan(got.probe_ci_low).all()  # MLflow has no probe counts
    rows = np.searchsorted(rec.weight_steps, got.weight_steps)
    np.testing.assert_allclose(got.weights, rec.weights[rows][:, order])
    assert [(e.step, e.kind, e.family) for e in got.events] == [
        (e.step, e.kind, e.family) for e in rec.events
    ]
    with pytest.raises(StoreError, match="not found"):
        RunHistory.from_mlflow(uri, "0" * 32)
