"""bench/quality.py's ablation: every entry builds a scheduler that differs from the
default, ``without`` takes one switch or a list of them, and an unknown one is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from quality import ABLATIONS, SWITCHES, scheduler_for  # noqa: E402

from domains import Catalog  # noqa: E402

CATALOG = Catalog.synthetic(n_domains=2, families_per_domain=3, n_tiers=3)


def _settings(sched: Any) -> dict[str, object]:
    """The default's switchable parts: the skill model's and the weights pipeline's plain
    attributes, the config, the policy, and the flag board's patched methods."""
    skill = vars(sched.skill)
    pipeline = vars(sched.pipeline)
    plain = (bool, int, float, str)
    return {
        **{f"skill.{k}": v for k, v in skill.items() if isinstance(v, plain)},
        **{f"pipeline.{k}": v for k, v in pipeline.items() if isinstance(v, plain)},
        "config": sched.config,
        "patched": sorted(vars(sched.flags)),
        "policy": type(sched.policy).__name__,
    }


@pytest.mark.parametrize("name", sorted(ABLATIONS))
def test_every_ablation_changes_the_default(name: str) -> None:
    default = _settings(scheduler_for(CATALOG, 0, {}))
    assert _settings(scheduler_for(CATALOG, 0, ABLATIONS[name])) != default


def test_without_takes_a_list_and_applies_every_switch() -> None:
    both = _settings(scheduler_for(CATALOG, 0, {"without": ["shift_residue", "match_moments"]}))
    assert both["skill._shift_residue"] is False and both["skill._match"] is False
    one = _settings(scheduler_for(CATALOG, 0, {"without": "shift_residue"}))
    assert one["skill._shift_residue"] is False and one["skill._match"] is True


def test_an_unknown_switch_is_refused() -> None:
    with pytest.raises(SystemExit, match="unknown mechanism to switch off: 'nope'"):
        scheduler_for(CATALOG, 0, {"without": ["shift_residue", "nope"]})
    assert "nope" not in SWITCHES


def _quality(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "quality.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_ablate_runs_only_the_rows_asked_for(tmp_path: Path) -> None:
    out = tmp_path / "abl.json"
    done = _quality(
        "--regimes", "skill_1tier", "--seeds", "0", "--runners", "ours", "--jobs", "1",
        "--ablate", "no_hack", "--out", str(out), tmp_path=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted({c["runner"] for c in json.loads(out.read_text())}) == ["ours", "ours-no_hack"]


def test_ablate_refuses_an_unknown_row_with_exit_code_2(tmp_path: Path) -> None:
    done = _quality("--ablate", "no_hack,no_such_row", tmp_path=tmp_path)
    assert done.returncode == 2
    assert "--ablate: unknown row 'no_such_row'" in done.stderr
    assert "Traceback" not in done.stderr
