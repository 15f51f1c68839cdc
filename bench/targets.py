"""The curriculum issue's targets, read off saved quality cells (``bench/quality.py --out``).

    .venv/bin/python bench/targets.py runs/fresh500.json
    .venv/bin/python bench/targets.py runs/baselines.json runs/ours.json   # later files win
    .venv/bin/python bench/targets.py runs/ablate.json --ours ours-no_hack --strict

For the default (``--ours``) beside the simple baselines in the files (every runner but the
oracle and the default's variants: ``fixed``, ``ladder``, ``ladder_probe``, Syllabus's
curricula), in each regime of the grid the files hold, over the default's seeds:

* final and area at least the best simple baseline's;
* waste at most 5 %, and where no probe is given at most the least simple baseline's;
* ``hack2`` at most 1 % where families are hackable;
* in ``ext``, the issue's own regime: final 0.93, area 0.50 and p10 0.85 at least, waste
  at most 5 %.

It prints the table and each target's tally by split, with the misses. A report, not a
gate: ``--strict`` exits 1 when a target is missed. A baseline without one of the default's
seeds is an error (exit 2): a mean over other seeds would compare unlike things.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _cells import Cells, load_cells, mean_over, runners_of, seeds_of
from _common import BenchError, markdown_table, run_main
from quality import GRID, Regime

log = logging.getLogger("bench.targets")

WASTE = 0.05
HACK2 = 0.01
EXT = {"final": 0.93, "auc": 0.50, "p10": 0.85}  # and waste at most WASTE
_EPS = 1e-9


def is_simple(runner: str, ours: str) -> bool:
    """A simple baseline: not the oracle (it reads the hidden state), not the default or
    one of its variants (``ours-...``)."""
    return runner != "oracle" and runner != ours and not runner.startswith("ours")


@dataclass(frozen=True)
class Row:
    """One regime: the default's means and the simple baselines' best, over the same seeds."""

    regime: Regime
    seeds: tuple[int, ...]
    ours: dict[str, float]
    simple: dict[str, dict[str, float]]  # runner -> its means
    oracle: dict[str, float] | None

    def best(self, metric: str, lower: bool = False) -> tuple[str, float]:
        """The simple baseline best on ``metric`` (lowest where ``lower``), and its value."""
        pick = min if lower else max
        name = pick(self.simple, key=lambda r: self.simple[r][metric])
        return name, self.simple[name][metric]

    def checks(self) -> dict[str, bool]:
        """Each target that applies here, met or not."""
        ours = self.ours
        out = {
            "final": ours["final"] >= self.best("final")[1] - _EPS,
            "area": ours["auc"] >= self.best("auc")[1] - _EPS,
        }
        least = ours["waste"] <= self.best("waste", lower=True)[1] + _EPS
        # where no probe is given, the bar is the least simple baseline's waste, not 5 %
        no_probe = self.regime.protocol.tiers == "none"
        out["waste"] = least if no_probe else ours["waste"] <= WASTE + _EPS
        out["waste_vs_least"] = least
        if self.regime.hackable:
            out["hack2"] = ours["hack2"] <= HACK2 + _EPS
        if self.regime.name == "ext":
            for metric, bar in EXT.items():
                out[f"ext_{metric}"] = ours[metric] >= bar - _EPS
            out["ext_waste"] = ours["waste"] <= WASTE + _EPS
        return out


def rows_of(cells: Cells, ours: str) -> list[Row]:
    """A Row per grid regime where ``ours`` has cells and a simple baseline is present."""
    runners = runners_of(cells)
    if ours not in runners:
        raise BenchError(f"--ours {ours}: no such runner in the files; they hold {runners}")
    simple = [r for r in runners if is_simple(r, ours)]
    if not simple:
        raise BenchError(f"no simple baseline in the files (runners: {runners})")
    rows = []
    for regime in GRID:
        seeds = seeds_of(cells, regime.name, ours)
        if not seeds:
            continue
        present = [r for r in simple if seeds_of(cells, regime.name, r)]
        if not present:
            log.warning("%s: no simple baseline ran; left out", regime.name)
            continue
        oracle = None
        if seeds_of(cells, regime.name, "oracle"):
            oracle = mean_over(cells, regime.name, "oracle", seeds)
        rows.append(
            Row(
                regime=regime,
                seeds=tuple(seeds),
                ours=mean_over(cells, regime.name, ours, seeds),
                simple={r: mean_over(cells, regime.name, r, seeds) for r in present},
                oracle=oracle,
            )
        )
    if not rows:
        raise BenchError(f"no regime of the grid has both {ours} and a simple baseline")
    return rows


TALLIES = (
    ("final", "final at least the best simple baseline's"),
    ("area", "area at least the best simple baseline's"),
    ("waste", "waste at most 5 % (no probe: at most the least simple baseline's)"),
    ("waste_vs_least", "waste at most the least simple baseline's"),
    ("hack2", "hack2 at most 1 % (hackable regimes)"),
    ("ext_final", "ext: final at least 0.93"),
    ("ext_auc", "ext: area at least 0.50"),
    ("ext_p10", "ext: p10 at least 0.85"),
    ("ext_waste", "ext: waste at most 5 %"),
)


def _miss(row: Row, check: str) -> str:
    """What a missed target read: ours against the bar."""
    ours, name = row.ours, row.regime.name
    if check in ("final", "area"):  # four decimals: a miss can hide in the third
        metric = "auc" if check == "area" else "final"
        who, best = row.best(metric)
        return f"{name} {ours[metric]:.4f} / {best:.4f} ({who})"
    if check == "waste_vs_least" or (check == "waste" and row.regime.protocol.tiers == "none"):
        who, least = row.best("waste", lower=True)
        return f"{name} {100 * ours['waste']:.1f} % / {100 * least:.1f} % ({who})"
    if check == "waste":
        return f"{name} {100 * ours['waste']:.1f} %"
    if check == "hack2":
        return f"{name} {100 * ours['hack2']:.1f} %"
    metric = check.removeprefix("ext_")
    if metric == "waste":
        return f"{100 * ours['waste']:.1f} %"
    return f"{ours[metric]:.3f} / {EXT[metric]:.2f}"


def report(rows: Sequence[Row], ours: str) -> tuple[str, bool]:
    """The table and the tallies; whether every target that applies was met."""
    table = []
    for row in rows:
        o = row.ours
        who_f, best_f = row.best("final")
        who_a, best_a = row.best("auc")
        who_w, least_w = row.best("waste", lower=True)
        table.append(
            [
                row.regime.name,
                row.regime.split,
                f"{o['final']:.3f}",
                f"{best_f:.3f} ({who_f})",
                f"{o['auc']:.3f}",
                f"{best_a:.3f} ({who_a})",
                f"{o['p10']:.3f}",
                f"{o['waste']:.3f}",
                f"{least_w:.3f} ({who_w})",
                f"{o['hack2']:.3f}" if row.regime.hackable else "",
                "" if row.oracle is None else f"{row.oracle['final']:.3f}",
            ]
        )
    header = [
        "regime",
        "split",
        f"{ours} final",
        "best simple final",
        f"{ours} auc",
        "best simple auc",
        "p10",
        "waste",
        "least simple waste",
        "hack2",
        "oracle final",
    ]
    seeds = sorted({s for row in rows for s in row.seeds})
    lines = [f"seeds {','.join(map(str, seeds))}; {len(rows)} regimes", ""]
    lines += [markdown_table(header, table), ""]
    all_met = True
    checked = [(row, row.checks()) for row in rows]
    for check, text in TALLIES:
        applies = [(row, checks[check]) for row, checks in checked if check in checks]
        if not applies:
            continue
        by_split = ", ".join(
            f"{split} {sum(ok for _, ok in group)} / {len(group)}"
            for split in ("dev", "held")
            if (group := [(r, ok) for r, ok in applies if r.regime.split == split])
        )
        missed = [_miss(row, check) for row, ok in applies if not ok]
        if check != "waste_vs_least":  # an extra reading, not one of the targets
            all_met = all_met and not missed
        met = len(applies) - len(missed)
        line = f"- {text}: **{met} of {len(applies)}** ({by_split})"
        lines.append(line + (f"; missed: {'; '.join(missed)}" if missed else ""))
    return "\n".join(lines), all_met


def _main(args: argparse.Namespace) -> int:
    rows = rows_of(load_cells(args.files), args.ours)
    text, all_met = report(rows, args.ours)
    print(text)
    return 1 if args.strict and not all_met else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path, help="saved cells; later files win")
    parser.add_argument("--ours", default="ours", help="the runner under test (default: ours)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("-v", "--verbose", action="store_true")
    return run_main(_main, parser.parse_args(argv), log)


if __name__ == "__main__":
    sys.exit(main())
