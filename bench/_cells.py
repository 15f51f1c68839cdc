"""Saved quality cells (``bench/quality.py --out``): loading, merging, and means per regime.

The reports (``bench/targets.py``, ``bench/compare.py``) read what a run saved instead of
running the grid again: the baselines of one run (an hour with Syllabus) beside the default
of another tree (a minute or two).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import BenchError

METRICS = ("final", "auc", "p10", "waste", "hack2")


@dataclass(frozen=True)
class CellKey:
    regime: str
    runner: str
    seed: int


Cells = dict[CellKey, dict[str, float]]


def load_cells(paths: Sequence[Path]) -> Cells:
    """The cells of these files, merged in order: a later file's cell replaces an earlier
    one of the same regime, runner and seed. A file that is not a saved run is a
    ``BenchError`` naming it (and the cell, where one is malformed)."""
    cells: Cells = {}
    for path in paths:
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise BenchError(f"{path}: cannot read it ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise BenchError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(data, list):
            raise BenchError(f"{path}: expected a list of cells (bench/quality.py --out)")
        for index, raw in enumerate(data):
            key, values = _cell(raw, f"{path}: cell {index}")
            cells[key] = values
    return cells


def _cell(raw: Any, where: str) -> tuple[CellKey, dict[str, float]]:
    if not isinstance(raw, dict):
        raise BenchError(f"{where}: expected an object, got {type(raw).__name__}")
    for name in ("regime", "runner", "seed", *METRICS):
        if name not in raw:
            raise BenchError(f"{where}: no field {name!r}")
    if not isinstance(raw["seed"], int) or isinstance(raw["seed"], bool):
        raise BenchError(f"{where}: seed must be an integer, got {raw['seed']!r}")
    values: dict[str, float] = {}
    for name in METRICS:
        value = raw[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BenchError(f"{where}: {name} must be a number, got {value!r}")
        values[name] = float(value)
    return CellKey(str(raw["regime"]), str(raw["runner"]), raw["seed"]), values


def runners_of(cells: Cells) -> list[str]:
    """The runners present, in first-seen order."""
    return list(dict.fromkeys(k.runner for k in cells))


def seeds_of(cells: Cells, regime: str, runner: str) -> list[int]:
    return sorted(k.seed for k in cells if k.regime == regime and k.runner == runner)


def mean_over(cells: Cells, regime: str, runner: str, seeds: Iterable[int]) -> dict[str, float]:
    """Each metric's mean over these seeds; a seed the runner lacks is a ``BenchError``
    (a mean over other seeds would compare unlike things)."""
    seeds = list(seeds)
    rows = []
    for seed in seeds:
        key = CellKey(regime, runner, seed)
        if key not in cells:
            raise BenchError(
                f"{regime}: {runner} has no cell for seed {seed} "
                f"(it has {seeds_of(cells, regime, runner) or 'none'})"
            )
        rows.append(cells[key])
    return {m: sum(r[m] for r in rows) / len(rows) for m in METRICS}


def split_runner(spec: str) -> tuple[Path, str | None]:
    """``runs/a.json:ours-x`` -> (path, runner); no runner after the colon -> None."""
    path, sep, runner = spec.rpartition(":")
    if not sep or "/" in runner or runner.endswith(".json"):
        return Path(spec), None
    return Path(path), runner or None
