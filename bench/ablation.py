"""The ablation table of a saved run: the default with each mechanism switched off.

    .venv/bin/python -W ignore bench/quality.py --split all --seeds 1000,1001,1002 \\
        --runners ours --ablate --jobs 2 --out runs/ablate.json
    .venv/bin/python bench/ablation.py runs/ablate.json

One row per ``ours-<ablation>`` runner of the file (``bench/quality.py --ablate``): the
mean change against ``ours`` over each split's regimes, on final, area and waste, and how
many regimes' final fell or rose by ``--moved`` or more (worse / better). A row whose
change is worse nowhere names a mechanism that does not pay on the grid: it goes, or
another learner must show why it stays.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from _cells import load_cells, runners_of
from _common import BenchError, markdown_table, run_main
from compare import Side, changes, split_mean

log = logging.getLogger("bench.ablation")

SPLITS = ("dev", "held")
# (metric, scale, format) of each split's columns: waste in points of a percent
_COLUMNS = (("final", 1.0, "+.3f"), ("auc", 1.0, "+.3f"), ("waste", 100.0, "+.2f"))


def rows(path: str, moved: float) -> list[list[str]]:
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
        out.append([*row, "; ".join(counts)])
    return out


def _main(args: argparse.Namespace) -> int:
    if not args.moved > 0:
        raise BenchError(f"--moved: must be above 0, got {args.moved}")
    header = ["switched off"]
    for split in SPLITS:
        header += [f"{split} final", f"{split} area", f"{split} waste (points)"]
    header.append(f"final worse/better by {args.moved} ({'; '.join(SPLITS)})")
    print(markdown_table(header, rows(args.file, args.moved)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("file", help="a run of bench/quality.py --ablate (--out)")
    parser.add_argument("--moved", type=float, default=0.005, help="a regime's final change")
    parser.add_argument("-v", "--verbose", action="store_true")
    return run_main(_main, parser.parse_args(argv), log)


if __name__ == "__main__":
    sys.exit(main())
