"""No password reaches a terminal, a log record, an exception message or a store.

`curriculum simulate` runs with passwords in its store URL (PostgreSQL, trust auth, so
the password is carried but not needed) and in its tracking URI (a live `mlflow server`,
then one that is down). Every output stream, every log record and every store is then
searched for each password.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from scheduler.app._main_job import mlflow_line
from scheduler.app.cli import main
from scheduler.tracking import free_port, mask_secrets, mask_url, start_ui_server

PG = "127.0.0.1:5432/test"
MANIFEST = """
version: 1
domains:
  - name: d
    families:
      - {name: f1, environment: e, verification: v, tiers: 2, variants: {count: 20}}
      - {name: f2, environment: e, verification: v, variants: {count: 20}}
"""


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://postgres:PW-one@127.0.0.1:5432/test",
        "http://alice:PW-one@127.0.0.1:5000/",
        "https://alice:PW@one@mlflow.example.com/x",  # an unencoded '@'
        "http://alice:PW/one@mlflow.example.com/x",  # an unencoded '/'
        "postgresql://u@h/db?password=PW-one",
        "https://u:PW%2Fone@h/p?token=PW-one#frag",
    ],
)
def test_mask_url_hides_every_form_of_password(url: str) -> None:
    shown = mask_url(url)
    assert "PW" not in shown and "***" in shown
    assert "PW" not in mask_secrets(f"error: could not reach {url!r}: refused")


def test_the_mlflow_line_and_its_ui_hint_mask_the_password() -> None:
    line = mlflow_line("abc", "postgresql://mlf:PW-ui@127.0.0.1:5432/mlflow")
    assert "PW-ui" not in line
    assert "curriculum ui --tracking-uri postgresql://mlf:***@127.0.0.1:5432/mlflow" in line


def _pg_user() -> str:
    for user in ("postgres", "root"):
        try:
            with psycopg.connect(f"postgresql://{user}@{PG}", connect_timeout=3):
                return user
        except psycopg.Error:
            continue
    pytest.skip(f"PostgreSQL not reachable at {PG}")


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    user = _pg_user()
    schema = f"cs_secret_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"postgresql://{user}@{PG}", autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
    yield user, schema
    with psycopg.connect(f"postgresql://{user}@{PG}", autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")  # type: ignore[arg-type]


def _pg_dump(user: str, schema: str) -> str:
    """Every value of every table in the schema, as text."""
    out = []
    with psycopg.connect(f"postgresql://{user}@{PG}") as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            for row in conn.execute(f'SELECT * FROM {schema}."{table}"'):  # type: ignore[arg-type]
                out.append(repr(row))
    return "\n".join(out)


def _run(
    argv: list[str], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> tuple[int, str]:
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        code = main(argv)
    captured = capsys.readouterr()
    records = "\n".join(
        r.getMessage() + (f"\n{r.exc_text}" if r.exc_text else "") for r in caplog.records
    )
    return code, "\n".join([captured.out, captured.err, records])


@pytest.mark.slow
@pytest.mark.mlflow_server
def test_simulate_shows_no_password_on_any_stream_log_or_store(
    tmp_path: Path,
    pg_schema: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    (tmp_path / "m.yaml").write_text(MANIFEST)
    user, schema = pg_schema
    db = f"postgresql+psycopg://{user}:PW-store@{PG}?options=-csearch_path%3D{schema}"
    backend_file = tmp_path / "server.db"
    MlflowClient(tracking_uri=f"sqlite:///{backend_file}").search_experiments()
    try:
        server = start_ui_server(f"sqlite:///{backend_file}", port=free_port(), wait_s=90)
    except Exception as exc:
        pytest.skip(f"mlflow server could not start here: {exc}")
    live = server.url.replace("http://", "http://bob:PW-live@")
    common = ["simulate", "--steps", "20", "--no-progress", "--domains", str(tmp_path / "m.yaml")]
    try:
        code, seen = _run([*common, "--db", db, "--tracking-uri", live], capsys, caplog)
    finally:
        server.stop()
    assert code == 0, seen
    assert "stored in postgresql+psycopg://" in seen and ":***@" in seen
    assert "MLflow run " in seen
    down = f"http://carol:PW-down@127.0.0.1:{free_port()}/"
    code, seen_down = _run([*common, "--no-store", "--tracking-uri", down], capsys, caplog)
    assert code == 0, seen_down
    assert "MLflow unavailable" in seen_down
    bad = "postgresql+psycopg2://dave:PW-bad@127.0.0.1:1/x"
    code, seen_bad = _run(["report", "--db", bad], capsys, caplog)
    assert code == 2 and "dave:***@" in seen_bad
    stores = _pg_dump(user, schema) + backend_file.read_bytes().decode("latin-1")
    for secret in ("PW-store", "PW-live", "PW-down", "PW-bad"):
        for text in (seen, seen_down, seen_bad, stores):
            assert secret not in text
