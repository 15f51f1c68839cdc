"""kill -9 of a writing process: the store stays sound, the latest checkpoint matches the rows,
and a new writer resumes from it. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from store_procs import CATALOG, PROBES_PER_STEP, ROWS_PER_STEP, outcomes_for

from scheduler._serialize import loads_state
from scheduler.store import open_store

WRITER = Path(__file__).with_name("store_procs.py")
MAX_STEPS = 10_000


def _start(url: str, run: str, max_steps: int = MAX_STEPS) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(WRITER.parent)}
    return subprocess.Popen(
        [sys.executable, str(WRITER), url, run, str(max_steps)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _check(url: str, run_name: str) -> int:
    """Invariants after a crash; returns the step of the latest checkpoint."""
    store = open_store(url)  # opens without repair
    try:
        assert store.integrity_check() == "ok"
        run = store.get_run(run_name)
        assert run is not None
        latest = store.latest_checkpoint(run.run_id)
        assert latest is not None
        step, state = latest
        assert loads_state(state)["step"] == step
        # Every step up to the checkpoint is complete, exactly once; nothing after it.
        outcomes = store.outcomes(run.run_id)
        per_step = np.bincount(outcomes.step, minlength=step + 1)
        assert per_step.tolist() == [ROWS_PER_STEP] * (step + 1)
        probes = store.probe_points(run.run_id)
        assert np.bincount(probes.step).tolist() == [PROBES_PER_STEP] * (step + 1)
        assert store.weights(run.run_id)[0].tolist() == list(range(step + 1))
        assert [e.step for e in store.events(run.run_id)] == list(range(step + 1))
        # The rows are the ones written, not a torn copy.
        expected = outcomes_for(step, ROWS_PER_STEP)
        assert outcomes.take(outcomes.step == step).equals(expected)
        return step
    finally:
        store.close()


@pytest.mark.slow
def test_kill_9_at_several_points_then_resume(store_url: str) -> None:
    run = "crash-run"
    store = open_store(store_url)
    store.open_run(run, seed=0, config={"k": 1}, catalog=CATALOG)
    store.close()
    last = -1
    # (committed steps to wait for, extra delay before the kill): from right after start-up
    # to mid-stream, with delays that land inside a later step's transaction.
    for wait_steps, delay in [(1, 0.0), (4, 0.0013), (9, 0.004), (3, 0.0021), (15, 0.0)]:
        proc = _start(store_url, run)
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first == f"start {last + 1}", (first, proc.stderr.read() if proc.stderr else "")
        seen = 0
        while seen < wait_steps:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "writer exited"
            seen += 1
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        step = _check(store_url, run)
        # The kill can land after the commit but before the print: at least what was seen.
        assert step >= last + wait_steps
        last = step
    # A new writer continues from the checkpoint and finishes cleanly.
    target = last + 6
    proc = _start(store_url, run, max_steps=target)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.splitlines()[0] == f"start {last + 1}" and out.splitlines()[-1] == "done"
    assert _check(store_url, run) == target - 1


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_wal_file_is_replayed_after_a_kill(store_url: str) -> None:
    """SQLite: the committed steps live in the -wal file until a checkpoint; a kill before
    that must not lose them."""
    store = open_store(store_url)
    store.open_run("wal-run", seed=0, config={"k": 1}, catalog=CATALOG)
    store.close()
    proc = _start(store_url, "wal-run", max_steps=MAX_STEPS)
    assert proc.stdout is not None
    lines = [proc.stdout.readline().strip() for _ in range(6)]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    assert lines[0] == "start 0" and lines[-1] == "4", lines
    db = Path(store_url.removeprefix("sqlite:///"))
    assert Path(f"{db}-wal").stat().st_size > 0  # the commits were still only in the WAL
    assert _check(store_url, "wal-run") >= 4
