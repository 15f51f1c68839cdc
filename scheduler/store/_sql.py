"""The SQL store: SQLite (embedded default) and PostgreSQL (psycopg 3) behind one class.

Writes are SQLAlchemy Core ``insert(table)`` executemany over lists of row dicts built from
the numpy columns; reads are Core selects turned column-wise into numpy arrays. On SQLite the
connection runs in WAL mode with ``synchronous=NORMAL`` and a busy timeout, and every write
transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock up front, so a
read-then-write transaction waits for another writer instead of failing with "database is
locked" when it tries to upgrade its read lock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    Connection,
    Engine,
    Row,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
)
from sqlalchemy.engine import make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError, OperationalError
from sqlalchemy.pool import StaticPool

from domains import Catalog

from .._batch import Status
from .._events import Event
from .._redact import mask_url
from . import _codec
from ._migrations import current_version, upgrade
from ._models import (
    CHECKPOINTS_T,
    EVENTS_T,
    OUTCOMES_T,
    PROBES_T,
    REGSETS_T,
    RUNS_T,
    WEIGHTS_T,
)
from ._protocol import (
    DEFAULT_REPLAY_STATUSES,
    PROBE_COLUMNS,
    FloatArray,
    IntArray,
    OutcomeRows,
    ProbePoints,
    RunInfo,
    StoreError,
    WeightsArg,
)

log = logging.getLogger(__name__)

DEFAULT_URL = "sqlite:///curriculum.db"
DEFAULT_LOCK_TIMEOUT_S = 60.0
_BUSY_SLICE_S = 2.0  # SQLite waits this long per try; between tries we say that we wait
_CORRUPT = ("file is not a database", "malformed", "database corrupt", "disk i/o error")
_WAL_AUTOCHECKPOINT_PAGES = 10_000
_CACHE_KIB = 64 * 1024  # per connection
_READ_ONLY = "cs_read_only"  # execution option: begin a plain (deferred) transaction
_WEIGHT_DTYPE = np.dtype("<f8")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class _ProbeRows:
    """Probe rows as columns (name -> Python list), ready for either insert path."""

    columns: dict[str, list[Any]]
    n: int

    def __bool__(self) -> bool:
        return self.n > 0


def _rows(keys: Sequence[str], columns: Sequence[list[Any]], **const: Any) -> list[dict[str, Any]]:
    """Row dicts for executemany from aligned Python lists (``ndarray.tolist()``)."""
    if const:
        return [
            {**const, **dict(zip(keys, vals, strict=True))} for vals in zip(*columns, strict=True)
        ]
    return [dict(zip(keys, vals, strict=True)) for vals in zip(*columns, strict=True)]


def _float_column(values: Sequence[Any]) -> FloatArray:
    # None comes back where SQLite stored a NaN as NULL.
    return np.array(values, dtype=np.float64) if values else np.zeros(0, np.float64)


def _int_column(values: Sequence[Any]) -> IntArray:
    return np.array(values, dtype=np.int64) if values else np.zeros(0, np.int64)


def _columns(rows: Sequence[Row[Any]], width: int) -> list[tuple[Any, ...]]:
    return list(zip(*rows, strict=True)) if rows else [() for _ in range(width)]


def _weight_pairs(weights: WeightsArg | None) -> list[tuple[int, Any]]:
    if weights is None:
        return []
    if isinstance(weights, tuple) and len(weights) == 2 and not isinstance(weights[0], tuple):
        step, arr = weights
        return [(int(step), arr)]
    try:
        return [(int(step), arr) for step, arr in weights]
    except (TypeError, ValueError):
        raise StoreError(
            "weights: expected (step, array) or a list of (step, array) pairs"
        ) from None


def _parse_url(url: str) -> tuple[URL, bool]:
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


class SqlStore:
    """A Store on SQLite or PostgreSQL. Open it with :func:`open_store`."""

    def __init__(
        self,
        url: str,
        *,
        keep_checkpoints: int = 3,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        if keep_checkpoints < 1:
            raise StoreError(f"keep_checkpoints: must be at least 1, got {keep_checkpoints}")
        if not lock_timeout_s > 0:
            raise StoreError(f"lock_timeout_s: must be a positive number, got {lock_timeout_s}")
        parsed, memory = _parse_url(url)
        self.url = parsed.render_as_string(hide_password=True)
        self.keep_checkpoints = keep_checkpoints
        self.lock_timeout_s = lock_timeout_s
        self._opened = False
        self.dialect = parsed.get_backend_name()
        # In-memory SQLite is one connection shared by every thread, serialised by a lock.
        self._lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if memory else contextlib.nullcontext()
        )
        self._families: dict[int, int] = {}  # run_id -> number of families, for validation
        self._probe_insert: tuple[str, tuple[str, ...]] | None = None  # SQLite fast path
        if self.dialect == "sqlite":
            kwargs: dict[str, Any] = {
                "connect_args": {"check_same_thread": False, "timeout": _BUSY_SLICE_S}
            }
            if memory:
                kwargs["poolclass"] = StaticPool
            self._engine = create_engine(parsed, **kwargs)
            _install_sqlite_hooks(self._engine, memory)
        else:
            self._engine = create_engine(parsed, pool_pre_ping=True)
        try:
            with self._begin() as conn:
                old = upgrade(conn)
        except OperationalError as exc:
            self._engine.dispose()
            if exc.statement is not None and not _is_corrupt(exc):  # a statement failed
                raise
            reason = " ".join(str(exc.orig).split())
            raise StoreError(
                f"cannot open the store at {self.url}: {reason}; check that the "
                "database server is running and the URL (user, host, port, database) is right"
            ) from None
        except DatabaseError as exc:
            self._engine.dispose()
            if not _is_corrupt(exc):
                raise
            raise self._corrupt(exc) from None
        except BaseException:
            self._engine.dispose()
            raise
        self._opened = True
        log.debug("opened store %s (schema was version %d)", self.url, old)

    # Transactions ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _begin(self) -> Iterator[Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite); commits on exit, else rolls back."""
        with self._lock:
            conn, trans = self._start(read_only=False)
            with self._named_errors(), conn, trans:
                yield conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
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
                conn = self._engine.connect()
                if read_only:
                    conn.execution_options(**{_READ_ONLY: True})
                return conn, conn.begin()
            except OperationalError as exc:
                if conn is not None:
                    conn.close()
                # A server that went away mid-run (a restart) is waited for; one that cannot
                # be reached when the store is opened is a bad URL, reported at once.
                if self._opened and self.dialect != "sqlite" and exc.statement is None:
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
                raise self._corrupt(exc) from None

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
            raise self._corrupt(exc) from None

    def _corrupt(self, exc: DatabaseError) -> StoreError:
        reason = " ".join(str(exc.orig).split())
        return StoreError(
            f"the store {self.url} is damaged or not a store database ({reason}): restore "
            "it from a backup, or recover what can be read with "
            "`sqlite3 DB .recover | sqlite3 recovered.db` and pass --db with the copy; "
            "or move the file away to start afresh"
        )

    # Runs --------------------------------------------------------------------------------
    @staticmethod
    def _run_info(row: Row[Any]) -> RunInfo:
        return RunInfo(
            run_id=int(row.id),
            name=str(row.name),
            seed=int(row.seed),
            created_at=_as_utc(row.created_at),
            config=json.loads(row.config_json),
            catalog_fingerprint=str(row.catalog_fingerprint),
            families=tuple(json.loads(row.families_json)),
        )

    def open_run(
        self,
        name: str,
        *,
        seed: int,
        config: Mapping[str, Any],
        catalog: Catalog,
        resume: bool = False,
    ) -> RunInfo:
        """Create the run ``name``, or with ``resume=True`` return the existing one."""
        if not isinstance(name, str) or not name.strip():
            raise StoreError(f"run name: must be a non-empty string, got {name!r}")
        try:
            config_json = json.dumps(dict(config), sort_keys=True, allow_nan=True)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"run {name!r}: config must be JSON-serialisable ({exc})") from None
        fingerprint = catalog.fingerprint
        try:
            with self._begin() as conn:
                row = conn.execute(select(RUNS_T).where(RUNS_T.c.name == name)).one_or_none()
                if row is not None:
                    info = self._run_info(row)
                    if not resume:
                        raise StoreError(
                            f"run {name!r} already exists (id {info.run_id}, created "
                            f"{info.created_at:%Y-%m-%d %H:%M}Z): pass resume=True (--resume) "
                            "to continue it, or choose another run name"
                        )
                    if info.catalog_fingerprint != fingerprint:
                        raise StoreError(
                            f"run {name!r} was recorded with a different catalog (fingerprint "
                            f"{info.catalog_fingerprint[:12]}, now {fingerprint[:12]}): the "
                            "families, tiers or quotas changed; start a new run name"
                        )
                    self._families[info.run_id] = len(info.families)
                    return info
                if resume:
                    raise StoreError(
                        f"run {name!r} not found in {self.url}, so it cannot be resumed: "
                        "drop resume (--resume) to start it, or pick one of: "
                        + (", ".join(self._run_names(conn)) or "(no runs yet)")
                    )
                created = _utcnow()
                run_id = conn.execute(
                    insert(RUNS_T)
                    .values(
                        name=name,
                        seed=int(seed),
                        created_at=created,
                        config_json=config_json,
                        catalog_fingerprint=fingerprint,
                        families_json=json.dumps(list(catalog.family_names)),
                    )
                    .returning(RUNS_T.c.id)
                ).scalar_one()
        except IntegrityError:
            raise StoreError(
                f"run {name!r} was created by another process at the same time: "
                "open it with resume=True"
            ) from None
        self._families[int(run_id)] = catalog.n_families
        return RunInfo(
            run_id=int(run_id),
            name=name,
            seed=int(seed),
            created_at=_as_utc(created),
            config=json.loads(config_json),
            catalog_fingerprint=fingerprint,
            families=tuple(catalog.family_names),
        )

    @staticmethod
    def _run_names(conn: Connection) -> list[str]:
        return [str(n) for n in conn.execute(select(RUNS_T.c.name).order_by(RUNS_T.c.id))]

    def get_run(self, name: str) -> RunInfo | None:
        with self._read() as conn:
            row = conn.execute(select(RUNS_T).where(RUNS_T.c.name == name)).one_or_none()
        return None if row is None else self._run_info(row)

    def runs(self) -> list[RunInfo]:
        with self._read() as conn:
            rows = conn.execute(select(RUNS_T).order_by(RUNS_T.c.id)).all()
        return [self._run_info(r) for r in rows]

    def _n_families(self, run_id: int) -> int:
        n = self._families.get(run_id)
        if n is None:
            with self._read() as conn:
                text = conn.execute(
                    select(RUNS_T.c.families_json).where(RUNS_T.c.id == run_id)
                ).scalar_one_or_none()
            if text is None:
                raise StoreError(f"run id {run_id}: no such run in {self.url}; see runs()")
            n = self._families[run_id] = len(json.loads(text))
        return n

    def _check_families(self, run_id: int, field: str, family: IntArray) -> None:
        n = self._n_families(run_id)
        bad = (family < 0) | (family >= n)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise StoreError(
                f"{field}.family[{i}]: {int(family[i])} is not a family id of run {run_id} "
                f"(0..{n - 1})"
            )

    # Writing -----------------------------------------------------------------------------
    def write(
        self,
        run_id: int,
        *,
        probe_points: ProbePoints | None = None,
        events: Sequence[Event] = (),
        weights: WeightsArg | None = None,
        outcomes: OutcomeRows | None = None,
        checkpoint: tuple[int, bytes] | None = None,
    ) -> None:
        """Write one step's rows and checkpoint in ONE transaction: all visible, or none.

        ``weights`` is ``(step, array)``, or a list of them when several buffered steps are
        committed together (see StepWriter).
        """
        run_id = int(run_id)
        # Validate and encode before taking the write lock: the lock is held only for SQL.
        probe_rows = self._probe_rows(run_id, probe_points) if probe_points is not None else ()
        outcome_rows = self._outcome_rows(run_id, outcomes) if outcomes is not None else []
        event_rows = self._event_rows(run_id, events)
        weight_rows = [self._weight_row(run_id, st, w) for st, w in _weight_pairs(weights)]
        ckpt = self._checkpoint_row(run_id, *checkpoint) if checkpoint is not None else None
        if not (probe_rows or outcome_rows or event_rows or weight_rows or ckpt):
            self._n_families(run_id)  # still reject an unknown run
            return
        with self._begin() as conn:
            if probe_rows:
                self._insert_probes(conn, probe_rows)
            if outcome_rows:
                conn.execute(insert(OUTCOMES_T), outcome_rows)
            if event_rows:
                conn.execute(insert(EVENTS_T), event_rows)
            if weight_rows:
                self._insert_weights(conn, weight_rows)
            if ckpt is not None:
                self._insert_checkpoint(conn, ckpt)

    def _probe_rows(self, run_id: int, points: ProbePoints) -> _ProbeRows:
        if not isinstance(points, ProbePoints):
            raise StoreError(f"probe_points: expected ProbePoints, got {type(points).__name__}")
        self._check_families(run_id, "probe_points", points.family)
        n = len(points)
        columns = {c: getattr(points, c).tolist() for c in PROBE_COLUMNS}
        columns["run_id"] = [run_id] * n
        columns["probe_version"] = [points.probe_version] * n
        return _ProbeRows(columns, n)

    def _insert_probes(self, conn: Connection, rows: _ProbeRows) -> None:
        """The hot insert (a probe round of every family per step). On SQLite the Core
        ``insert(PROBES_T)`` is compiled once and executed by the driver with tuples: the
        per-row parameter processing of a dict executemany cost 5 us a row, more than the
        write itself. Other dialects take the dicts through Core."""
        if self.dialect == "sqlite":
            if self._probe_insert is None:
                compiled = insert(PROBES_T).compile(
                    dialect=conn.dialect, column_keys=list(rows.columns)
                )
                self._probe_insert = (str(compiled), tuple(compiled.positiontup or ()))
            sql, order = self._probe_insert
            params = list(zip(*(rows.columns[k] for k in order), strict=True))
            conn.exec_driver_sql(sql, params)
        else:
            keys = list(rows.columns)
            values = list(zip(*rows.columns.values(), strict=True))
            conn.execute(insert(PROBES_T), [dict(zip(keys, v, strict=True)) for v in values])

    def _check_outcomes(self, run_id: int, rows: OutcomeRows) -> None:
        if not isinstance(rows, OutcomeRows):
            raise StoreError(f"outcomes: expected OutcomeRows, got {type(rows).__name__}")
        self._check_families(run_id, "outcomes", rows.family)

    def _outcome_rows(self, run_id: int, rows: OutcomeRows) -> list[dict[str, Any]]:
        self._check_outcomes(run_id, rows)
        return [{"run_id": run_id, **chunk} for chunk in _codec.encode(rows)]

    def _event_rows(self, run_id: int, events: Sequence[Event]) -> list[dict[str, Any]]:
        out = []
        for i, ev in enumerate(events):
            if not isinstance(ev, Event):
                raise StoreError(f"events[{i}]: expected scheduler.Event, got {type(ev).__name__}")
            try:
                payload = json.dumps(ev.payload, sort_keys=True, allow_nan=True)
            except (TypeError, ValueError) as exc:
                raise StoreError(
                    f"events[{i}].payload ({ev.kind} at step {ev.step}): must be "
                    f"JSON-serialisable ({exc})"
                ) from None
            out.append(
                {
                    "run_id": run_id,
                    "step": int(ev.step),
                    "kind": str(ev.kind),
                    "family": ev.family,
                    "domain": ev.domain,
                    "payload_json": payload,
                }
            )
        if out:
            self._n_families(run_id)
        return out

    def _weight_row(self, run_id: int, step: int, weights: FloatArray) -> dict[str, Any]:
        arr = np.asarray(weights)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.number):
            raise StoreError(
                f"weights at step {step}: must be a 1-D numeric array, got shape {arr.shape} "
                f"dtype {arr.dtype}"
            )
        self._n_families(run_id)
        data = np.ascontiguousarray(arr, dtype=_WEIGHT_DTYPE).tobytes()
        return {"run_id": run_id, "step": int(step), "size": int(arr.shape[0]), "data": data}

    def _checkpoint_row(self, run_id: int, step: int, state: bytes) -> dict[str, Any]:
        if not isinstance(state, bytes | bytearray | memoryview):
            raise StoreError(
                f"checkpoint at step {step}: state must be bytes from dumps_state(), "
                f"got {type(state).__name__}"
            )
        self._n_families(run_id)
        return {"run_id": run_id, "step": int(step), "created_at": _utcnow(), "state": bytes(state)}

    def _insert_weights(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        # One row per step: a rewrite of a step (after a resume) replaces it.
        t = WEIGHTS_T
        steps = sorted({r["step"] for r in rows})
        conn.execute(delete(t).where((t.c.run_id == rows[0]["run_id"]) & t.c.step.in_(steps)))
        last = {r["step"]: r for r in rows}  # the last array given for a step wins
        conn.execute(insert(t), list(last.values()))

    def _insert_checkpoint(self, conn: Connection, row: dict[str, Any]) -> None:
        run_id, t = row["run_id"], CHECKPOINTS_T
        conn.execute(delete(t).where((t.c.run_id == run_id) & (t.c.step == row["step"])))
        conn.execute(insert(t), [row])
        # Keep only the newest few: a checkpoint is a full state_dict.
        cutoff = conn.execute(
            select(t.c.step)
            .where(t.c.run_id == run_id)
            .order_by(t.c.step.desc())
            .offset(self.keep_checkpoints - 1)
            .limit(1)
        ).scalar_one_or_none()
        if cutoff is not None:
            conn.execute(delete(t).where((t.c.run_id == run_id) & (t.c.step < cutoff)))

    def add_probe_points(self, run_id: int, points: ProbePoints) -> None:
        self.write(run_id, probe_points=points)

    def add_events(self, run_id: int, events: Sequence[Event]) -> None:
        self.write(run_id, events=events)

    def add_weights(self, run_id: int, step: int, weights: FloatArray) -> None:
        self.write(run_id, weights=(step, weights))

    def add_outcomes(self, run_id: int, rows: OutcomeRows) -> None:
        self.write(run_id, outcomes=rows)

    def save_checkpoint(self, run_id: int, step: int, state: bytes) -> None:
        self.write(run_id, checkpoint=(step, state))

    def truncate_after(self, run_id: int, step: int) -> None:
        """Delete every row and checkpoint after ``step``: a resume from that step's
        checkpoint then rewrites the steps after it without duplicates."""
        with self._begin() as conn:
            for t in (PROBES_T, OUTCOMES_T, EVENTS_T, WEIGHTS_T, CHECKPOINTS_T):
                conn.execute(delete(t).where((t.c.run_id == run_id) & (t.c.step > step)))

    # Reading -----------------------------------------------------------------------------
    @staticmethod
    def _probe_points(rows: Sequence[Row[Any]]) -> ProbePoints:
        cols = _columns(rows, len(PROBE_COLUMNS) + 1)
        versions = sorted({str(v) for v in cols[-1]})
        arrays: dict[str, Any] = {
            name: (_float_column(col) if name in _FLOAT_PROBE else _int_column(col))
            for name, col in zip(PROBE_COLUMNS, cols, strict=False)
        }
        return ProbePoints(**arrays, probe_version=",".join(versions))

    def probe_curve(self, run_id: int, family: int, tier: int | None = None) -> ProbePoints:
        """The points of one family (one tier, or all tiers), ordered by step."""
        t = PROBES_T
        where = (t.c.run_id == run_id) & (t.c.family == int(family))
        if tier is not None:
            where &= t.c.tier == int(tier)
        stmt = select(*_PROBE_SELECT).where(where).order_by(t.c.step, t.c.tier, t.c.id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return self._probe_points(rows)

    def probe_points(self, run_id: int, since_step: int | None = None) -> ProbePoints:
        """Every family's points (step >= since_step), ordered by step, family, tier."""
        t = PROBES_T
        where = t.c.run_id == run_id
        if since_step is not None:
            where &= t.c.step >= int(since_step)
        stmt = select(*_PROBE_SELECT).where(where).order_by(t.c.step, t.c.family, t.c.tier, t.c.id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return self._probe_points(rows)

    def events(
        self,
        run_id: int,
        *,
        kind: str | None = None,
        family: str | None = None,
        since_step: int | None = None,
    ) -> list[Event]:
        """Events in the order they were written within each step, filtered."""
        t = EVENTS_T
        where = t.c.run_id == run_id
        if kind is not None:
            where &= t.c.kind == kind
        if family is not None:
            where &= t.c.family == family
        if since_step is not None:
            where &= t.c.step >= int(since_step)
        stmt = (
            select(t.c.step, t.c.kind, t.c.family, t.c.domain, t.c.payload_json)
            .where(where)
            .order_by(t.c.step, t.c.id)
        )
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [
            Event(step=int(s), kind=k, family=f, domain=d, payload=json.loads(p))
            for s, k, f, d, p in rows
        ]

    def weights(self, run_id: int) -> tuple[IntArray, FloatArray]:
        """Steps ``[k]`` and weights ``[k, n]``, ordered by step."""
        t = WEIGHTS_T
        stmt = select(t.c.step, t.c.size, t.c.data).where(t.c.run_id == run_id).order_by(t.c.step)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        if not rows:
            return np.zeros(0, np.int64), np.zeros((0, 0), np.float64)
        sizes = {int(r.size) for r in rows}
        if len(sizes) != 1:
            raise StoreError(
                f"run {run_id}: weight rows have different lengths {sorted(sizes)}; read them "
                "per step, or start a new run when the catalog changes"
            )
        steps = _int_column([r.step for r in rows])
        flat = np.frombuffer(b"".join(bytes(r.data) for r in rows), dtype=_WEIGHT_DTYPE)
        return steps, flat.astype(np.float64).reshape(len(rows), sizes.pop())

    def replay_set(
        self,
        run_id: int,
        *,
        statuses: Sequence[Status | int] = DEFAULT_REPLAY_STATUSES,
        families: Sequence[int] | None = None,
        since_step: int | None = None,
        limit: int | None = None,
    ) -> OutcomeRows:
        """Outcomes with one of ``statuses`` (failed by default), newest first, to re-sample."""
        try:
            codes = [int(Status.parse(s)) for s in statuses]
        except (KeyError, ValueError):
            names = ", ".join(s.name.lower() for s in Status)
            raise StoreError(f"replay_set statuses: {list(statuses)!r}; use {names}") from None
        if limit is not None and limit < 0:
            raise StoreError(f"replay_set limit: must be >= 0, got {limit}")
        if limit == 0:
            return OutcomeRows.empty()
        t = OUTCOMES_T
        bits = sum(1 << c for c in set(codes))
        where = (t.c.run_id == run_id) & (t.c.status_mask.op("&")(bits) != 0)
        if since_step is not None:
            where &= t.c.step >= int(since_step)
        stmt = select(*_CHUNK_SELECT).where(where).order_by(t.c.step.desc(), t.c.id.desc())
        fams = None if families is None else np.asarray(families, dtype=np.int64)
        found: list[OutcomeRows] = []
        total = 0
        with self._read() as conn:
            result = conn.execute(stmt)
            # Decode a page of chunks at a time and stop once ``limit`` rows are found.
            while limit is None or total < limit:
                page = result.fetchmany(256)
                if not page:
                    break
                rows = _codec.decode(page)
                mask = np.isin(rows.status, codes)
                if fams is not None:
                    mask &= np.isin(rows.family, fams)
                # Newest first: reverse the rows within each chunk (chunks already are).
                keep = _newest_first(page, mask)
                found.append(rows.take(keep))
                total += len(keep)
        out = OutcomeRows.concat(found)
        return out if limit is None else out.take(np.arange(min(limit, len(out))))

    def outcomes(self, run_id: int, since_step: int | None = None) -> OutcomeRows:
        """Every outcome row (step >= since_step) in the order written."""
        t = OUTCOMES_T
        where = t.c.run_id == run_id
        if since_step is not None:
            where &= t.c.step >= int(since_step)
        with self._read() as conn:
            chunks = conn.execute(select(*_CHUNK_SELECT).where(where).order_by(t.c.id)).all()
        return _codec.decode(chunks)

    def freeze_regression_set(self, run_id: int, name: str, rows: OutcomeRows) -> None:
        """Record ``rows`` under ``name`` once; a frozen set never changes."""
        self._check_outcomes(run_id, rows)
        data, uris_json = _codec.encode_flat(rows)
        values = {"run_id": run_id, "name": name, "created_at": _utcnow(), "size": len(rows)}
        try:
            with self._begin() as conn:
                conn.execute(insert(REGSETS_T), [{**values, "data": data, "uris_json": uris_json}])
        except IntegrityError:
            raise StoreError(
                f"regression set {name!r} of run {run_id} is already frozen; frozen sets never "
                "change: pick a new name"
            ) from None

    def regression_set(self, run_id: int, name: str) -> OutcomeRows:
        s = REGSETS_T
        with self._read() as conn:
            row = conn.execute(
                select(s.c.data, s.c.uris_json).where((s.c.run_id == run_id) & (s.c.name == name))
            ).one_or_none()
            if row is None:
                names = conn.execute(
                    select(s.c.name).where(s.c.run_id == run_id).order_by(s.c.id)
                ).scalars()
                raise StoreError(
                    f"regression set {name!r} of run {run_id} not found; frozen sets: "
                    + (", ".join(names) or "(none)")
                )
        return _codec.decode_flat(bytes(row.data), row.uris_json)

    def regression_sets(self, run_id: int) -> list[str]:
        s = REGSETS_T
        with self._read() as conn:
            names = conn.execute(select(s.c.name).where(s.c.run_id == run_id).order_by(s.c.id))
            return [str(n) for n in names.scalars()]

    def checkpoint_steps(self, run_id: int) -> list[int]:
        """The steps of a run's checkpoints, newest first."""
        t = CHECKPOINTS_T
        with self._read() as conn:
            rows = conn.execute(
                select(t.c.step).where(t.c.run_id == run_id).order_by(t.c.step.desc())
            ).scalars()
            return [int(s) for s in rows]

    def checkpoint(self, run_id: int, step: int) -> bytes | None:
        """The state saved at ``step``, or None if there is no checkpoint at that step."""
        t = CHECKPOINTS_T
        with self._read() as conn:
            row = conn.execute(
                select(t.c.state).where((t.c.run_id == run_id) & (t.c.step == step))
            ).one_or_none()
        return None if row is None else bytes(row.state)

    def latest_checkpoint(self, run_id: int) -> tuple[int, bytes] | None:
        t = CHECKPOINTS_T
        stmt = (
            select(t.c.step, t.c.state)
            .where(t.c.run_id == run_id)
            .order_by(t.c.step.desc())
            .limit(1)
        )
        with self._read() as conn:
            row = conn.execute(stmt).one_or_none()
        return None if row is None else (int(row.step), bytes(row.state))

    def counts(self, run_id: int) -> dict[str, int]:
        """Rows per table for one run (for reports and tests)."""
        tables = {"probe_points": PROBES_T, "events": EVENTS_T, "weights": WEIGHTS_T}
        tables |= {"checkpoints": CHECKPOINTS_T}
        o = OUTCOMES_T
        with self._read() as conn:
            counts = {
                name: int(
                    conn.execute(
                        select(func.count()).select_from(t).where(t.c.run_id == run_id)
                    ).scalar_one()
                )
                for name, t in tables.items()
            }
            n_out = conn.execute(
                select(func.coalesce(func.sum(o.c.size), 0)).where(o.c.run_id == run_id)
            ).scalar_one()
        return {**counts, "outcomes": int(n_out)}

    # Housekeeping ------------------------------------------------------------------------
    def schema_version(self) -> int:
        with self._read() as conn:
            return current_version(conn)

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` ("ok" when sound); "ok" on PostgreSQL."""
        if self.dialect != "sqlite":
            return "ok"
        try:
            with self._read() as conn:
                rows = conn.exec_driver_sql("PRAGMA integrity_check")
                return "\n".join(str(r[0]) for r in rows)
        except StoreError as exc:  # so damaged that the check itself cannot run
            return str(exc)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r})"


_FLOAT_PROBE = frozenset({"wall_time", "score", "ci_low", "ci_high"})
_PROBE_SELECT = (*(PROBES_T.c[c] for c in PROBE_COLUMNS), PROBES_T.c.probe_version)
_CHUNK_SELECT = (OUTCOMES_T.c.step, OUTCOMES_T.c.size, OUTCOMES_T.c.data, OUTCOMES_T.c.uris_json)


def _newest_first(chunks: Sequence[Any], mask: npt.NDArray[np.bool_]) -> IntArray:
    """Positions of the masked rows, each chunk's rows reversed (rows are concatenated
    chunk by chunk in ``chunks`` order)."""
    sizes = np.fromiter((c.size for c in chunks), dtype=np.int64, count=len(chunks))
    ends = np.cumsum(sizes)
    starts = ends - sizes
    pos = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64)
    chunk = np.repeat(np.arange(len(sizes)), sizes)
    mirrored = starts[chunk] + (ends[chunk] - 1 - pos)  # row i of a chunk -> row size-1-i
    return mirrored[mask[mirrored]]


def _is_corrupt(exc: DatabaseError) -> bool:
    text = str(exc.orig).lower()
    return any(word in text for word in _CORRUPT)


def open_store(
    url: str = DEFAULT_URL,
    *,
    keep_checkpoints: int = 3,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> SqlStore:
    """Open (creating or upgrading the schema) the store at ``url``.

    ``sqlite:///path.db`` (``sqlite:///`` alone means ``curriculum.db``), ``sqlite://`` in
    memory, or ``postgresql+psycopg://user@host:5432/db``. Only the newest
    ``keep_checkpoints`` checkpoints of a run are kept. A write that finds SQLite locked
    by another process, or a PostgreSQL server that cannot be reached (a restart), waits
    (saying so in the log) up to ``lock_timeout_s``, then raises StoreError.
    """
    return SqlStore(url, keep_checkpoints=keep_checkpoints, lock_timeout_s=lock_timeout_s)
