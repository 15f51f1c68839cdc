from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from apscheduler.triggers.cron import CronTrigger

from scheduler import ConfigError
from scheduler.probing import (
    PriorityWeights,
    ProbeResults,
    ProbeRunner,
    ProbeSnapshot,
    priority_scores,
)

NAMES = tuple(f"fam{i}" for i in range(8))


def _snap(step: int = 100, last: list[int] | None = None, **kw: object) -> ProbeSnapshot:
    n = len(NAMES)
    return ProbeSnapshot(
        step=step,
        tiers=np.asarray(kw.get("tiers", np.arange(n) % 3), dtype=np.int64),
        weights=np.asarray(kw.get("weights", np.ones(n)), dtype=np.float64),
        last_probe_step=np.asarray(last if last is not None else [step] * n, dtype=np.int64),
        change=np.asarray(kw.get("change", np.zeros(n)), dtype=np.float64),
        allowed=None if kw.get("allowed") is None else np.asarray(kw["allowed"], dtype=bool),
    )


def _collect(
    runner: ProbeRunner, done: Callable[[list[ProbeResults]], bool], timeout: float = 3.0
) -> list[ProbeResults]:
    """Drain until ``done`` holds; every drain must return at once (never block)."""
    got: list[ProbeResults] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        t0 = time.monotonic()
        r = runner.drain()
        assert time.monotonic() - t0 < 0.05, "drain() blocked"
        if len(r):
            got.append(r)
        if done(got):
            return got
        time.sleep(0.01)
    raise AssertionError(f"timed out; got {got}")


def _count(got: list[ProbeResults]) -> int:
    return sum(len(r) for r in got)


def _by_family(got: list[ProbeResults]) -> dict[int, tuple[bool, str, float, int]]:
    """family -> (ok, error, score, n) over several drains."""
    return {
        int(r.families[i]): (bool(r.ok[i]), r.errors[i], float(r.scores[i]), int(r.n[i]))
        for r in got
        for i in range(len(r))
    }


def _small(n: int, last: int = -1) -> ProbeSnapshot:
    z = np.zeros(n, dtype=np.int64)
    return ProbeSnapshot(100, z, np.ones(n), np.full(n, last, dtype=np.int64), np.zeros(n))


@pytest.fixture
def no_leaked_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    leaked = [t.name for t in set(threading.enumerate()) - before]
    assert leaked == [], f"threads left running after stop(): {leaked}"


def test_priority_scores_terms() -> None:
    s = _snap(last=[90, 10, 95, 50, 99, 98, -1, 96], change=[0, 0, 0.5, np.nan, 0, 0, 0, -1.0])
    score = priority_scores(s, PriorityWeights(stale=1, change=1, weight=0))
    assert score[6] == pytest.approx(2.0)  # never probed: twice the stalest
    assert score[1] == pytest.approx(1.0)
    assert score[7] == pytest.approx(4 / 90 + 1.0)  # |change| counts, either sign
    assert score[3] == pytest.approx(50 / 90)  # NaN change counts as none


def test_round_picks_stale_and_heavy_families_within_budget(no_leaked_threads: None) -> None:
    calls: list[tuple[str, int]] = []
    lock = threading.Lock()

    def probe(name: str, tier: int) -> tuple[float, int]:
        with lock:
            calls.append((name, tier))
        return 0.5, 16

    weights = [1, 1, 1, 1, 1, 5, 1, 1]
    last = [90, 10, 95, 50, 99, 98, -1, 96]
    with ProbeRunner(probe, NAMES, budget=3, timeout_s=2.0, every_steps=10) as runner:
        chosen = runner.run_round(_snap(weights=weights, last=last))
        assert chosen.tolist() == [6, 1, 5]  # never probed, stalest, heaviest
        got = _collect(runner, lambda g: _count(g) == 3)
        assert sorted(calls) == [("fam1", 1), ("fam5", 2), ("fam6", 0)]
        assert _by_family(got) == {f: (True, "", 0.5, 16) for f in (1, 5, 6)}
        assert [int(t) for r in got for t in r.tiers] == [f % 3 for r in got for f in r.families]
        # the breaker closes family 6 and 1 to probing: the next ones move up
        allowed = np.ones(8, dtype=bool)
        allowed[[1, 6]] = False
        assert runner.maybe_run(_snap(step=105, weights=weights, last=last)) is None  # < 10
        again = runner.maybe_run(_snap(step=110, weights=weights, last=last, allowed=allowed))
        assert again is not None and again.tolist() == [5, 3, 0]
        _collect(runner, lambda g: _count(g) == 3)


def test_probes_run_concurrently(no_leaked_threads: None) -> None:
    def probe(name: str, tier: int) -> float:
        time.sleep(0.2)
        return 0.25

    with ProbeRunner(probe, NAMES[:4], budget=4, max_workers=4, timeout_s=2.0) as runner:
        t0 = time.monotonic()
        runner.run_round(_small(4))
        got = _collect(runner, lambda g: _count(g) == 4)
        elapsed = time.monotonic() - t0
    assert elapsed < 0.6, f"4 x 0.2 s probes took {elapsed:.2f}s: not concurrent"
    assert all(r.ok.all() for r in got)


