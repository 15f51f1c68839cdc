"""Faults a long run meets, end to end: probe functions that raise, hang or return garbage
in 10 % of the families; a PostgreSQL restart mid-run (a cluster of the test's own, made
with pg_createcluster and restarted with pg_ctlcluster); a full disk (a tiny tmpfs). Each
run completes, or fails loudly with a StoreError past its limit, and loses nothing it
committed. (The MLflow server stopped and restarted mid-run is in
tests/tracking/test_tracking_server.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from domains import Catalog
from scheduler import BreakerConfig, Event, ProbeRunner, Scheduler, SchedulerConfig
from scheduler._serialize import dumps_state, loads_state
from scheduler.store import OutcomeRows, ProbePoints, StoreError, open_store


def test_probe_functions_that_raise_hang_or_lie_in_a_tenth_of_the_families() -> None:
    cat = Catalog.synthetic(3, 10, 2)  # 30 families; 3 of them broken, one way each
    raising, hanging, lying = cat.family_names[4], cat.family_names[15], cat.family_names[26]
    garbage = iter([float("nan"), "0.5", 7.0, None, (0.5, -3), object(), -0.1] * 100)
    release = threading.Event()

    def probe(family: str, tier: int) -> tuple[float, int]:
        if family == raising:
            raise RuntimeError("verifier crashed")
        if family == hanging:
            release.wait(30)  # far past the timeout
        if family == lying:
            return next(garbage)  # type: ignore[return-value]
        return 0.5, 16

    config = SchedulerConfig(breakers=BreakerConfig(probe_failures=2))
    sched = Scheduler(cat, "uniform", config=config, seed=0)
    runner = ProbeRunner(
        probe, cat.family_names, budget=30, every_steps=2, timeout_s=0.3, retry_backoff_s=0.0
    )
    slowest = 0.0
    try:
        for _ in range(60):
            batch = sched.next_batch(64)
            sched.report(batch, rewards=np.ones(64), success=np.ones(64))
            # the probe calls on the training thread: holding them for a hanging probe would
            # take its timeout (0.3 s) or more; the scheduler's own step is not timed here,
            # so a machine busy with other work does not read as a hang
            t0 = time.perf_counter()
            runner.maybe_run(sched.probe_snapshot())
            sched.apply_probe_results(runner.drain())
            slowest = max(slowest, time.perf_counter() - t0)
            time.sleep(0.02)
        time.sleep(0.5)
        sched.apply_probe_results(runner.drain())
        counters = runner.counters
    finally:
        release.set()
        runner.stop()
    assert slowest < 0.25  # a hanging probe never holds the training loop
    bad = [cat.family_id(f) for f in (raising, hanging, lying)]
    healthy = np.setdiff1d(np.arange(cat.n_families), bad)
    assert (sched.curves.count[bad] == 0).all()  # nothing false reached the curves
    assert (sched.curves.count[healthy] > 0).all()
    assert sched.breakers.open_mask[bad].all() and sched.breakers.open_mask.sum() == 3
    assert counters["failed"] >= 2 and counters["timed_out"] >= 1
    w = sched.weights().family
    assert np.isfinite(w).all() and abs(w.sum() - 1) < 1e-9 and (w[bad] == 0).all()


CATALOG = Catalog.synthetic(2, 3, 2)


def _step_rows(step: int) -> dict[str, object]:
    arm = np.arange(8) % CATALOG.n_arms
    return {
        "outcomes": OutcomeRows(
            step=np.full(8, step),
            arm=arm,
            family=CATALOG.family_of_arm[arm],
            tier=CATALOG.tier_of_arm[arm],
            variant=np.arange(8) + 100 * step,
            reward=np.full(8, float(step)),
            success=np.ones(8),
            process=np.full(8, 0.5),
            cost=np.ones(8),
            status=np.zeros(8, dtype=np.int64),
        ),
        "probe_points": ProbePoints(
            family=np.arange(CATALOG.n_families),
            tier=np.zeros(CATALOG.n_families, dtype=np.int64),
            step=np.full(CATALOG.n_families, step),
            wall_time=np.full(CATALOG.n_families, 1.7e9),
            score=np.full(CATALOG.n_families, 0.5),
            n=np.full(CATALOG.n_families, 16),
            ci_low=np.full(CATALOG.n_families, 0.3),
            ci_high=np.full(CATALOG.n_families, 0.7),
        ),
        "events": [Event(step, "tick", None, payload={"step": step})],
        "checkpoint": (step, dumps_state({"step": step, "pad": np.zeros(512)})),
    }


def _committed(url: str, run: str) -> tuple[list[int], int | None]:
    with open_store(url) as store:
        info = store.get_run(run)
        assert info is not None
        steps = np.unique(store.outcomes(info.run_id).step).tolist()
        latest = store.latest_checkpoint(info.run_id)
        if latest is not None:
            assert loads_state(latest[1])["step"] == latest[0]
        return steps, None if latest is None else latest[0]


# PostgreSQL restart ------------------------------------------------------------------------
def _pg_version() -> str | None:
    try:
        out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.split() for ln in out.stdout.splitlines() if ln.strip()]
    return lines[0][0] if lines else None


@pytest.fixture
def own_pg_cluster() -> Iterator[tuple[str, str, int]]:
    """A PostgreSQL cluster of this test's own (the shared one is never restarted)."""
    version = _pg_version()
    if version is None or shutil.which("pg_createcluster") is None or os.geteuid() != 0:
        pytest.skip("needs pg_createcluster/pg_ctlcluster (postgresql-common) run as root")
    name = f"cs_fault_{uuid.uuid4().hex[:6]}"
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    made = subprocess.run(
        ["pg_createcluster", version, name, "-p", str(port), "--", "--auth=trust"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if made.returncode != 0:
        pytest.skip(f"pg_createcluster failed: {made.stderr.strip()[:200]}")
    try:
        subprocess.run(["pg_ctlcluster", version, name, "start"], check=True, timeout=60)
        yield version, name, port
    finally:
        subprocess.run(["pg_ctlcluster", version, name, "stop", "-m", "immediate"], timeout=60)
        subprocess.run(["pg_dropcluster", version, name], timeout=60)


@pytest.mark.slow
def test_a_postgresql_restart_mid_run_is_waited_out_and_loses_nothing(
    own_pg_cluster: tuple[str, str, int], caplog: pytest.LogCaptureFixture
) -> None:
    version, name, port = own_pg_cluster
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    store = open_store(url, lock_timeout_s=60)
    run = store.open_run("pg-restart", seed=0, config={}, catalog=CATALOG).run_id
    restarted = threading.Event()

    def restart() -> None:
        subprocess.run(["pg_ctlcluster", version, name, "restart", "-m", "fast"], timeout=120)
        restarted.set()

    thread = threading.Thread(target=restart)
    lost = 0
    try:
        for step in range(10):
            store.write(run, **_step_rows(step))  # type: ignore[arg-type]
        thread.start()
        step = 10
        while not restarted.is_set() or step < 30:
            try:
                store.write(run, **_step_rows(step))  # type: ignore[arg-type]
            except StoreError as exc:  # the write in flight when the server went: loud
                assert "lost the connection" in str(exc)
                lost += 1
                continue  # as StepWriter does: the rows were kept, the step is written again
            step += 1
            time.sleep(0.05)
    finally:
        if thread.ident is not None:
            thread.join()
        store.close()
    assert lost <= 2
    steps, latest = _committed(url, "pg-restart")
    assert steps == list(range(step)) and latest == step - 1
    # Down for longer than the limit: a StoreError that says so, and nothing half-written.
    store = open_store(url, lock_timeout_s=3)
    subprocess.run(["pg_ctlcluster", version, name, "stop", "-m", "fast"], check=True, timeout=60)
    t0 = time.monotonic()
    try:
        with pytest.raises(StoreError, match=r"cannot reach the store .*limit 3 s"):
            store.write(run, **_step_rows(step))  # type: ignore[arg-type]
    finally:
        store.close()
    assert 3 <= time.monotonic() - t0 < 20
    assert "is unreachable; retrying" in caplog.text
    subprocess.run(["pg_ctlcluster", version, name, "start"], check=True, timeout=60)
    assert _committed(url, "pg-restart")[0] == list(range(step))


# Full disk -------------------------------------------------------------------------------
@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:200]}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_fails_the_write_loudly_and_keeps_every_commit(tiny_disk: Path) -> None:
    url = f"sqlite:///{tiny_disk / 'run.db'}"
    store = open_store(url)
    run = store.open_run("full", seed=0, config={}, catalog=CATALOG).run_id
    ok = 0
    with pytest.raises(StoreError, match=r"disk holding the store .* is full"):
        for step in range(100_000):
            store.write(run, **_step_rows(step))  # type: ignore[arg-type]
            ok += 1
    store.close()
    assert ok > 10
    with open_store(url) as check:
        assert check.integrity_check() == "ok"
    steps, latest = _committed(url, "full")
    assert steps == list(range(ok)) and latest == ok - 1  # every commit kept, none torn
