"""The connection side of the SQL store: the store URL parsed and checked, the engine with
its SQLite hooks (WAL, ``synchronous=NORMAL``, a busy timeout, and ``BEGIN IMMEDIATE`` for
every write transaction, so a read-then-write waits for another writer instead of failing
on the lock upgrade), and transactions that wait out a locked SQLite file or a restarting
PostgreSQL server and turn a damaged database into a StoreError that says what to do.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError, OperationalError
from sqlalchemy.pool import StaticPool

from .._redact import mask_url
from ._protocol import StoreError

log = logging.getLogger(__name__)

_BUSY_SLICE_S = 2.0  # SQLite waits this long per try; between tries we say that we wait
_CORRUPT = ("file is not a database", "malformed", "database corrupt", "disk i/o error")
_WAL_AUTOCHECKPOINT_PAGES = 10_000
_CACHE_KIB = 64 * 1024  # per connection
_READ_ONLY = "cs_read_only"  # execution option: begin a plain (deferred) transaction

_T = TypeVar("_T")


def parse_url(url: str) -> tuple[URL, bool]:
    """The SQLAlchemy URL for a store URL, and whether it is an in-memory SQLite database."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(
            f"store URL {mask_url(url)!r}: not a database URL; use sqlite:///path.db, sqlite:// "
            "(in memory) or postgresql+psycopg://user@host:5432/db"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(
            f"store URL {mask_url(url)!r}: unsupported database {backend!r}; use "
            "sqlite:///path.db, sqlite:// (in memory) or postgresql+psycopg://user@host:5432/db"
        )
    driver = parsed.get_driver_name()
    if backend == "sqlite":
        if driver not in ("pysqlite", ""):
            raise StoreError(
                f"store URL {mask_url(url)!r}: use the built-in driver, sqlite:///path.db"
            )
        database = parsed.database
        if database == "" and url.rstrip().endswith(":///"):
            parsed = parsed.set(database="curriculum.db")
        memory = parsed.database in (None, "", ":memory:")
        return parsed, memory
    if backend == "postgresql":
        if driver not in ("psycopg", "psycopg2"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        elif driver == "psycopg2":
            raise StoreError(
                f"store URL {mask_url(url)!r}: the store uses psycopg 3; write postgresql+psycopg://..."
            )
        return parsed, False
    raise StoreError(
        f"store URL {mask_url(url)!r}: unsupported database {backend!r}; use sqlite:///path.db, "
        "sqlite:// (in memory) or postgresql+psycopg://user@host:5432/db"
    )


def _install_sqlite_hooks(engine: Engine, memory: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" hook below issue BEGIN itself (pysqlite's own is deferred).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(_BUSY_SLICE_S * 1000)}")
        if not memory:
            cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        # Checkpoint the WAL into the database every ~40 MB rather than every 4 MB: each
        # checkpoint fsyncs, and at one blob of outcomes per step the default fires often.
        cur.execute(f"PRAGMA wal_autocheckpoint = {_WAL_AUTOCHECKPOINT_PAGES}")
        # A curve read touches one table page per point: keep a run's pages in SQLite's
        # cache (default 2 MB) instead of re-reading them from the OS on every read.
        cur.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read_only = conn.get_execution_options().get(_READ_ONLY, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


class Database:
    """One store database: its engine and its transactions (``begin``, ``read``)."""

    def __init__(self, url: str, lock_timeout_s: float) -> None:
        parsed, memory = parse_url(url)
        self.url = parsed.render_as_string(hide_password=True)
        self.dialect = parsed.get_backend_name()
        self.lock_timeout_s = lock_timeout_s
        self.opened = False
        # In-memory SQLite is one connection shared by every thread, serialised by a lock.
        self._lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if memory else contextlib.nullcontext()
        )
        if self.dialect == "sqlite":
            kwargs: dict[str, Any] = {
                "connect_args": {"check_same_thread": False, "timeout": _BUSY_SLICE_S}
            }
            if memory:
                kwargs["poolclass"] = StaticPool
            self.engine: Engine = create_engine(parsed, **kwargs)
            _install_sqlite_hooks(self.engine, memory)
        else:
            self.engine = create_engine(parsed, pool_pre_ping=True)

    def open(self, setup: Callable[[Connection], _T]) -> _T:
        """Run ``setup`` (the schema upgrade) in the first write transaction. A server that
        cannot be reached, or a file that is not a sound database, is a StoreError here;
        the engine is disposed on any failure."""
        try:
            with self.begin() as conn:
                result = setup(conn)
        except OperationalError as exc:
            self.engine.dispose()
            if exc.statement is not None and not _is_corrupt(exc):  # a statement failed
                raise
            reason = " ".join(str(exc.orig).split())
            raise StoreError(
                f"cannot open the store at {self.url}: {reason}; check that the "
                "database server is running and the URL (user, host, port, database) is right"
            ) from None
        except DatabaseError as exc:
            self.engine.dispose()
            if not _is_corrupt(exc):
                raise
            raise self.corrupt(exc) from None
        except BaseException:
            self.engine.dispose()
            raise
        self.opened = True
        return result

    def dispose(self) -> None:
        self.engine.dispose()

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite); commits on exit, else rolls back."""
        with self._lock:
            conn, trans = self._start(read_only=False)
            with self._named_errors(), conn, trans:
                yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction: one consistent snapshot, no write lock taken."""
        with self._lock:
            conn, trans = self._start(read_only=True)
            with self._named_errors(), conn, trans:
                yield conn

    def _start(self, *, read_only: bool) -> tuple[Connection, Any]:
        """A connection with its transaction begun. While another process holds SQLite's
        write lock, say so in the log and try again, up to ``lock_timeout_s`` in all."""
        began = time.monotonic()
        warned = 0.0
        while True:
            conn: Connection | None = None
            try:
                conn = self.engine.connect()
                if read_only:
                    conn.execution_options(**{_READ_ONLY: True})
                return conn, conn.begin()
            except OperationalError as exc:
                if conn is not None:
                    conn.close()
                # A server that went away mid-run (a restart) is waited for; one that cannot
                # be reached when the store is opened is a bad URL, reported at once.
                if self.opened and self.dialect != "sqlite" and exc.statement is None:
                    waited = time.monotonic() - began
                    if waited >= self.lock_timeout_s:
                        reason = " ".join(str(exc.orig).split())
                        raise StoreError(
                            f"cannot reach the store at {self.url} for {waited:.0f} s (limit "
                            f"{self.lock_timeout_s:g} s): {reason}; nothing more was written: "
                            "start the server again and resume the run (--resume)"
                        ) from None
                    if waited - warned >= 10.0 or not warned:
                        warned = max(waited, 1e-9)
                        log.warning(
                            "the store %s is unreachable; retrying (%.0f s so far, giving up "
                            "after %g s)",
                            self.url,
                            waited,
                            self.lock_timeout_s,
                        )
                    time.sleep(min(1.0, max(self.lock_timeout_s - waited, 0.0)))
                    continue
                if "locked" not in str(exc.orig) and "busy" not in str(exc.orig):
                    raise
                waited = time.monotonic() - began + _BUSY_SLICE_S
                if waited >= self.lock_timeout_s:
                    raise StoreError(
                        f"the store {self.url} has been locked by another process for "
                        f"{waited:.0f} s (limit {self.lock_timeout_s:g} s): stop the other "
                        "writer, or raise the limit (settings: store_lock_timeout_s)"
                    ) from None
                if waited - warned >= 10.0 or not warned:
                    warned = waited
                    log.warning(
                        "the store %s is locked by another process; waiting (%.0f s so far, "
                        "giving up after %g s)",
                        self.url,
                        waited,
                        self.lock_timeout_s,
                    )
            except DatabaseError as exc:
                if conn is not None:
                    conn.close()
                if not _is_corrupt(exc):
                    raise
                raise self.corrupt(exc) from None

    @contextlib.contextmanager
    def _named_errors(self) -> Iterator[None]:
        """A damaged database found mid-query becomes a StoreError that says what to do."""
        try:
            yield
        except DatabaseError as exc:
            if isinstance(exc, IntegrityError):
                raise
            text = str(exc.orig).lower()
            if "disk is full" in text or "no space left" in text:
                raise StoreError(
                    f"the disk holding the store {self.url} is full: this write was rolled "
                    "back and nothing committed before it is lost; free some space and "
                    "resume the run (--resume)"
                ) from None
            if exc.connection_invalidated:
                raise StoreError(
                    f"lost the connection to the store {self.url} mid-write "
                    f"({' '.join(str(exc.orig).split())}): this write was rolled back; "
                    "resume the run (--resume) once the server is back"
                ) from None
            if not _is_corrupt(exc):
                raise
            raise self.corrupt(exc) from None

    def corrupt(self, exc: DatabaseError) -> StoreError:
        reason = " ".join(str(exc.orig).split())
        return StoreError(
            f"the store {self.url} is damaged or not a store database ({reason}): restore "
            "it from a backup, or recover what can be read with "
            "`sqlite3 DB .recover | sqlite3 recovered.db` and pass --db with the copy; "
            "or move the file away to start afresh"
        )


def _is_corrupt(exc: DatabaseError) -> bool:
    text = str(exc.orig).lower()
    return any(word in text for word in _CORRUPT)
