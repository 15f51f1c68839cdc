"""Damaged and locked SQLite stores: a clear StoreError (exit 2 in the CLI) that says what
is wrong and what to do; a resume that checks integrity first and skips a damaged
checkpoint for the newest one that decodes; a lock that is waited on out loud, up to a limit.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from store_procs import CATALOG

from scheduler._serialize import dumps_state, loads_state
from scheduler.app.cli import main
from scheduler.store import StoreError, open_store, resume_point


def _store_with_checkpoints(path: Path, steps: tuple[int, ...] = (10, 20, 30)) -> int:
    with open_store(f"sqlite:///{path}", keep_checkpoints=5) as store:
        run = store.open_run("r", seed=0, config={}, catalog=CATALOG)
        for step in steps:
            store.save_checkpoint(run.run_id, step, dumps_state({"step": step}))
        return run.run_id


@pytest.mark.parametrize("damage", ["truncated", "zeroed", "text"])
def test_a_damaged_sqlite_file_is_a_store_error_that_says_what_to_do(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "c.db"
    _store_with_checkpoints(db)
    data = db.read_bytes()
    if damage == "truncated":
        db.write_bytes(data[: len(data) // 3])
    elif damage == "zeroed":
        db.write_bytes(bytes(len(data)))
    else:
        db.write_text("this is not a database\n" * 100)
    url = f"sqlite:///{db}"
    with pytest.raises(StoreError, match=r"damaged or not a store database.*restore it"):  # noqa: SIM117
        with open_store(url) as store:
            for run in store.runs():
                store.latest_checkpoint(run.run_id)
    assert main(["report", "--db", url]) == 2
    err = capsys.readouterr().err
    assert "damaged or not a store database" in err and "unexpected" not in err


def test_a_damaged_checkpoint_is_skipped_for_the_newest_that_decodes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "c.db"
    run_id = _store_with_checkpoints(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE cs_checkpoints SET state = ? WHERE step = 30", (b"PK\x03\x04junk",))
    with open_store(f"sqlite:///{db}") as store, caplog.at_level(logging.WARNING):
        point = resume_point(store, run_id, "r", loads_state)
    assert point is not None and point[0] == 20 and point[1]["step"] == 20
    assert "checkpoint of run 'r' at step 30 is damaged" in caplog.text


def test_no_checkpoint_that_decodes_is_a_store_error(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    run_id = _store_with_checkpoints(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE cs_checkpoints SET state = ?", (b"\x00" * 64,))
    with (
        open_store(f"sqlite:///{db}") as store,
        pytest.raises(StoreError, match="no checkpoint of run 'r' can be read"),
    ):
        resume_point(store, run_id, "r", loads_state)


def test_a_store_that_fails_its_integrity_check_is_not_resumed(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with open_store(f"sqlite:///{db}") as store:
        run = store.open_run("r", seed=0, config={}, catalog=CATALOG)
        for step in range(400):  # enough index pages that some lie in the middle
            store.save_checkpoint(run.run_id, step, dumps_state({"step": step, "pad": "x" * 900}))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute(
            "SELECT rootpage FROM sqlite_master "
            "WHERE type = 'index' AND tbl_name = 'cs_checkpoints'"
        ).fetchone()[0]
    data = bytearray(db.read_bytes())
    start = (root - 1) * page
    data[start + 8 : start + 64] = b"\xff" * 56  # a damaged b-tree page header
    db.write_bytes(bytes(data))
    with open_store(f"sqlite:///{db}") as store:
        assert store.integrity_check() != "ok"
        with pytest.raises(StoreError, match=r"fails its integrity check.*recover"):
            resume_point(store, run.run_id, "r", loads_state)


def _hold_lock(db: Path, seconds: float, ready: threading.Event) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    ready.set()
    time.sleep(seconds)
    conn.execute("ROLLBACK")
    conn.close()


def test_a_locked_store_says_it_waits_and_gives_up_at_the_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "c.db"
    run_id = _store_with_checkpoints(db)
    ready = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(db, 12.0, ready))
    holder.start()
    ready.wait()
    t0 = time.monotonic()
    try:
        with (
            caplog.at_level(logging.WARNING),
            pytest.raises(StoreError, match="locked"),
            open_store(f"sqlite:///{db}", lock_timeout_s=5.0) as store,  # opening writes
        ):
            store.save_checkpoint(run_id, 40, dumps_state({"step": 40}))
        waited = time.monotonic() - t0
    finally:
        holder.join()
    assert 3.0 <= waited < 9.0
    assert "is locked by another process; waiting" in caplog.text


def test_a_lock_released_within_the_limit_is_waited_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "c.db"
    run_id = _store_with_checkpoints(db)
    ready = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(db, 4.0, ready))
    holder.start()
    ready.wait()
    with open_store(f"sqlite:///{db}", lock_timeout_s=30.0) as store:
        with caplog.at_level(logging.WARNING):
            store.save_checkpoint(run_id, 40, dumps_state({"step": 40}))
        assert store.checkpoint_steps(run_id)[0] == 40
    holder.join()
    assert "waiting" in caplog.text


MANIFEST = """
version: 1
domains:
  - name: d
    families:
      - {name: f1, environment: e, verification: v, tiers: 2, variants: {count: 20}}
      - {name: f2, environment: e, verification: v, variants: {count: 20}}
"""


def test_simulate_resumes_past_a_damaged_newest_checkpoint(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    db = tmp_path / "run.db"
    monkeypatch.setenv("CURRICULUM_CHECKPOINT_EVERY", "10")
    args = ["simulate", "--no-baseline", "--no-tracking", "--no-progress", "--run-name", "r"]
    args += ["--domains", str(tmp_path / "m.yaml"), "--db", f"sqlite:///{db}"]
    assert main([*args, "--steps", "40"]) == 0
    with sqlite3.connect(db) as conn:
        newest = conn.execute("SELECT max(step) FROM cs_checkpoints").fetchone()[0]
        conn.execute("UPDATE cs_checkpoints SET state = ? WHERE step = ?", (b"PK\x05\x06", newest))
    capsys.readouterr()
    assert main([*args, "--steps", "60", "--resume"]) == 0
    err = capsys.readouterr().err
    assert f"at step {newest} is damaged" in caplog.text
    assert f"resumed from the checkpoint at step {newest - 10}" in err
