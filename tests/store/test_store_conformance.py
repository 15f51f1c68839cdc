"""The store conformance suite: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import multiprocessing
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from store_procs import CATALOG, outcomes_for, probes_for, write_steps

from domains import Catalog
from scheduler import Event, Status
from scheduler._serialize import dumps_state, loads_state
from scheduler.store import OutcomeRows, ProbePoints, SqlStore, Store, StoreError, open_store


def _run(store: SqlStore, **kw: object) -> int:
    name = f"run-{uuid.uuid4().hex[:8]}"
    return store.open_run(name, seed=3, config={"a": 1}, catalog=CATALOG, **kw).run_id  # type: ignore[arg-type]


def test_is_a_store(store: SqlStore) -> None:
    assert isinstance(store, Store)
    assert store.schema_version() == 1


def test_open_run_rules(store: SqlStore) -> None:
    config = {"policy": "learning_progress", "lr": 0.1, "nested": {"x": [1, 2]}}
    info = store.open_run("alpha", seed=7, config=config, catalog=CATALOG)
    assert info.name == "alpha" and info.seed == 7 and info.config == config
    assert info.families == CATALOG.family_names
    assert info.catalog_fingerprint == CATALOG.fingerprint
    assert abs(info.created_at - datetime.now(UTC)) < timedelta(minutes=1)
    # A second open of the same name must be an explicit resume.
    with pytest.raises(StoreError, match=r"already exists.*resume"):
        store.open_run("alpha", seed=7, config=config, catalog=CATALOG)
    resumed = store.open_run("alpha", seed=0, config={}, catalog=CATALOG, resume=True)
    assert resumed == info
    with pytest.raises(StoreError, match=r"not found.*alpha"):
        store.open_run("beta", seed=1, config={}, catalog=CATALOG, resume=True)
    other = Catalog.synthetic(n_domains=2)
    with pytest.raises(StoreError, match="different catalog"):
        store.open_run("alpha", seed=7, config={}, catalog=other, resume=True)
    with pytest.raises(StoreError, match="JSON"):
        store.open_run("gamma", seed=1, config={"f": object()}, catalog=CATALOG)
    assert store.get_run("alpha") == info
    assert store.get_run("missing") is None
    assert [r.name for r in store.runs()] == ["alpha"]


def test_probe_curve_round_trip_is_exact(store: SqlStore) -> None:
    run = _run(store)
    written = [probes_for(step) for step in range(40)]
    for points in written:
        store.add_probe_points(run, points)
    everything = ProbePoints.concat(written)
    nan_point = ProbePoints([5], [0], [40], [1.0], [np.nan], [0], [np.nan], [np.inf], "v1")
    store.add_probe_points(run, nan_point)
    everything = ProbePoints.concat([everything, nan_point])
    for family in (0, 5, CATALOG.n_families - 1):
        for tier in (None, 0, 2):
            mask = everything.family == family
            if tier is not None:
                mask &= everything.tier == tier
            idx = np.flatnonzero(mask)
            idx = idx[np.argsort(everything.step[idx], kind="stable")]
            expected = everything.take(idx)
            curve = store.probe_curve(run, family, tier)
            assert curve.equals(expected), (family, tier)
            assert np.all(np.diff(curve.step) >= 0)
    assert store.probe_points(run).equals(everything)  # written in (step, family) order
    since = store.probe_points(run, since_step=30)
    assert set(since.step.tolist()) == set(range(30, 41))
    assert len(since) == 10 * CATALOG.n_families + 1
    assert len(store.probe_curve(run, 3, tier=9)) == 0


def test_probe_points_read_back_in_step_family_order(store: SqlStore) -> None:
    run = _run(store)
    points = [probes_for(step) for step in (3, 1, 2)]  # written out of order
    store.write(run, probe_points=ProbePoints.concat(points))
    got = store.probe_points(run)
    order = np.lexsort((got.tier, got.family, got.step))
    assert np.array_equal(order, np.arange(len(got)))
    by_step = {int(p.step[0]): p for p in points}
    for step, p in by_step.items():
        sel = got.step == step
        assert np.array_equal(got.score[sel], p.score)  # families were written in order


def test_bad_probe_points_are_rejected_with_the_field(store: SqlStore) -> None:
    run = _run(store)
    with pytest.raises(StoreError, match=r"probe_points\.score: has 2 elements"):
        ProbePoints(
            [0, 1, 2], [0] * 3, [0] * 3, [0.0] * 3, [0.0] * 2, [1] * 3, [0.0] * 3, [0.0] * 3
        )
    with pytest.raises(StoreError, match=r"probe_points\.step: must hold integers"):
        ProbePoints([0], [0], [0.5], [0.0], [0.0], [1], [0.0], [0.0])
    bad = ProbePoints([0, 99], [0, 0], [1, 1], [0.0] * 2, [0.5] * 2, [1] * 2, [0.0] * 2, [1.0] * 2)
    with pytest.raises(StoreError, match=r"probe_points\.family\[1\]: 99 is not a family id"):
        store.add_probe_points(run, bad)
    assert len(store.probe_points(run)) == 0
    with pytest.raises(StoreError, match="no such run"):
        store.add_probe_points(run + 1000, probes_for(0))


def test_events_filters(store: SqlStore) -> None:
    run = _run(store)
    fams = CATALOG.family_names
    events = [
        Event(1, "tier_promoted", fams[0], "domain_0", {"from": 0, "to": 1}),
        Event(2, "regression", fams[1], "domain_0", {"drop": 0.25, "ci": [0.1, 0.4]}),
        Event(2, "plateau", fams[0], None, {}),
        Event(5, "regression", fams[0], "domain_0", {"drop": float("nan")}),
        Event(7, "breaker_opened", None, None, {"reason": "env errors"}),
    ]
    store.add_events(run, events[:3])
    store.add_events(run, events[3:])
    got = store.events(run)
    assert got[:3] == events[:3] and got[4] == events[4]
    assert np.isnan(got[3].payload["drop"]) and got[3].family == fams[0]
    assert [e.step for e in store.events(run, kind="regression")] == [2, 5]
    assert [e.kind for e in store.events(run, family=fams[0])] == [
        "tier_promoted",
        "plateau",
        "regression",
    ]
    assert [e.step for e in store.events(run, kind="regression", since_step=3)] == [5]
    assert [e.kind for e in store.events(run, since_step=6)] == ["breaker_opened"]
    assert store.events(run, kind="quarantined") == []
    with pytest.raises(StoreError, match=r"events\[0\]\.payload"):
        store.add_events(run, [Event(9, "x", payload={"bad": object()})])
    assert len(store.events(run)) == 5


def test_weights_round_trip(store: SqlStore) -> None:
    run = _run(store)
    rng = np.random.default_rng(1)
    rows = {step: rng.dirichlet(np.ones(CATALOG.n_arms)) for step in (0, 1, 2, 10)}
    for step, w in rows.items():
        store.add_weights(run, step, w)
    store.add_weights(run, 2, rows[2] * 2)  # a rewritten step replaces its row
    rows[2] = rows[2] * 2
    steps, weights = store.weights(run)
    assert steps.tolist() == [0, 1, 2, 10]
    assert weights.dtype == np.float64 and weights.shape == (4, CATALOG.n_arms)
    assert np.array_equal(weights, np.stack([rows[s] for s in steps.tolist()]))
    empty_steps, empty = store.weights(_run(store))
    assert empty_steps.shape == (0,) and empty.shape == (0, 0)
    with pytest.raises(StoreError, match="1-D"):
        store.add_weights(run, 3, np.ones((2, 2)))


def test_outcomes_replay_and_regression_set(store: SqlStore) -> None:
    run = _run(store)
    batches = [outcomes_for(step, 30, seed=2) for step in range(10)]
    for rows in batches:
        store.add_outcomes(run, rows)
    allrows = OutcomeRows.concat(batches)
    assert store.outcomes(run).equals(allrows)

    failed = store.replay_set(run)
    expect = np.flatnonzero(allrows.status == Status.FAILED)[::-1]  # newest first
    assert np.array_equal(failed.variant, allrows.variant[expect])
    assert np.all(failed.status == Status.FAILED)
    assert failed.uris() == [allrows.uris()[i] for i in expect]
    assert np.array_equal(failed.process, allrows.process[expect], equal_nan=True)

    fams = [1, 4]
    sel = store.replay_set(
        run, statuses=(Status.FAILED, "timeout"), families=fams, since_step=5, limit=7
    )
    mask = np.isin(allrows.status, [1, 2]) & np.isin(allrows.family, fams) & (allrows.step >= 5)
    assert np.array_equal(sel.variant, allrows.variant[np.flatnonzero(mask)[::-1][:7]])
    assert len(store.replay_set(run, limit=0)) == 0

    frozen = OutcomeRows.concat([failed.take(np.arange(5)), failed.take(np.arange(5))])
    store.freeze_regression_set(run, "reg-1", frozen)
    store.add_outcomes(run, outcomes_for(99, 10))  # later rows do not change a frozen set
    assert store.regression_set(run, "reg-1").equals(frozen)
    with pytest.raises(StoreError, match="already frozen"):
        store.freeze_regression_set(run, "reg-1", frozen)
    store.freeze_regression_set(run, "empty", OutcomeRows.empty())
    assert len(store.regression_set(run, "empty")) == 0
    assert store.regression_sets(run) == ["reg-1", "empty"]
    with pytest.raises(StoreError, match=r"reg-2.*not found.*reg-1, empty"):
        store.regression_set(run, "reg-2")
    with pytest.raises(StoreError, match=r"outcomes\.status\[0\]: 7 is not a Status"):
        OutcomeRows([0], [0], [0], [0], [0], [0.0], [0.0], [0.0], [0.0], [7])


def test_checkpoints_latest_wins(store: SqlStore) -> None:
    run = _run(store)
    assert store.latest_checkpoint(run) is None
    for step in (10, 30, 20):
        store.save_checkpoint(run, step, dumps_state({"step": step, "x": np.arange(step)}))
    step, state = store.latest_checkpoint(run)  # type: ignore[misc]
    assert step == 30 and loads_state(state)["step"] == 30
    store.save_checkpoint(run, 30, dumps_state({"step": 30, "again": True}))
    step, state = store.latest_checkpoint(run)  # type: ignore[misc]
    assert loads_state(state)["again"] is True
    for step in range(31, 40):
        store.save_checkpoint(run, step, b"s%d" % step)
    assert store.counts(run)["checkpoints"] == store.keep_checkpoints  # old ones pruned
    assert store.latest_checkpoint(run) == (39, b"s39")
    with pytest.raises(StoreError, match="state must be bytes"):
        store.save_checkpoint(run, 41, "not bytes")  # type: ignore[arg-type]


def test_write_is_one_transaction(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(store)
    store.write(run, probe_points=probes_for(0), outcomes=outcomes_for(0, 5), checkpoint=(0, b"0"))
    before = store.counts(run)

    def crash(*args: object) -> None:
        raise RuntimeError("power cut during the checkpoint insert")

    # Everything before the checkpoint has been executed inside the transaction when it fails.
    monkeypatch.setattr(store, "_insert_checkpoint", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        store.write(
            run,
            probe_points=probes_for(1),
            outcomes=outcomes_for(1, 5),
            events=[Event(1, "x")],
            weights=(1, np.ones(CATALOG.n_arms)),
            checkpoint=(1, b"1"),
        )
    assert store.counts(run) == before
    assert store.latest_checkpoint(run) == (0, b"0")
    assert set(store.outcomes(run).step.tolist()) == {0}
    monkeypatch.undo()
    store.write(run, outcomes=outcomes_for(1, 5), checkpoint=(1, b"1"))  # the store still works
    assert store.latest_checkpoint(run) == (1, b"1")


def test_truncate_after_drops_the_tail(store: SqlStore) -> None:
    run = _run(store)
    for step in range(6):
        store.write(
            run,
            probe_points=probes_for(step),
            outcomes=outcomes_for(step, 3),
            events=[Event(step, "e")],
            weights=(step, np.ones(4)),
            checkpoint=(step, b"%d" % step),
        )
    store.truncate_after(run, 3)
    assert store.latest_checkpoint(run) == (3, b"3")
    assert store.outcomes(run).step.max() == 3 and store.probe_points(run).step.max() == 3
    assert [e.step for e in store.events(run)] == [0, 1, 2, 3]
    assert store.weights(run)[0].tolist() == [0, 1, 2, 3]


def test_runs_are_isolated(store: SqlStore) -> None:
    a, b = _run(store), _run(store)
    store.write(a, probe_points=probes_for(0), outcomes=outcomes_for(0, 4), checkpoint=(0, b"a"))
    assert len(store.probe_points(b)) == 0 and len(store.outcomes(b)) == 0
    assert store.latest_checkpoint(b) is None


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(store: SqlStore, store_url: str) -> None:
    name = f"shared-{uuid.uuid4().hex[:8]}"
    run = store.open_run(name, seed=0, config={}, catalog=CATALOG).run_id
    n_proc, steps = 4, 200
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Manager().Event()
    with ctx.Pool(n_proc) as pool:
        results = [
            pool.apply_async(write_steps, (store_url, name, tag, steps, start))
            for tag in range(n_proc)
        ]
        start.set()
        written = [r.get(timeout=240) for r in results]  # re-raises a worker's error
    assert written == [steps] * n_proc
    counts = store.counts(run)
    assert counts == {
        "probe_points": n_proc * steps * CATALOG.n_families,
        "outcomes": n_proc * steps * 8,
        "events": n_proc * steps,
        "weights": n_proc * steps,
        "checkpoints": 0,
    }
    got = store.outcomes(run)
    expected = OutcomeRows.concat(
        [outcomes_for(t * 100_000 + s, 8, tag=t) for t in range(n_proc) for s in range(steps)]
    )
    order = np.argsort(got.variant)
    assert np.array_equal(got.variant[order], np.sort(expected.variant))
    eorder = np.argsort(expected.variant)
    assert np.array_equal(got.reward[order], expected.reward[eorder])
    curve = store.probe_curve(run, 2)
    assert len(curve) == n_proc * steps and np.all(np.diff(curve.step) > 0)
    assert store.integrity_check() == "ok"


def test_bad_urls_raise_store_error(tmp_path: object) -> None:
    with pytest.raises(StoreError, match="unsupported database 'mysql'"):
        open_store("mysql://u@h/db")
    with pytest.raises(StoreError, match="not a database URL"):
        open_store("curriculum.db")
    with pytest.raises(StoreError, match="psycopg 3"):
        open_store("postgresql+psycopg2://u@127.0.0.1/db")
    with pytest.raises(StoreError, match=r"cannot open the store.*running"):
        open_store("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
