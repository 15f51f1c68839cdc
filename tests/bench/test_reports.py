"""bench/targets.py, bench/compare.py and bench/ablation.py: the issue's targets, the change
between two runs and the ablation table, read off saved cells; a file or a seed that does
not fit is one line and exit code 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import ablation  # noqa: E402
import compare  # noqa: E402
import targets  # noqa: E402
from _cells import load_cells, split_runner  # noqa: E402


def _cell(regime: str, runner: str, seed: int, **values: float) -> dict[str, Any]:
    base = {"final": 0.9, "auc": 0.4, "p10": 0.9, "waste": 0.04, "hack2": 0.0}
    base.update(values)
    return {
        "regime": regime,
        "runner": runner,
        "seed": seed,
        "all_tiers": 0.5,
        "seconds": 0.1,
        **base,
    }


def _write(path: Path, cells: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(cells))
    return path


def _grid(seeds: tuple[int, ...] = (0, 1)) -> list[dict[str, Any]]:
    cells = []
    for s in seeds:
        # ext: ours wins on final and area, misses the issue's own bars on final and area
        cells += [
            _cell("ext", "ours", s, final=0.91, auc=0.43, p10=0.90, waste=0.04),
            _cell("ext", "ladder_probe", s, final=0.81, auc=0.35, waste=0.15),
            _cell("ext", "oracle", s, final=0.97, auc=0.49, waste=0.0),
        ]
        # skill_1tier: ours loses final to a Syllabus curriculum by 0.005; waste over 5 %
        cells += [
            _cell("skill_1tier", "ours", s, final=0.986, auc=0.93, waste=0.11),
            _cell("skill_1tier", "ladder_probe", s, final=0.980, auc=0.92, waste=0.30),
            _cell(
                "skill_1tier", "syllabus:LearningProgress", s, final=0.991, auc=0.91, waste=0.109
            ),
        ]
        # skill_none: no probe, so the waste bar is the least simple baseline's (0.087)
        cells += [
            _cell("skill_none", "ours", s, waste=0.06),
            _cell("skill_none", "fixed", s, final=0.8, auc=0.3, waste=0.087),
        ]
        # skill_hack: hackable families; hack2 2 % misses the 1 % bar
        cells += [
            _cell("skill_hack", "ours", s, hack2=0.02),
            _cell("skill_hack", "ladder_probe", s, final=0.8, auc=0.3, waste=0.18, hack2=0.06),
        ]
    return cells


def test_targets_tally_each_target_by_its_own_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "grid.json", _grid())
    assert targets.main([str(path)]) == 0  # a report: missed targets are not an error
    out = capsys.readouterr().out
    assert "final at least the best simple baseline's: **3 of 4** (dev 3 / 4)" in out
    assert "missed: skill_1tier 0.9860 / 0.9910 (syllabus:LearningProgress)" in out
    # skill_none's 6 % meets its no-probe bar (under fixed's 8.7 %); skill_1tier's 11 % does not
    assert "waste at most 5 % (no probe: at most the least simple baseline's): **3 of 4**" in out
    assert "missed: skill_1tier 11.0 %" in out
    assert "waste at most the least simple baseline's: **3 of 4**" in out
    assert "skill_1tier 11.0 % / 10.9 % (syllabus:LearningProgress)" in out
    assert (
        "hack2 at most 1 % (hackable regimes): **0 of 1** (dev 0 / 1); missed: skill_hack 2.0 %"
        in out
    )
    assert "ext: final at least 0.93: **0 of 1** (dev 0 / 1); missed: 0.910 / 0.93" in out
    assert "ext: p10 at least 0.85: **1 of 1**" in out
    assert "ext: waste at most 5 %: **1 of 1**" in out
    # the oracle is shown, never counted as a baseline to beat
    assert "| ext | dev | 0.910 | 0.810 (ladder_probe) |" in out
    assert targets.main([str(path), "--strict"]) == 1


def test_targets_strict_passes_where_every_target_is_met(tmp_path: Path) -> None:
    cells = [_cell("skill_top", "ours", s, final=0.93, auc=0.34, waste=0.04) for s in (0, 1)] + [
        _cell("skill_top", "ladder_probe", s, final=0.84, auc=0.28, waste=0.14) for s in (0, 1)
    ]
    assert targets.main([str(_write(tmp_path / "ok.json", cells)), "--strict"]) == 0


def test_targets_later_files_replace_cells_and_variants_are_not_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _write(tmp_path / "a.json", _grid())
    better = [_cell("skill_1tier", "ours", s, final=0.995, auc=0.95, waste=0.04) for s in (0, 1)]
    # a variant of the default that beats everything must not become the bar
    better += [_cell("skill_1tier", "ours-x", s, final=0.999, auc=0.99) for s in (0, 1)]
    second = _write(tmp_path / "b.json", better)
    assert targets.main([str(first), str(second)]) == 0
    out = capsys.readouterr().out
    assert "final at least the best simple baseline's: **4 of 4**" in out


def test_targets_a_baseline_without_the_defaults_seeds_is_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = [c for c in _grid((0, 1)) if not (c["runner"] == "fixed" and c["seed"] == 1)]
    assert targets.main([str(_write(tmp_path / "g.json", cells))]) == 2
    err = capsys.readouterr().err
    assert "skill_none: fixed has no cell for seed 1 (it has [0])" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('{"a": 1}', "expected a list of cells"),
        ('[{"regime": "ext", "runner": "ours", "seed": 0}]', "cell 0: no field 'final'"),
        (
            '[{"regime": "ext", "runner": "ours", "seed": 0, "final": "high", "auc": 0,'
            ' "p10": 0, "waste": 0, "hack2": 0}]',
            "cell 0: final must be a number, got 'high'",
        ),
    ],
)
def test_a_bad_cells_file_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert targets.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err
    assert len(err.strip().splitlines()) == 1


def test_targets_unknown_runner_is_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "g.json", _grid())
    assert targets.main([str(path), "--ours", "ours-nope"]) == 2
    assert "--ours ours-nope: no such runner" in capsys.readouterr().err


def test_compare_reads_the_change_over_shared_seeds_and_flags_a_fall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _write(tmp_path / "a.json", _grid((0, 1, 2)))
    after_cells = _grid((0, 1))  # seed 2 only in the first run: left out
    for c in after_cells:
        if c["runner"] == "ours" and c["regime"] == "ext":
            c["final"] -= 0.01
            c["waste"] += 0.002
    after = _write(tmp_path / "b.json", after_cells)
    assert compare.main([str(before), str(after)]) == 0
    out = capsys.readouterr().out
    assert "| ext | dev | 2 | -0.0100 | +0.0000 | +0.0000 | +0.20 | +0.00 |" in out
    assert "| skill_1tier | dev | 2 | +0.0000 |" in out
    assert "| **mean, dev** |  | 4 | -0.0025 |" in out
    assert "final lower by 0.005 or more: ext -0.0100 (s.e. 0.0000; 2 of 2 seeds lower)" in out


def test_compare_pairs_a_fall_by_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fall one seed makes reads as one: its standard error paired by seed, and the
    seeds that fell counted."""
    before = _write(tmp_path / "a.json", _grid((0, 1, 2)))
    after_cells = _grid((0, 1, 2))
    for c in after_cells:
        if c["runner"] == "ours" and c["regime"] == "ext":
            c["final"] += {0: -0.03, 1: 0.0, 2: 0.006}[c["seed"]]
    after = _write(tmp_path / "b.json", after_cells)
    assert compare.main([str(before), str(after)]) == 0
    out = capsys.readouterr().out
    # changes -0.03, 0, +0.006: mean -0.008, sample sd 0.0193, s.e. 0.0111
    assert "final lower by 0.005 or more: ext -0.0080 (s.e. 0.0111; 1 of 3 seeds lower)" in out
    one = _write(tmp_path / "c.json", [c for c in after_cells if c["seed"] == 0])
    assert compare.main([str(before), str(one)]) == 0
    assert "ext -0.0300 (s.e. nan; 1 of 1 seeds lower)" in capsys.readouterr().out


