"""Schema versions: a one-row version table and explicit, ordered upgrade steps.

Version 1 is the initial schema. An empty database is created from the models and stamped
with the newest version (as alembic's "create_all, then stamp head"); a database at an older
version runs each later step in order, all in one transaction, so a failed upgrade leaves it
at its old version. A database newer than this code is refused: old code must not write
into a schema it does not know.

To change the schema: edit the models, bump ``SCHEMA_VERSION``, and add a ``Migration`` whose
``apply`` takes a version ``SCHEMA_VERSION - 1`` database to the new shape (ALTER TABLE ...).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, inspect, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from ._models import ALL_TABLES, SCHEMA_VERSION_T
from ._protocol import StoreError

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_PG_LOCK_KEY = 0x43534D4947  # "CSMIG": serialises concurrent upgrades on PostgreSQL


@dataclass(frozen=True)
class Migration:
    """One step: takes a database at ``version - 1`` to ``version``."""

    version: int
    description: str
    apply: Callable[[Connection], None]


# Ordered upgrade steps for versions 2, 3, ... (version 1 is the initial create_all).
MIGRATIONS: tuple[Migration, ...] = ()


def current_version(conn: Connection) -> int:
    """The version recorded in the database; 0 when it has no store tables yet."""
    if not inspect(conn).has_table(SCHEMA_VERSION_T.name):
        return 0
    version = conn.execute(select(SCHEMA_VERSION_T.c.version)).scalar_one_or_none()
    return 0 if version is None else int(version)


def upgrade(
    conn: Connection,
    *,
    target: int | None = None,
    migrations: Sequence[Migration] | None = None,
) -> int:
    """Bring the schema to ``target`` inside the caller's transaction; returns the old version.

    The caller holds a write transaction (BEGIN IMMEDIATE on SQLite), so two processes
    opening one database at once upgrade it once. ``target`` and ``migrations`` default to
    this module's ``SCHEMA_VERSION`` and ``MIGRATIONS``, looked up at call time.
    """
    target = SCHEMA_VERSION if target is None else target
    migrations = MIGRATIONS if migrations is None else migrations
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
    found = current_version(conn)
    if found > target:
        raise StoreError(
            f"the store's schema is version {found}, newer than this code's {target}: "
            "upgrade curriculum-scheduler, or open a different database"
        )
    if found == target:
        return found
    now = datetime.now(UTC)
    if found == 0:
        for table in ALL_TABLES:
            table.create(conn, checkfirst=True)
        stmt = pg_insert(SCHEMA_VERSION_T) if conn.dialect.name == "postgresql" else None
        values = {"id": 1, "version": target, "updated_at": now}
        if stmt is not None:
            conn.execute(stmt.values(values).on_conflict_do_nothing())
        else:
            conn.execute(SCHEMA_VERSION_T.insert().prefix_with("OR IGNORE").values(values))
        log.info("created store schema version %d", target)
        return found
    steps = {m.version: m for m in migrations}
    for version in range(found + 1, target + 1):
        step = steps.get(version)
        if step is None:
            raise StoreError(
                f"no migration step to schema version {version} (database is at {found}); "
                "this build of curriculum-scheduler cannot upgrade it"
            )
        log.info("migrating store schema %d -> %d: %s", version - 1, version, step.description)
        step.apply(conn)
    conn.execute(update(SCHEMA_VERSION_T).values(version=target, updated_at=now))
    return found
