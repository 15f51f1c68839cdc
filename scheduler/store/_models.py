"""The schema, as sqlmodel table models. Rows are written and read through their Core tables.

Table names carry a ``cs_`` prefix so the store can share a PostgreSQL database with other
tools (MLflow has its own ``runs`` table). Floats are double precision; NaN reads back as NaN
(SQLite stores it as NULL, which the reader turns back into NaN).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, LargeBinary, Table, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

# SQLite only autoincrements a column declared exactly INTEGER PRIMARY KEY.
_ID = BigInteger().with_variant(Integer(), "sqlite")


class SchemaVersionRow(SQLModel, table=True):
    """One row: the schema version the database is at (see _migrations)."""

    __tablename__ = "cs_schema_version"

    id: int = Field(default=1, primary_key=True)
    version: int
    updated_at: datetime


class RunRow(SQLModel, table=True):
    __tablename__ = "cs_runs"

    id: int | None = Field(default=None, primary_key=True, sa_type=_ID)
    name: str = Field(unique=True, sa_type=Text)
    seed: int = Field(sa_type=BigInteger)
    created_at: datetime
    config_json: str = Field(sa_type=Text)
    catalog_fingerprint: str = Field(sa_type=Text)
    families_json: str = Field(sa_type=Text)


class ProbePointRow(SQLModel, table=True):
    __tablename__ = "cs_probe_points"
    __table_args__ = (
        Index("ix_cs_probe_curve", "run_id", "family", "tier", "step"),
        Index("ix_cs_probe_step", "run_id", "step"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=_ID)
    run_id: int = Field(foreign_key="cs_runs.id", sa_type=BigInteger)
    family: int
    tier: int
    step: int = Field(sa_type=BigInteger)
    wall_time: float | None
    score: float | None
    n: int
    ci_low: float | None
    ci_high: float | None
    probe_version: str = Field(default="", sa_type=Text)


class EventRow(SQLModel, table=True):
    __tablename__ = "cs_events"
    __table_args__ = (
        Index("ix_cs_events_step", "run_id", "step"),
        Index("ix_cs_events_kind", "run_id", "kind", "step"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=_ID)
    run_id: int = Field(foreign_key="cs_runs.id", sa_type=BigInteger)
    step: int = Field(sa_type=BigInteger)
    kind: str = Field(sa_type=Text)
    family: str | None = Field(default=None, sa_type=Text)
    domain: str | None = Field(default=None, sa_type=Text)
    payload_json: str = Field(sa_type=Text)


class WeightRow(SQLModel, table=True):
    """One row per step: the weights array as little-endian float64 bytes."""

    __tablename__ = "cs_weights"

    run_id: int = Field(foreign_key="cs_runs.id", primary_key=True, sa_type=BigInteger)
    step: int = Field(primary_key=True, sa_type=BigInteger)
    size: int
    data: bytes = Field(sa_type=LargeBinary)


class OutcomeChunkRow(SQLModel, table=True):
    """The outcome index: one row per (write, step), the rows encoded (see _codec)."""

    __tablename__ = "cs_outcomes"
    __table_args__ = (Index("ix_cs_outcomes_step", "run_id", "step"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=_ID)
    run_id: int = Field(foreign_key="cs_runs.id", sa_type=BigInteger)
    step: int = Field(sa_type=BigInteger)
    size: int  # outcomes in the chunk
    status_mask: int  # bit s set when some outcome has Status s: replay queries skip the rest
    data: bytes = Field(sa_type=LargeBinary)
    uris_json: str | None = Field(default=None, sa_type=Text)  # JSON list, or NULL if none


class RegressionSetRow(SQLModel, table=True):
    """A frozen regression set: its outcome rows, encoded in their order (see _codec)."""

    __tablename__ = "cs_regression_sets"
    __table_args__ = (UniqueConstraint("run_id", "name", name="uq_cs_regression_set"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=_ID)
    run_id: int = Field(foreign_key="cs_runs.id", sa_type=BigInteger)
    name: str = Field(sa_type=Text)
    created_at: datetime
    size: int
    data: bytes = Field(sa_type=LargeBinary)
    uris_json: str | None = Field(default=None, sa_type=Text)


class CheckpointRow(SQLModel, table=True):
    """A full scheduler state_dict (bytes from scheduler._serialize.dumps_state)."""

    __tablename__ = "cs_checkpoints"

    run_id: int = Field(foreign_key="cs_runs.id", primary_key=True, sa_type=BigInteger)
    step: int = Field(primary_key=True, sa_type=BigInteger)
    created_at: datetime
    state: bytes = Field(sa_type=LargeBinary)


def _table(model: type[SQLModel]) -> Table:
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


SCHEMA_VERSION_T = _table(SchemaVersionRow)
RUNS_T = _table(RunRow)
PROBES_T = _table(ProbePointRow)
EVENTS_T = _table(EventRow)
WEIGHTS_T = _table(WeightRow)
OUTCOMES_T = _table(OutcomeChunkRow)
REGSETS_T = _table(RegressionSetRow)
CHECKPOINTS_T = _table(CheckpointRow)

# In dependency order (parents first): creation order, and reverse for deletion.
ALL_TABLES: tuple[Table, ...] = (
    SCHEMA_VERSION_T,
    RUNS_T,
    PROBES_T,
    EVENTS_T,
    WEIGHTS_T,
    OUTCOMES_T,
    REGSETS_T,
    CHECKPOINTS_T,
)
