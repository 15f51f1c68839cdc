"""Four writer processes on one store, killed with SIGKILL at ten random points: each run
resumes from its checkpoint, no committed step is lost or doubled, and the finished runs
hold exactly the rows an uninterrupted writer would have written. SQLite and PostgreSQL."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
from store_procs import CATALOG, ROWS_PER_STEP, outcomes_for
from test_store_crash import _check, _start

from scheduler.store import OutcomeRows, open_store

WRITERS = 4
KILLS = 10


def _verify(url: str, run: str) -> int:
    """The crash invariants of ``run``; -1 when it was killed before its first commit."""
    with open_store(url) as store:
        info = store.get_run(run)
        assert info is not None
        if store.latest_checkpoint(info.run_id) is None:
            assert store.counts(info.run_id)["outcomes"] == 0  # nothing half-written
            return -1
    return _check(url, run)


class _Writer:
    """One writer process and the last step it reported committed."""

    def __init__(self, url: str, run: str, max_steps: int = 10_000) -> None:
        self.proc: subprocess.Popen[str] = _start(url, run, max_steps)
        self.first = ""
        self.seen = -1
        self.done = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            text = line.strip()
            if not self.first:
                self.first = text
            elif text == "done":
                self.done = True
            elif text.isdigit():
                self.seen = int(text)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def finish(self, timeout: float = 180) -> None:
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        err = self.proc.stderr.read() if self.proc.stderr is not None else ""
        assert self.proc.returncode == 0 and self.done, err


@pytest.mark.slow
def test_four_writers_killed_at_ten_random_points_lose_no_committed_row(store_url: str) -> None:
    runs = [f"writer-{i}" for i in range(WRITERS)]
    with open_store(store_url) as store:
        for run in runs:
            store.open_run(run, seed=0, config={"k": 1}, catalog=CATALOG)
    rng = random.Random(16)
    writers = {run: _Writer(store_url, run) for run in runs}
    checkpoint = dict.fromkeys(runs, -1)
    for _ in range(KILLS):
        time.sleep(rng.uniform(0.2, 1.2))
        victim = rng.choice(runs)
        w = writers[victim]
        w.kill()
        assert w.first in ("", f"start {checkpoint[victim] + 1}"), w.first  # "": killed early
        step = _verify(store_url, victim)
        assert step >= w.seen  # every step it reported committed survived the kill
        assert step >= checkpoint[victim]
        checkpoint[victim] = step
        writers[victim] = _Writer(store_url, victim)
    for run, w in writers.items():  # the survivors go down too
        w.kill()
        checkpoint[run] = _verify(store_url, run)
    target = max(checkpoint.values()) + 5
    for run in runs:
        w = _Writer(store_url, run, max_steps=target)
        w.finish()
        assert w.first == f"start {checkpoint[run] + 1}"
    with open_store(store_url) as store:
        for run in runs:
            assert _check(store_url, run) == target - 1
            info = store.get_run(run)
            assert info is not None
            got = store.outcomes(info.run_id)
            want = OutcomeRows.concat([outcomes_for(s, ROWS_PER_STEP) for s in range(target)])
            assert got.equals(want)  # the same rows as one uninterrupted writer
            assert np.array_equal(np.unique(got.step), np.arange(target))