def test_compare_reads_two_runners_of_one_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "g.json", _grid())
    assert compare.main([f"{path}:ours", f"{path}:ladder_probe", "--worse", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "| ext | dev | 2 | -0.1000 | -0.0800 |" in out
    assert "final lower by 0.5 or more: none" in out
    assert compare.main([f"{path}:ours", f"{path}:nobody"]) == 2
    assert "no runner 'nobody'" in capsys.readouterr().err
    assert compare.main([str(path), str(path), "--worse", "-1"]) == 2


def test_a_side_without_a_runner_reads_the_default(tmp_path: Path) -> None:
    assert split_runner("runs/a.json") == (Path("runs/a.json"), None)
    assert split_runner("runs/a.json:ours-no_hack") == (Path("runs/a.json"), "ours-no_hack")
    cells = load_cells([_write(tmp_path / "g.json", _grid((0,)))])
    assert len(cells) == 10  # ext 3, skill_1tier 3, skill_none 2, skill_hack 2


def _ablation_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cells: list[dict[str, Any]], *args: str
) -> list[str]:
    """bench/ablation.py's rows (one per ``ours-no_*`` runner) for these cells."""
    path = _write(tmp_path / "ablate.json", cells)
    assert ablation.main([str(path), *args]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("| no_")]


def test_ablation_reads_each_switch_against_the_default_by_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = []
    for s in (0, 1):
        cells += [
            _cell("ext", "ours", s, final=0.90, auc=0.43, waste=0.04),  # dev
            _cell("ext", "ours-no_a", s, final=0.88, auc=0.42, waste=0.05),
            _cell("ext", "ours-no_b", s, final=0.90, auc=0.43, waste=0.04),
            _cell("skill_drift", "ours", s, final=0.92, auc=0.34, waste=0.044),  # held
            _cell("skill_drift", "ours-no_a", s, final=0.93, auc=0.34, waste=0.057),
            _cell("skill_drift", "ours-no_b", s, final=0.92, auc=0.34, waste=0.044),
        ]
    rows = _ablation_rows(tmp_path, capsys, cells)
    assert rows[0].split(" | ") == [
        "| no_a", "-0.020", "-0.010", "+1.00", "+0.010", "+0.000", "+1.30", "1/0 of 1; 0/1 of 1 |"
    ]  # fmt: skip
    assert rows[1].endswith("| 0/0 of 1; 0/0 of 1 |")  # pays nowhere: a candidate to go


def test_ablation_bars_name_what_each_row_fails_and_the_candidates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = {  # runner: ext final (dev), skill_drift final and waste (held), ladder_hack hack2
        "ours": (0.90, 0.92, 0.044, 0.010),
        "ours-no_flat": (0.9005, 0.9195, 0.045, 0.012),
        # one regime 0.006 lower: the held-out mean of its two regimes fails too
        "ours-no_one": (0.90, 0.914, 0.044, 0.010),
        "ours-no_hackcap": (0.90, 0.92, 0.044, 0.025),
    }
    cells = [
        cell
        for s in (0, 1)
        for runner, (ext, drift, waste, hack2) in values.items()
        for cell in (
            _cell("ext", runner, s, final=ext, auc=0.43, waste=0.04),
            _cell("skill_drift", runner, s, final=drift, auc=0.34, waste=waste),
            _cell("ladder_hack", runner, s, hack2=hack2),  # held out, hackable
        )
    ]
    verdicts = {
        line.split(" | ")[0].removeprefix("| "): line.split(" | ")[-1].removesuffix(" |")
        for line in _ablation_rows(tmp_path, capsys, cells, "--bars")
    }
    # within every bar (a mean fall of 0.00025 and 0.05 points of waste): a candidate
    assert verdicts["no_flat"] == "none: a candidate"
    assert verdicts["no_one"] == "held final -0.0030; skill_drift final -0.0060"
    assert verdicts["no_hackcap"] == "hack2 +1.50"
    assert {"skill_hack", "skill_hack_fast", "ladder_hack", "group_hack"} == ablation.HACKABLE
    with_bars = _ablation_rows(tmp_path, capsys, cells, "--bars")
    without = _ablation_rows(tmp_path, capsys, cells)  # no verdict column
    assert [len(r.split(" | ")) for r in without] == [len(r.split(" | ")) - 1 for r in with_bars]


def test_ablation_without_the_default_or_its_ablations_is_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _write(tmp_path / "plain.json", [_cell("ext", "ours", 0)])
    assert ablation.main([str(plain)]) == 2
    assert "no ablation runners" in capsys.readouterr().err
    orphan = _write(tmp_path / "orphan.json", [_cell("ext", "ours-no_a", 0)])
    assert ablation.main([str(orphan)]) == 2
    assert "no runner 'ours'" in capsys.readouterr().err
