"""bench/_common.py set_constants: a try's module constant set from the command line; a
wrong name, module or type is refused by name and nothing is set."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from _common import set_constants  # noqa: E402

import policies._skill as skill  # noqa: E402


@pytest.fixture
def kept() -> Iterator[None]:
    before = (skill._SLOPE_INFO_MIN, skill._STALL_BELOW)
    yield
    skill._SLOPE_INFO_MIN, skill._STALL_BELOW = before


@pytest.mark.usefixtures("kept")
def test_constants_are_set_with_their_own_type() -> None:
    done = set_constants(["policies._skill:_SLOPE_INFO_MIN=0.3", "policies._skill:_STALL_BELOW=2"])
    assert skill._SLOPE_INFO_MIN == 0.3
    assert skill._STALL_BELOW == 2.0 and isinstance(skill._STALL_BELOW, float)
    assert done == {"policies._skill:_SLOPE_INFO_MIN": 0.3, "policies._skill:_STALL_BELOW": 2.0}


@pytest.mark.usefixtures("kept")
@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("policies._skill:_NO_SUCH=1", "has no constant '_NO_SUCH'"),
        ("policies._nowhere:_X=1", "no module 'policies._nowhere'"),
        ("policies._skill:_SLOPE_INFO_MIN='a'", "is a float, got a str"),
        ("policies._skill:_SLOPE_INFO_MIN=a b", "is not a Python literal"),
        ("_SLOPE_INFO_MIN=0.3", "expected MODULE:NAME=VALUE"),
    ],
)
def test_a_bad_assignment_is_named_and_nothing_is_set(bad: str, says: str) -> None:
    before = skill._SLOPE_INFO_MIN
    with pytest.raises(ValueError, match=says):
        set_constants(["policies._skill:_SLOPE_INFO_MIN=0.3", bad])
    assert before == skill._SLOPE_INFO_MIN


def test_the_quality_bench_refuses_a_bad_constant_with_exit_code_2() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "quality.py"),
            "--set-constant",
            "policies._skill:_X=1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--set-constant 'policies._skill:_X=1'" in done.stderr
    assert "Traceback" not in done.stderr
