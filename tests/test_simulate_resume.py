"""`curriculum simulate --resume`: a killed run continues exactly as if never interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from scheduler.store import open_store

ROOT = Path(__file__).resolve().parents[1]


def _simulate(tmp: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "CURRICULUM_CHECKPOINT_EVERY": "15",
        "CURRICULUM_BATCH_SIZE": "64",
        "CURRICULUM_PROBE_EVERY": "10",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scheduler.cli",
            "simulate",
            "--no-progress",
            "--no-baseline",
            "--no-tracking",
            "--db",
            f"sqlite:///{tmp}/runs.db",
            *args,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out


def _outcomes(tmp: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    store = open_store(f"sqlite:///{tmp}/runs.db")
    try:
        info = store.get_run(name)
        assert info is not None
        rows = store.outcomes(info.run_id)
        order = np.lexsort((np.arange(len(rows.step)), rows.step))
        table = np.stack([rows.step, rows.arm, rows.variant, rows.status])[:, order]
        points = store.probe_points(info.run_id)
        return table, np.stack([points.step, points.family, points.score])
    finally:
        store.close()


def _wait_for(tmp: Path, name: str, min_step: int | None, timeout: float = 60.0) -> None:
    """Poll the store (a second reader, as WAL allows) until the run exists and, if asked,
    has a checkpoint at ``min_step`` or later."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        store = open_store(f"sqlite:///{tmp}/runs.db")
        try:
            info = store.get_run(name)
            if info is not None:
                if min_step is None:
                    return
                checkpoint = store.latest_checkpoint(info.run_id)
                if checkpoint is not None and checkpoint[0] >= min_step:
                    return
        finally:
            store.close()
        time.sleep(0.02)
    raise AssertionError(f"run {name} did not reach step {min_step} in {timeout} s")


@pytest.mark.slow
def test_resume_after_sigkill_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    steps = "400"
    _finish(_simulate(tmp_path, "--steps", steps, "--run-name", "straight"))
    expected, expected_probes = _outcomes(tmp_path, "straight")
    assert expected.shape[1] == 400 * 64

    # Kill before the first checkpoint, right after one, and between two.
    for i, (min_step, extra) in enumerate(((None, 0.0), (150, 0.0), (300, 0.05))):
        name = f"killed{i}"
        proc = _simulate(tmp_path, "--steps", steps, "--run-name", name)
        _wait_for(tmp_path, name, min_step)
        time.sleep(extra)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL, "the run ended before it could be killed"
        out = _finish(_simulate(tmp_path, "--steps", steps, "--run-name", name, "--resume"))
        assert "mean held-out score" in out
        got, got_probes = _outcomes(tmp_path, name)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(got_probes, expected_probes)


def test_resume_of_a_missing_run_is_a_clear_error(tmp_path: Path) -> None:
    proc = _simulate(tmp_path, "--steps", "5", "--run-name", "ghost", "--resume")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "cannot be resumed" in err and "Traceback" not in err


def test_a_second_run_with_the_same_name_is_refused(tmp_path: Path) -> None:
    _finish(_simulate(tmp_path, "--steps", "5", "--run-name", "once"))
    proc = _simulate(tmp_path, "--steps", "5", "--run-name", "once")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "already exists" in err
