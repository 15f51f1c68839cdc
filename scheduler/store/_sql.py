"""The SQL store: SQLite (embedded default) and PostgreSQL (psycopg 3) behind one class.

Writes are SQLAlchemy Core ``insert(table)`` executemany over lists of row dicts built from
the numpy columns; reads are Core selects turned column-wise into numpy arrays. On SQLite the
connection runs in WAL mode with ``synchronous=NORMAL`` and a busy timeout, and every write
transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock up front, so a
read-then-write transaction waits for another writer instead of failing with "database is
locked" when it tries to upgrade its read lock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    Connection,
    delete,
    func,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError

from domains import Catalog

from .._batch import Status
from .._events import Event
from . import _codec
from ._engine import Database
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
from ._rows import (
    WEIGHT_DTYPE,
    ProbeRows,
    as_utc,
    checkpoint_row,
    event_rows,
    int_column,
    probe_points_of,
    probe_rows,
    run_info,
    utcnow,
    weight_pairs,
    weight_row,
)

log = logging.getLogger(__name__)

DEFAULT_URL = "sqlite:///curriculum.db"
DEFAULT_LOCK_TIMEOUT_S = 60.0


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
        self._db = Database(url, lock_timeout_s)
        self.url, self.dialect = self._db.url, self._db.dialect
        self.keep_checkpoints = keep_checkpoints
        self.lock_timeout_s = lock_timeout_s
        self._engine = self._db.engine  # what the migration tests inspect
        self._begin = self._db.begin  # a write transaction (BEGIN IMMEDIATE on SQLite)
        self._read = self._db.read  # a read transaction: one snapshot, no write lock
        self._families: dict[int, int] = {}  # run_id -> number of families, for validation
        self._probe_insert: tuple[str, tuple[str, ...]] | None = None  # SQLite fast path
        old = self._db.open(upgrade)
        log.debug("opened store %s (schema was version %d)", self.url, old)

    # Runs --------------------------------------------------------------------------------
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
                    info = run_info(row)
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
                created = utcnow()
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
            created_at=as_utc(created),
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
        return None if row is None else run_info(row)

    def runs(self) -> list[RunInfo]:
        with self._read() as conn:
            rows = conn.execute(select(RUNS_T).order_by(RUNS_T.c.id)).all()
        return [run_info(r) for r in rows]

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
        probes = None
        if probe_points is not None:
            probes = probe_rows(run_id, probe_points)
            self._check_families(run_id, "probe_points", probe_points.family)
        outcome_rows = self._outcome_rows(run_id, outcomes) if outcomes is not None else []
        events_rows = event_rows(run_id, events)
        weight_rows = [weight_row(run_id, st, w) for st, w in weight_pairs(weights)]
        ckpt = checkpoint_row(run_id, *checkpoint) if checkpoint is not None else None
        if events_rows or weight_rows or ckpt is not None:
            self._n_families(run_id)  # the run exists
        if not (probes or outcome_rows or events_rows or weight_rows or ckpt):
            self._n_families(run_id)  # still reject an unknown run
            return
        with self._begin() as conn:
            if probes:
                self._insert_probes(conn, probes)
            if outcome_rows:
                conn.execute(insert(OUTCOMES_T), outcome_rows)
            if events_rows:
                conn.execute(insert(EVENTS_T), events_rows)
            if weight_rows:
                self._insert_weights(conn, weight_rows)
            if ckpt is not None:
                self._insert_checkpoint(conn, ckpt)

    def _insert_probes(self, conn: Connection, rows: ProbeRows) -> None:
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
    def probe_curve(self, run_id: int, family: int, tier: int | None = None) -> ProbePoints:
        """The points of one family (one tier, or all tiers), ordered by step."""
        t = PROBES_T
        where = (t.c.run_id == run_id) & (t.c.family == int(family))
        if tier is not None:
            where &= t.c.tier == int(tier)
        stmt = select(*_PROBE_SELECT).where(where).order_by(t.c.step, t.c.tier, t.c.id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return probe_points_of(rows)

    def probe_points(self, run_id: int, since_step: int | None = None) -> ProbePoints:
        """Every family's points (step >= since_step), ordered by step, family, tier."""
        t = PROBES_T
        where = t.c.run_id == run_id
        if since_step is not None:
            where &= t.c.step >= int(since_step)
        stmt = select(*_PROBE_SELECT).where(where).order_by(t.c.step, t.c.family, t.c.tier, t.c.id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return probe_points_of(rows)

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
        steps = int_column([r.step for r in rows])
        flat = np.frombuffer(b"".join(bytes(r.data) for r in rows), dtype=WEIGHT_DTYPE)
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
        values = {"run_id": run_id, "name": name, "created_at": utcnow(), "size": len(rows)}
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
        self._db.dispose()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r})"


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
