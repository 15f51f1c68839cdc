"""The ablation table of a saved run: the default with each mechanism switched off.

    .venv/bin/python -W ignore bench/quality.py --split all --seeds 1000,1001,1002 \\
        --runners ours --ablate --jobs 2 --out runs/ablate.json
    .venv/bin/python bench/ablation.py runs/ablate.json

One row per ``ours-<ablation>`` runner of the file (``bench/quality.py --ablate``): the
mean change against ``ours`` over each split's regimes, on final, area and waste, and how
many regimes' final fell or rose by ``--moved`` or more (worse / better). A row whose
change is worse nowhere names a mechanism that does not pay on the grid: it goes, or
another learner must show why it stays.

``--bars`` adds the removal rule's verdict (``Bars``, the bars every ablation since the one
on seeds 3300-3302 wrote down before its run): the bars each row fails, or none, where the
mechanism is a candidate to go (the torch learner and the main job's learner still to be
heard).

    .venv/bin/python bench/ablation.py runs/ablate.json --bars
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _cells import load_cells, runners_of
from _common import BenchError, markdown_table, run_main
from compare import Change, Side, changes, split_mean
from quality import GRID

log = logging.getLogger("bench.ablation")

SPLITS = ("dev", "held")
# (metric, scale, format) of each split's columns: waste in points of a percent
_COLUMNS = (("final", 1.0, "+.3f"), ("auc", 1.0, "+.3f"), ("waste", 100.0, "+.2f"))
# the regimes with hackable families, whose hack2 the rule reads
HACKABLE = frozenset(r.name for r in GRID if r.hackable)
_SHOWN = 4  # failed bars named per row; the rest are counted


@dataclass(frozen=True)
class Bars:
    """How far a mechanism's removal may move the grid and still be a candidate to go. A
    mean bar alone let a mechanism that holds one regime up go (three seeds read the
    drifting evaluator's residue rule harmless; six showed `skill_drift` 0.015 lower)."""

    mean: float = 0.001  # each half's mean final and mean area may fall by this much
    mean_waste: float = 0.002  # each half's mean waste may rise by this (0.20 points)
    regime: float = 0.005  # no regime's final or area may fall by this much or more
    regime_waste: float = 0.01  # no regime's waste may rise by this (a point) or more
    hack2: float = 0.005  # the hackable regimes' mean hack2 may rise by this


def failed(delta: Sequence[Change], bars: Bars) -> list[str]:
    """The bars a removal's changes (``delta``, one per regime) fail, each named with its
    figure; empty where it is a candidate to go."""
    out = []
    for split in SPLITS:
        means = split_mean(delta, split)
        if means is None:
            continue
        out += [f"{split} {m} {means[m]:+.4f}" for m in ("final", "auc") if means[m] < -bars.mean]
        if means["waste"] > bars.mean_waste:
            out.append(f"{split} waste {100 * means['waste']:+.2f}")
    for r in delta:
        out += [
            f"{r.regime} {m} {r.delta[m]:+.4f}"
            for m in ("final", "auc")
            if r.delta[m] <= -bars.regime
        ]
        if r.delta["waste"] >= bars.regime_waste:
            out.append(f"{r.regime} waste {100 * r.delta['waste']:+.2f}")
    hacks = [r.delta["hack2"] for r in delta if r.regime in HACKABLE]
    hack2 = sum(hacks) / len(hacks) if hacks else 0.0
    if hack2 > bars.hack2:
        out.append(f"hack2 {100 * hack2:+.2f}")
    return out


def verdict(delta: Sequence[Change], bars: Bars) -> str:
    """The column ``--bars`` adds: the failed bars (waste and hack2 in points), or that
    the row is a candidate."""
    fails = failed(delta, bars)
    if not fails:
        return "none: a candidate"
    more = len(fails) - _SHOWN
    return "; ".join(fails[:_SHOWN]) + (f"; {more} more" if more > 0 else "")


def rows(path: str, moved: float, bars: Bars | None = None) -> list[list[str]]:
    """The table's rows, one per ablation of the file, in the file's order."""
    cells = load_cells([Path(path)])
    names = [r for r in runners_of(cells) if r.startswith("ours-")]
    if "ours" not in runners_of(cells):
        raise BenchError(f"{path}: no runner 'ours' to set the ablations against")
    if not names:
        raise BenchError(f"{path}: no ablation runners (ours-...): run bench/quality.py --ablate")
    out = []
    for name in names:
        delta = changes(Side(cells, "ours", f"{path}:ours"), Side(cells, name, f"{path}:{name}"))
        row = [name.removeprefix("ours-")]
        counts = []
        for split in SPLITS:
            means = split_mean(delta, split)
            for metric, scale, fmt in _COLUMNS:
                row.append(format(scale * means[metric], fmt) if means else "nan")
            group = [r.delta for r in delta if r.split == split]
            worse = sum(d["final"] <= -moved for d in group)
            better = sum(d["final"] >= moved for d in group)
            counts.append(f"{worse}/{better} of {len(group)}")
        out.append([*row, "; ".join(counts), *([verdict(delta, bars)] if bars else [])])
    return out


def _main(args: argparse.Namespace) -> int:
    if not args.moved > 0:
        raise BenchError(f"--moved: must be above 0, got {args.moved}")
    header = ["switched off"]
    for split in SPLITS:
        header += [f"{split} final", f"{split} area", f"{split} waste (points)"]
    header.append(f"final worse/better by {args.moved} ({'; '.join(SPLITS)})")
    bars = Bars() if args.bars else None
    if bars:
        header.append("bars failed (waste, hack2 in points)")
    print(markdown_table(header, rows(args.file, args.moved, bars)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("file", help="a run of bench/quality.py --ablate (--out)")
    parser.add_argument("--moved", type=float, default=0.005, help="a regime's final change")
    parser.add_argument("--bars", action="store_true", help="the removal rule's verdict per row")
    parser.add_argument("-v", "--verbose", action="store_true")
    return run_main(_main, parser.parse_args(argv), log)


if __name__ == "__main__":
    sys.exit(main())