def test_failed_probe_is_retried_after_backoff(no_leaked_threads: None) -> None:
    calls: list[tuple[str, float]] = []

    def probe(name: str, tier: int) -> float:
        calls.append((name, time.monotonic()))
        if name == "fam0" and sum(c[0] == "fam0" for c in calls) == 1:
            raise RuntimeError("environment flaked")
        return 0.75

    with ProbeRunner(probe, NAMES, budget=1, timeout_s=2.0, retry_backoff_s=0.3) as runner:
        first = _snap(last=[-1, 100, 100, 100, 100, 100, 100, 100])
        assert runner.run_round(first).tolist() == [0]
        (r,) = _collect(runner, lambda g: _count(g) == 1)
        assert not r.ok[0] and r.errors == ("RuntimeError: environment flaked",)
        assert np.isnan(r.scores[0]) and r.n[0] == 0
        assert 0.2 < runner.backoff_remaining()[0] <= 0.3
        # family 0 is now the least urgent, and backing off: another family goes
        later = _snap(step=101, last=[101, 0, 1, 2, 3, 4, 5, 6])
        assert runner.run_round(later).tolist() == [1]
        _collect(runner, lambda g: _count(g) == 1)
        time.sleep(max(runner.backoff_remaining()[0], 0.0) + 0.01)
        assert runner.run_round(later).tolist() == [0]  # a pending retry jumps the queue
        (r,) = _collect(runner, lambda g: _count(g) == 1)
        assert r.ok.tolist() == [True] and r.scores.tolist() == [0.75]
    fam0 = [t for name, t in calls if name == "fam0"]
    assert len(fam0) == 2 and fam0[1] - fam0[0] >= 0.3
    assert runner.counters["failed"] == 1 and runner.counters["succeeded"] == 2


def test_hung_probe_times_out_without_blocking(no_leaked_threads: None) -> None:
    release = threading.Event()

    def probe(name: str, tier: int) -> float:
        if name == "fam0":
            release.wait(5.0)  # hangs until the test lets it go
        return 0.5

    runner = ProbeRunner(probe, NAMES[:2], budget=2, timeout_s=0.2, max_workers=2)
    snap = _small(2)
    t0 = time.monotonic()
    runner.run_round(snap)
    got = _collect(runner, lambda g: _count(g) == 2)
    waited = time.monotonic() - t0
    results = _by_family(got)
    assert results[1] == (True, "", 0.5, 1)
    assert results[0][0] is False and results[0][1].startswith("timeout")
    assert 0.2 <= waited < 1.0
    assert runner.counters["timed_out"] == 1
    assert runner.in_flight.tolist() == [True, False]  # the hung thread is not killable...
    assert 0 not in runner.run_round(snap).tolist()  # ...so its family is not stacked on it
    release.set()
    assert runner.stop(timeout_s=3.0)
    assert runner.counters["late"] == 1  # the late answer was ignored
    assert len(runner.drain()) <= 1  # only the second round's family-1 result, if any


def test_bad_return_values_are_failures() -> None:
    answers = {"fam0": 1.5, "fam1": (0.5, 0), "fam2": "high", "fam3": (0.4, 8)}

    def probe(name: str, tier: int) -> object:
        return answers[name]

    with ProbeRunner(probe, list(answers), budget=4, timeout_s=2.0) as runner:  # type: ignore[arg-type]
        runner.run_round(_small(4))
        got = _collect(runner, lambda g: _count(g) == 4)
    by = _by_family(got)
    assert by[3] == (True, "", 0.4, 8)
    assert "score must be a number in [0, 1], got 1.5" in by[0][1]
    assert "n must be >= 1, got 0" in by[1][1]
    assert by[2][1].startswith("bad return value")


def test_wall_clock_interval_rounds(no_leaked_threads: None) -> None:
    runner = ProbeRunner(lambda name, tier: 0.5, NAMES, budget=2, timeout_s=2.0)
    runner.start(interval_s=0.2, snapshot=_snap())
    got = _collect(runner, lambda g: _count(g) >= 4, timeout=3.0)
    assert runner.counters["rounds"] >= 2
    assert all(r.ok.all() for r in got)
    assert runner.stop()
    rounds = runner.counters["rounds"]
    time.sleep(0.3)
    assert runner.counters["rounds"] == rounds  # no rounds after stop()


def test_cron_trigger_is_accepted_and_fires(no_leaked_threads: None) -> None:
    runner = ProbeRunner(lambda name, tier: 0.5, NAMES, budget=1, timeout_s=2.0)
    runner.start(cron={"second": "*"}, snapshot=_snap())
    assert isinstance(runner.trigger, CronTrigger)
    _collect(runner, lambda g: _count(g) >= 1, timeout=3.0)
    assert runner.stop()
    crontab = ProbeRunner(lambda name, tier: 0.5, NAMES, budget=1, timeout_s=2.0)
    crontab.start(cron="*/10 * * * *")
    assert isinstance(crontab.trigger, CronTrigger)
    assert crontab.stop()


@pytest.mark.parametrize(
    ("start_kw", "needle"),
    [
        ({"cron": "not a cron"}, "probes.cron: 'not a cron' is not a valid cron schedule"),
        ({"cron": {"second": "*/99x"}}, "probes.cron"),
        ({"interval_s": 1.0, "cron": "* * * * *"}, "exactly one of interval_s and cron"),
        ({}, "exactly one of interval_s and cron"),
        ({"interval_s": 0.0}, "probes.interval_s: must be > 0"),
    ],
)
def test_bad_schedule_is_a_config_error(start_kw: dict[str, object], needle: str) -> None:
    runner = ProbeRunner(lambda name, tier: 0.5, NAMES, budget=1, timeout_s=2.0)
    with pytest.raises(ConfigError) as err:
        runner.start(**start_kw)  # type: ignore[arg-type]
    assert needle in str(err.value)
    assert runner.stop()


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"probes\.budget: must be >= 1, got 0"):
        ProbeRunner(lambda name, tier: 0.5, NAMES, budget=0, timeout_s=1.0)
    runner = ProbeRunner(lambda name, tier: 0.5, NAMES, budget=1, timeout_s=1.0)
    with pytest.raises(ConfigError, match="every_steps: not set"):
        runner.maybe_run(_snap())
    assert runner.stop()
