"""The `curriculum` command end to end, in a subprocess, as a user runs it."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def run(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {}), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.app.cli", *args],
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


@pytest.mark.parametrize(
    ("args", "env", "blamed"),
    [
        (["--steps", "-5"], {}, "--steps -5: steps:"),
        ([], {"CURRICULUM_TIERS__MASTERED_AT": "2"}, "CURRICULUM_TIERS__MASTERED_AT='2': tiers:"),
        ([], {"CURRICULUM_STEPS": "abc"}, "CURRICULUM_STEPS='abc': steps:"),
    ],
)
def test_simulate_blames_the_source_that_gave_the_bad_value(
    args: list[str], env: dict[str, str], blamed: str, tmp_path: Path
) -> None:
    result = run("simulate", "--no-progress", "--db", f"sqlite:///{tmp_path}/c.db", *args,
                 env=env)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"error: {blamed}" in result.stderr
    assert "scheduler.yaml" not in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "c.db").exists()  # nothing is created before the checks pass


def test_a_misspelt_flag_prints_the_subcommands_usage() -> None:
    result = run("simulate", "--stepz", "10")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: curriculum simulate")
    assert "unrecognized arguments: --stepz 10" in result.stderr


def test_help_lists_the_policies_and_explains_every_flag() -> None:
    from policies import available_policies
    from scheduler.app.cli import build_parser

    result = run("simulate", "--help")
    assert result.returncode == 0
    for name in available_policies():
        assert name in result.stdout
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{command} {action.option_strings or action.dest}"
        for command, p in sub.choices.items()
        for action in p._actions
        if not action.help
    ]
    assert not missing, missing


def test_show_settings_prints_the_effective_values() -> None:
    result = run("simulate", "--show-settings", "--steps", "7",
                 env={"CURRICULUM_TIERS__MASTERED_AT": "0.8"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["steps"] == 7 and shown["tiers"]["mastered_at"] == 0.8


def test_report_on_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    result = run("report", "--db", f"sqlite:///{tmp_path}/nothing-here.db")
    assert result.returncode == 2
    assert "no SQLite file at" in result.stderr and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_report_prints_evidence_at_a_readable_precision(tmp_path: Path) -> None:
    done = run("simulate", "--steps", "60", "--no-progress", "--no-baseline", "--no-tracking",
               "--db", f"sqlite:///{tmp_path}/c.db", "--run-name", "r")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = run("report", "--db", f"sqlite:///{tmp_path}/c.db", "r", "--events", "200")
    assert result.returncode == 0, result.stderr
    numbers = re.findall(r"\d+\.\d+", result.stdout.split("last ", 1)[1])
    assert numbers, result.stdout
    assert all(len(n.split(".")[1]) <= 3 for n in numbers), numbers
    # the families the skill model holds back are listed, with the reason
    attention = result.stdout.split("need attention", 1)[1].split("last ", 1)[0]
    assert re.search(r"idle\s.*reason=(out_of_reach|flat|stalled)", attention), attention


def test_report_rounds_numbers_inside_lists_and_mappings() -> None:
    from scheduler.app._report import _short

    assert _short([0.751234567, 0.86412345]) == "[0.751, 0.864]"  # a confidence interval
    assert _short({"low": 0.0231234, "n": 32}) == "{low: 0.023, n: 32}"
    assert _short(0.000012345) == "1.23e-05" and _short(0.0) == "0.000"


def test_simulate_shows_the_fixed_mix_says_what_each_column_is_and_where_time_went(
    tmp_path: Path,
) -> None:
    result = run("simulate", "--steps", "30", "--no-progress", "--no-tracking",
                 "--db", f"sqlite:///{tmp_path}/c.db")  # fmt: skip
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if "metric" in line)
    assert "learning_progress" in header and "uniform" in header and "fixed mix" in header
    assert "fixed mix: every task (family x tier) equally likely, no scheduler" in result.stdout
    assert "uniform: the scheduler with its default machinery and the uniform policy" in (
        result.stdout
    )
    assert "learning_progress: the same scheduler with the learning_progress policy" in (
        result.stdout
    )
    timing = re.search(
        r"time: simulating ([\d.]+) s, store ([\d.]+) s, MLflow queue ([\d.]+) s, .*"
        r"MLflow drain ([\d.]+) s, .*; ([\d.]+) s in all",
        result.stdout,
    )
    assert timing, result.stdout
    parts = [float(x) for x in timing.groups()]
    assert parts[0] > 0 and sum(parts[:4]) <= parts[4]


def test_an_error_is_one_line_when_piped_at_80_columns(tmp_path: Path) -> None:
    """A message that names its source is never split across lines (file:line, a URL)."""
    env = {**os.environ, "COLUMNS": "80", "CURRICULUM_TIERS__MASTERED_AT": "2"}
    args = ["simulate", "--no-progress", "--db", f"sqlite:///{tmp_path}/c.db"]
    result = subprocess.run(
        [sys.executable, "-m", "scheduler.app.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert len(line) > 80 and line.startswith("error: CURRICULUM_TIERS__MASTERED_AT='2': tiers:")
