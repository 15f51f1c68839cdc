"""StepWriter (buffered, checkpointed commits) and URL handling."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from store_procs import CATALOG, outcomes_for, probes_for

from scheduler import Event
from scheduler.store import OutcomeRows, SqlStore, StepWriter, StoreError, open_store


def test_commits_every_n_steps_with_the_checkpoint(store: SqlStore) -> None:
    run = store.open_run("w", seed=0, config={}, catalog=CATALOG).run_id
    writer = StepWriter(store, run, every_steps=4)
    calls: list[int] = []

    def state_of(step: int) -> bytes:
        calls.append(step)
        return b"state-%d" % step

    for step in range(10):
        committed = writer.step(
            step,
            lambda step=step: state_of(step),  # type: ignore[misc]
            probe_points=probes_for(step),
            outcomes=outcomes_for(step, 3),
            events=[Event(step, "e")],
            weights=np.full(CATALOG.n_arms, float(step)),
        )
        assert committed == (step % 4 == 3)
        visible = store.outcomes(run)
        last_commit = (step + 1) // 4 * 4 - 1
        assert len(visible) == 3 * (last_commit + 1)
        if last_commit >= 0:
            assert store.latest_checkpoint(run) == (last_commit, b"state-%d" % last_commit)
    assert calls == [3, 7]  # the state is serialised only when committing
    assert writer.pending_steps == 2
    writer.commit(9, b"state-9")
    assert store.outcomes(run).equals(OutcomeRows.concat([outcomes_for(s, 3) for s in range(10)]))
    steps, weights = store.weights(run)
    assert steps.tolist() == list(range(10)) and np.array_equal(weights[:, 0], np.arange(10.0))
    assert len(store.probe_points(run)) == 10 * CATALOG.n_families
    assert writer.commits == 3


def test_commits_after_every_seconds(store: SqlStore) -> None:
    run = store.open_run("t", seed=0, config={}, catalog=CATALOG).run_id
    now = [0.0]
    writer = StepWriter(store, run, every_steps=1000, every_seconds=5.0, clock=lambda: now[0])
    assert not writer.step(0, lambda: b"0", outcomes=outcomes_for(0, 2))
    now[0] = 4.9
    assert not writer.step(1, lambda: b"1", outcomes=outcomes_for(1, 2))
    now[0] = 5.0
    assert writer.step(2, lambda: b"2", outcomes=outcomes_for(2, 2))
    assert store.latest_checkpoint(run) == (2, b"2") and len(store.outcomes(run)) == 6
    now[0] = 6.0
    assert not writer.step(3, lambda: b"3")


def test_a_rejected_commit_keeps_the_buffer(store: SqlStore) -> None:
    run = store.open_run("r", seed=0, config={}, catalog=CATALOG).run_id
    writer = StepWriter(store, run, every_steps=2)
    writer.step(0, lambda: b"0", outcomes=outcomes_for(0, 2))
    with pytest.raises(StoreError, match="state must be bytes"):
        writer.step(1, lambda: "oops", outcomes=outcomes_for(1, 2))  # type: ignore[arg-type,return-value]
    assert len(store.outcomes(run)) == 0 and writer.pending_steps == 2
    writer.commit(1, b"1")
    assert len(store.outcomes(run)) == 4 and store.latest_checkpoint(run) == (1, b"1")


def test_writer_rejects_bad_intervals(store: SqlStore) -> None:
    with pytest.raises(StoreError, match="every_steps"):
        StepWriter(store, 1, every_steps=0)
    with pytest.raises(StoreError, match="every_seconds"):
        StepWriter(store, 1, every_seconds=0.0)


def test_default_sqlite_file_and_memory_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///")
    store.open_run("d", seed=0, config={}, catalog=CATALOG)
    store.close()
    assert (tmp_path / "curriculum.db").exists()

    mem = open_store("sqlite://")
    run = mem.open_run("m", seed=0, config={}, catalog=CATALOG).run_id
    errors: list[BaseException] = []

    def write(tag: int) -> None:
        try:
            for s in range(20):
                mem.add_outcomes(run, outcomes_for(tag * 1000 + s, 4, tag=tag))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(mem.outcomes(run)) == 3 * 20 * 4
    mem.close()


def test_background_commits_land_and_errors_surface(store: SqlStore) -> None:
    run = store.open_run("bg", seed=0, config={}, catalog=CATALOG).run_id
    writer = StepWriter(store, run, every_steps=3, background=True)
    for step in range(9):
        writer.step(step, lambda step=step: b"s%d" % step, outcomes=outcomes_for(step, 2))  # type: ignore[misc]
    writer.close()
    assert store.latest_checkpoint(run) == (8, b"s8")
    assert store.outcomes(run).equals(OutcomeRows.concat([outcomes_for(s, 2) for s in range(9)]))

    # A failing background transaction is reported at the next commit, not lost silently.
    failing = StepWriter(store, run, every_steps=1, background=True)
    failing.step(9, lambda: b"s9", outcomes=outcomes_for(9, 2))
    bad = OutcomeRows.concat([outcomes_for(10, 2)])
    object.__setattr__(bad, "family", np.full(2, 10_000))  # an unknown family id
    failing.step(10, lambda: b"s10", outcomes=bad)
    with pytest.raises(StoreError, match="background commit"):
        failing.step(11, lambda: b"s11", outcomes=outcomes_for(11, 2))
        failing.close()
    assert store.latest_checkpoint(run) == (9, b"s9")
