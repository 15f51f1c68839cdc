"""`curriculum ui` as a user stops it: kill PID, Ctrl-C, a closed terminal. The mlflow
server it started, with every worker, goes too, and its log file is removed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.mlflow_server
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_stops_the_server_its_workers_and_leaves_no_log(
    signum: int, sqlite_store: str, tmp_path: Path
) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scheduler.app.cli",
            "ui",
            "--tracking-uri",
            sqlite_store,
            "--port",
            "0",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # as from a terminal: the signal goes to the wrapper only
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once /health answers
        if not re.search(r"http://127\.0\.0\.1:\d+", line):
            proc.kill()
            pytest.skip(f"mlflow server did not start here: {line!r} {proc.stderr.read()!r}")
        tree = _descendants(proc.pid)
        assert tree, "the server runs as a child process"
        assert list(tmp_path.glob("mlflow-server-*.log")), "its log is in TMPDIR while it runs"
        os.kill(proc.pid, signum)  # the wrapper only, as `kill PID` does
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in tree if _alive(p)], "server processes outlived `curriculum ui`"
    assert not list(tmp_path.glob("mlflow-server-*.log"))
