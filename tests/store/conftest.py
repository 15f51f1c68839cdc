"""Fixtures: one fresh store URL per test, on SQLite (tmp_path) and on PostgreSQL.

PostgreSQL is the server at 127.0.0.1:5432, database ``test`` (trust auth; user ``postgres``
or else ``root``). Each test gets its own schema (via ``search_path``) that is dropped after
it, so reruns and parallel runs never see each other's rows. When the server is unreachable
the PostgreSQL half skips with the reason.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from scheduler.store import SqlStore, open_store

# store_procs holds the writer processes; spawned children import it by name (they inherit
# sys.path), and pytest's importlib mode does not put test directories on sys.path itself.
sys.path.insert(0, str(Path(__file__).parent))

PG_HOST, PG_PORT, PG_DB = "127.0.0.1", 5432, "test"
_pg_user: str | None = None
_pg_error: str | None = None


def pg_user() -> str:
    """The first user that can connect, or skip with the reason."""
    global _pg_user, _pg_error
    if _pg_user is None and _pg_error is None:
        errors = []
        for user in ("postgres", "root"):
            try:
                with psycopg.connect(
                    host=PG_HOST, port=PG_PORT, dbname=PG_DB, user=user, connect_timeout=3
                ):
                    _pg_user = user
                    break
            except psycopg.Error as exc:
                errors.append(f"{user}: {str(exc).strip()}")
        else:
            _pg_error = "; ".join(errors)
    if _pg_user is None:
        pytest.skip(f"PostgreSQL not reachable at {PG_HOST}:{PG_PORT}/{PG_DB} ({_pg_error})")
    return _pg_user


def _pg_admin(sql: str) -> None:
    with psycopg.connect(
        host=PG_HOST, port=PG_PORT, dbname=PG_DB, user=pg_user(), autocommit=True
    ) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgresql":
        pg_user()
    return str(request.param)


@pytest.fixture
def new_url(backend: str, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """A factory of URLs of fresh, empty databases of the test's backend."""
    schemas: list[str] = []

    def make() -> str:
        if backend == "sqlite":
            return f"sqlite:///{tmp_path / f'store_{uuid.uuid4().hex[:8]}.db'}"
        schema = f"cs_test_{uuid.uuid4().hex[:12]}"
        _pg_admin(f"CREATE SCHEMA {schema}")
        schemas.append(schema)
        return (
            f"postgresql+psycopg://{pg_user()}@{PG_HOST}:{PG_PORT}/{PG_DB}"
            f"?options=-csearch_path%3D{schema}"
        )

    yield make
    for schema in schemas:
        _pg_admin(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def store_url(new_url: Callable[[], str]) -> str:
    return new_url()


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    s = open_store(store_url)
    yield s
    s.close()
