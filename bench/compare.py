"""The change between two runs of the quality grid, regime by regime, over shared seeds.

    .venv/bin/python bench/compare.py runs/before.json runs/after.json
    .venv/bin/python bench/compare.py runs/ablate.json:ours runs/ablate.json:ours-no_hack
    .venv/bin/python bench/compare.py runs/a.json runs/b.json --worse 0.005

Each side is a file of saved cells (``bench/quality.py --out``) and a runner after a colon
(default ``ours``). Per regime the mean of B less A over the seeds both hold, for final,
area, p10, waste and hack2; then the mean change over the regimes of each split, and the
regimes whose final fell by ``--worse`` or more, each with the standard error of its change
paired by seed and how many seeds fell. Every decision to keep or drop a change
to the default reads these figures: one command instead of a script per session.
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from _cells import (
    METRICS,
    CellKey,
    Cells,
    load_cells,
    mean_over,
    runners_of,
    seeds_of,
    split_runner,
)
from _common import BenchError, markdown_table, run_main
from quality import GRID

log = logging.getLogger("bench.compare")


@dataclass(frozen=True)
class Side:
    cells: Cells
    runner: str
    label: str


def side(spec: str) -> Side:
    path, runner = split_runner(spec)
    cells = load_cells([path])
    runner = runner or "ours"
    if runner not in runners_of(cells):
        raise BenchError(f"{spec}: no runner {runner!r}; the file holds {runners_of(cells)}")
    return Side(cells, runner, spec)


def changes(a: Side, b: Side) -> list[Change]:
    """(regime, split, seeds shared, B less A per metric) for each grid regime both hold."""
    out = []
    for regime in GRID:
        seeds = sorted(
            set(seeds_of(a.cells, regime.name, a.runner))
            & set(seeds_of(b.cells, regime.name, b.runner))
        )
        if not seeds:
            continue
        before = mean_over(a.cells, regime.name, a.runner, seeds)
        after = mean_over(b.cells, regime.name, b.runner, seeds)
        delta = {m: after[m] - before[m] for m in METRICS}
        out.append(
            Change(regime.name, regime.split, len(seeds), delta, paired(a, b, regime.name, seeds))
        )
    if not out:
        raise BenchError(f"{a.label} and {b.label} share no regime and seed")
    return out


@dataclass(frozen=True)
class Paired:
    """The change in final seed by seed: its standard error and how many seeds fell."""

    se: float  # of the mean change (nan under two seeds)
    lower: int  # seeds whose final is lower in B


def paired(a: Side, b: Side, regime: str, seeds: Sequence[int]) -> Paired:
    """Final, B less A, paired by seed: a fall that one seed makes reads as such. Under a
    grader wrong a tenth of the time a regime's final moves by 0.02-0.14 between seeds,
    more than a bar of 0.005 on three (docs/benchmarks.md, "A suspect slope")."""
    diffs = [
        b.cells[CellKey(regime, b.runner, s)]["final"]
        - a.cells[CellKey(regime, a.runner, s)]["final"]
        for s in seeds
    ]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
    return Paired(se, sum(d < 0 for d in diffs))


class Change(NamedTuple):
    """One regime's change from A to B."""

    regime: str
    split: str
    seeds: int  # seeds both sides hold
    delta: dict[str, float]  # each metric's mean, B less A
    paired: Paired  # the change in final seed by seed


def split_mean(rows: Sequence[Change], split: str) -> dict[str, float] | None:
    """Each metric's change averaged over the regimes of ``split`` ("all": every regime);
    None where the split has none."""
    group = [r.delta for r in rows if split in ("all", r.split)]
    if not group:
        return None
    return {m: sum(d[m] for d in group) / len(group) for m in METRICS}


def render(rows: Sequence[Change], worse: float) -> str:
    def fmt(metric: str, value: float) -> str:
        # waste and hack2 in points of a percent, the rest as scores
        return f"{100 * value:+.2f}" if metric in ("waste", "hack2") else f"{value:+.4f}"

    header = ["regime", "split", "seeds", *[f"Δ {m}" for m in METRICS]]
    table = [
        [r.regime, r.split, str(r.seeds), *[fmt(m, r.delta[m]) for m in METRICS]] for r in rows
    ]
    for split in ("dev", "held", "all"):
        means = split_mean(rows, split)
        if means is not None and not (split == "all" and len({r.split for r in rows}) == 1):
            count = sum(split in ("all", r.split) for r in rows)
            table.append(
                [f"**mean, {split}**", "", str(count), *[fmt(m, means[m]) for m in METRICS]]
            )
    lines = [markdown_table(header, table), "", "waste and hack2 in points of a percent"]
    fell = [
        f"{r.regime} {r.delta['final']:+.4f} (s.e. {r.paired.se:.4f};"
        f" {r.paired.lower} of {r.seeds} seeds lower)"
        for r in rows
        if r.delta["final"] <= -worse
    ]
    lines.append(f"final lower by {worse} or more: {', '.join(fell) if fell else 'none'}")
    return "\n".join(lines)


def _main(args: argparse.Namespace) -> int:
    if not args.worse >= 0:
        raise BenchError(f"--worse: must be at least 0, got {args.worse}")
    print(render(changes(side(args.before), side(args.after)), args.worse))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("before", help="FILE[:RUNNER], the runner default ours")
    parser.add_argument("after", help="FILE[:RUNNER]")
    parser.add_argument("--worse", type=float, default=0.005, help="flag a final this much lower")
    parser.add_argument("-v", "--verbose", action="store_true")
    return run_main(_main, parser.parse_args(argv), log)


if __name__ == "__main__":
    sys.exit(main())
