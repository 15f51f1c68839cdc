"""The `curriculum` command end to end, in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {}), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_validate_example_manifests() -> None:
    result = run("validate", "configs/domains")
    assert result.returncode == 0, result.stderr
    assert "domains" in result.stdout and "arms" in result.stdout
    assert "quotas feasible" in result.stdout


def test_validate_reports_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "domains:\n"
        "  - name: coding\n"
        "    quota: {min_share: 1.4}\n"
        "    families:\n"
        "      - task_family: terminal_coding\n"
        "        environment: sandbox\n"
        "        verification: tests\n"
        "        variants: [{goal: x}]\n"
    )
    result = run("validate", str(bad))
    assert result.returncode == 2
    assert f"{bad}:3:" in result.stderr
    assert "domains[0].quota.min_share" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_notes_a_probe_set_too_small_to_judge(tmp_path: Path) -> None:
    """A valid manifest loads (exit 0), but a one-item probe set gets a note with its
    file:line and field; three items get none."""
    thin = tmp_path / "thin.yaml"
    thin.write_text(
        "domains:\n"
        "  - name: coding\n"
        "    families:\n"
        "      - name: upgrade\n"
        "        environment: sandbox\n"
        "        verification: ci\n"
        "        variants: [{pkg: a}, {pkg: b}]\n"
        "        probe: {items: [{pkg: c}]}\n"
        "      - name: repair\n"
        "        environment: sandbox\n"
        "        verification: tests\n"
        "        variants: [{bug: a}]\n"
        "        probe: {size: 3}\n"
    )
    result = run("validate", str(thin))
    assert result.returncode == 0, result.stderr
    assert f"note: {thin}:8:" in result.stderr
    assert "domains[0].families[0].probe: probe set of 1 item" in result.stderr
    assert "families[1]" not in result.stderr and "1 note(s)" in result.stderr


def test_schema_is_json() -> None:
    result = run("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert "domains" in json.dumps(schema)


def test_simulate_smoke(tmp_path: Path) -> None:
    result = run(
        "simulate",
        "--steps",
        "20",
        "--no-progress",
        "--db",
        f"sqlite:///{tmp_path}/c.db",
        "--tracking-uri",
        f"sqlite:///{tmp_path}/m.db",
    )
    assert result.returncode == 0, result.stderr
    assert "mean held-out score" in result.stdout
    assert "uniform" in result.stdout and "learning_progress" in result.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["simulate", "--steps", "abc"], "invalid int value"),
        (["simulate", "--steps", "0", "--no-progress"], "steps"),
        (["simulate", "--policy", "nope", "--steps", "2", "--no-progress"], "unknown policy"),
        (["simulate", "--config", "missing.yaml"], "no such config file"),
        (["frobnicate"], "invalid choice"),
        (["simulate", "--db", "foo://x", "--steps", "2", "--no-progress"], "unsupported database"),
        (["report", "--db", "sqlite:///nowhere/at/all/x.db"], "cannot open the store"),
    ],
)
def test_bad_input_exits_2_without_traceback(args: list[str], needle: str) -> None:
    result = run(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_config_file_names_file_and_field(tmp_path: Path) -> None:
    config = tmp_path / "s.yaml"
    config.write_text("steps: 10\nbatch_size: -3\n")
    result = run("simulate", "--config", str(config), "--no-progress")
    assert result.returncode == 2
    assert str(config) in result.stderr and "batch_size" in result.stderr


def test_simulate_goes_on_without_mlflow(tmp_path: Path) -> None:
    """A tracking server that is down costs the run its MLflow log, not its store record."""
    result = run(
        "simulate",
        "--steps",
        "5",
        "--no-progress",
        "--no-baseline",
        "--db",
        f"sqlite:///{tmp_path}/c.db",
        "--tracking-uri",
        "http://127.0.0.1:9",
    )
    assert result.returncode == 0, result.stderr
    assert "continuing without tracking" in result.stderr
    assert "stored in" in result.stdout
