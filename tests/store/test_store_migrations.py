"""Schema versions and migrations, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, inspect, text
from store_procs import CATALOG, outcomes_for

from scheduler.store import SCHEMA_VERSION, Migration, StoreError, open_store
from scheduler.store import _migrations as migrations

TABLES = {
    "cs_schema_version",
    "cs_runs",
    "cs_probe_points",
    "cs_events",
    "cs_weights",
    "cs_outcomes",
    "cs_regression_sets",
    "cs_checkpoints",
}


def _add_note_column(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE cs_runs ADD COLUMN note TEXT DEFAULT 'migrated'"))


def _columns(store: object, table: str) -> set[str]:
    engine = store._engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        return {c["name"] for c in inspect(conn).get_columns(table)}


def test_fresh_database_is_created_at_the_current_version(store_url: str) -> None:
    store = open_store(store_url)
    assert store.schema_version() == SCHEMA_VERSION == 1
    engine = store._engine
    with engine.connect() as conn:
        assert set(inspect(conn).get_table_names()) >= TABLES
        indexes = {
            i["name"]: i["column_names"] for i in inspect(conn).get_indexes("cs_probe_points")
        }
    assert indexes["ix_cs_probe_curve"] == ["run_id", "family", "tier", "step"]
    store.close()
    again = open_store(store_url)  # reopening is a no-op
    assert again.schema_version() == 1
    again.close()


def test_older_database_is_upgraded_and_keeps_its_rows(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(store_url)
    run = store.open_run("old", seed=1, config={}, catalog=CATALOG).run_id
    store.add_outcomes(run, outcomes_for(0, 5))
    store.close()

    monkeypatch.setattr(migrations, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(migrations, "MIGRATIONS", (Migration(2, "runs.note", _add_note_column),))
    upgraded = open_store(store_url)
    assert upgraded.schema_version() == 2
    assert "note" in _columns(upgraded, "cs_runs")
    assert upgraded.outcomes(run).equals(outcomes_for(0, 5))
    upgraded.close()

    # Code that only knows version 1 must refuse the version-2 database.
    monkeypatch.undo()
    with pytest.raises(StoreError, match=r"schema is version 2, newer than this code's 1"):
        open_store(store_url)


def test_a_failed_migration_leaves_the_old_version(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(store_url).close()

    def half_done(conn: Connection) -> None:
        conn.execute(text("CREATE TABLE cs_half_done (x INTEGER)"))
        raise RuntimeError("step 3 broke")

    monkeypatch.setattr(migrations, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(
        migrations,
        "MIGRATIONS",
        (Migration(2, "runs.note", _add_note_column), Migration(3, "broken", half_done)),
    )
    with pytest.raises(RuntimeError, match="step 3 broke"):
        open_store(store_url)
    monkeypatch.undo()
    store = open_store(store_url)
    assert store.schema_version() == 1
    assert "note" not in _columns(store, "cs_runs")  # step 2 was rolled back with step 3
    with store._engine.connect() as conn:
        assert "cs_half_done" not in inspect(conn).get_table_names()
    store.close()


def test_a_missing_step_is_an_error(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    open_store(store_url).close()
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(migrations, "MIGRATIONS", ())
    with pytest.raises(StoreError, match="no migration step to schema version 2"):
        open_store(store_url)
