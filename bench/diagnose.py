"""Where one quality cell's episodes go, quarter by quarter, and when its traps are held back.

    .venv/bin/python -W ignore bench/diagnose.py --regime ext --seeds 0,1
    .venv/bin/python -W ignore bench/diagnose.py --regime ext --seeds 0 --runner oracle
    .venv/bin/python -W ignore bench/diagnose.py --regime skill_1tier --seeds 0 \\
        --variant '{"skill": {"max_weight": 8}}'
    .venv/bin/python -W ignore bench/diagnose.py --regime ext --seeds 0 --against oracle

A tuning aid for ``bench/quality.py`` (same regimes, students, runners and variants), not a
benchmark: it tells why a cell scores what it scores. Per quarter of the run, the share of
episodes:

* on each trap kind (impossible, coin flip, mastered from the start, hackable);
* on learnable families whose true top tier already passes at ``DONE`` or more (``done``);
* on the other learnable families at their frontier (``at``: the lowest tier whose true
  pass rate is under ``DONE``), below it or above it;

and, for the default scheduler, the median step at which each trap kind is first held back
(idle, suspected hacking or mastered: the skill model's flags, read every ``--every`` steps)
and the share of those families held back by the end.

``--against RUNNER`` runs that curriculum on the same seeds too and lists the learnable
families where ``--runner`` ends furthest below it: each one's true top tier at the end
under both, its tier 0 at the start, the family gating it (the ladder student's
prerequisites) and the episodes each curriculum gave it per quarter. Where a gap to the
oracle or a ladder comes from is a question of a few families; this names them.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import BenchError, markdown_table, run_main
from _runners import SchedulerRunner
from _students import TRAPS, scored, top_score
from quality import GRID, build_cell

from domains import Catalog
from scheduler.backends import FamilyKind

log = logging.getLogger("bench.diagnose")

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

DONE = 0.95  # a true pass rate this high counts as learned
COLUMNS = [k.name.lower() for k in TRAPS] + ["done", "at", "below", "above"]


def frontier(catalog: Catalog, true_arm: FloatArray) -> IntArray:
    """int64 [n_families]: each family's lowest tier whose true pass rate is under DONE
    (its top tier where every tier passes)."""
    key = np.where(true_arm < DONE, catalog.tier_of_arm, np.iinfo(np.int64).max)
    lowest = np.minimum.reduceat(key, catalog.arm_start[:-1])
    result: IntArray = np.minimum(lowest, catalog.n_tiers - 1).astype(np.int64)
    return result


def run(
    regime_name: str, seed: int, runner_name: str, variant: dict[str, Any], every: int
) -> dict[str, Any]:
    """One cell: episode shares per quarter, and when the default held its traps back."""
    regime = {r.name: r for r in GRID}[regime_name]
    ours = runner_name == "ours"
    catalog, student, runner, evaluator = build_cell(
        regime, runner_name, seed, variant if ours else None
    )
    evaluator.tick(0, runner)
    kind = np.asarray(student.kind)
    learnable = scored(student)
    shares = np.zeros((4, len(COLUMNS)))
    held_at = np.full(catalog.n_families, -1)
    start = student.true_arm()[catalog.arm_start[:-1]]  # each family's tier 0, untrained
    episodes = np.zeros((4, catalog.n_families), dtype=np.int64)
    for step in range(1, regime.steps + 1):
        batch = runner.propose(regime.batch)
        fam, tier = np.asarray(batch.family), np.asarray(batch.tier)
        best = frontier(catalog, student.true_arm())[fam]
        done = (top_score(student) >= DONE)[fam] & learnable[fam]
        open_ = learnable[fam] & ~done
        quarter = min(3, (step - 1) * 4 // regime.steps)
        row = np.bincount(kind[fam], minlength=len(FamilyKind))[list(TRAPS)].tolist()
        row += [done.sum(), (open_ & (tier == best)).sum()]
        row += [(open_ & (tier < best)).sum(), (open_ & (tier > best)).sum()]
        shares[quarter] += row
        episodes[quarter] += np.bincount(fam, minlength=catalog.n_families)
        runner.observe(batch, student.run(batch))
        evaluator.tick(step, runner)
        if ours and step % every == 0:
            assert isinstance(runner, SchedulerRunner)
            sk = runner.sched.skill
            held = sk.idle() | sk.hacked() | sk.mastered()
            held_at[held & (held_at < 0)] = step
    shares /= np.maximum(shares.sum(axis=1, keepdims=True), 1)
    flags = {}
    for k in TRAPS:
        of_kind = kind == k
        if ours and of_kind.any():
            first = held_at[of_kind]
            flags[k.name.lower()] = {
                "held": float((first >= 0).mean()),
                "median_step": float(np.median(first[first >= 0])) if (first >= 0).any() else None,
            }
    top = top_score(student)
    final = float(top[learnable].mean())
    gate = getattr(student, "prerequisite", np.full(catalog.n_families, -1))
    families = {
        "top": top.tolist(),
        "start": start.tolist(),
        "learnable": learnable.tolist(),
        "gate": np.asarray(gate).tolist(),
        "episodes": episodes.T.tolist(),  # [family][quarter]
    }
    return {
        "seed": seed, "final": final, "shares": shares.tolist(), "flags": flags,
        "families": families,
    }  # fmt: skip


def furthest_below(cell: dict[str, Any], other: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The ``n`` learnable families of one seed where ``cell``'s curriculum ends furthest
    below ``other``'s (gap > 0 only), largest gap first."""
    mine, theirs = cell["families"], other["families"]
    gap = (np.asarray(theirs["top"]) - np.asarray(mine["top"])) * np.asarray(mine["learnable"])
    order = [int(f) for f in np.argsort(-gap, kind="stable")[:n] if gap[f] > 0]
    return [
        {
            "family": f,
            "gap": float(gap[f]),
            "mine": mine["top"][f],
            "theirs": theirs["top"][f],
            "start": mine["start"][f],
            "gate": mine["gate"][f],
            "episodes": (mine["episodes"][f], theirs["episodes"][f]),
        }
        for f in order
    ]


def render_gaps(runner: str, against: str, cell: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """One seed's families furthest below ``against``, as a table."""
    total = sum(r["gap"] for r in rows) / max(int(np.sum(cell["families"]["learnable"])), 1)
    head = [
        "family", f"{runner} top", f"{against} top", "tier 0 at start", "gated by",
        f"{runner} episodes Q1-Q4", f"{against} episodes Q1-Q4",
    ]  # fmt: skip
    body = [
        [
            str(r["family"]), f"{r['mine']:.2f}", f"{r['theirs']:.2f}", f"{r['start']:.2f}",
            "-" if r["gate"] < 0 else str(r["gate"]),
            " / ".join(str(e) for e in r["episodes"][0]),
            " / ".join(str(e) for e in r["episodes"][1]),
        ]
        for r in rows
    ]  # fmt: skip
    title = (
        f"seed {cell['seed']}: the {len(rows)} families furthest below {against} "
        f"({total:.4f} of the final score between them)"
    )
    return "\n".join(["", title, "", markdown_table(head, body)])


def render(regime: str, runner: str, cells: Sequence[dict[str, Any]]) -> str:
    lines = [f"### {regime}, {runner}"]
    for cell in cells:
        rows = [[f"Q{q + 1}"] + [f"{100 * x:.1f}" for x in cell["shares"][q]] for q in range(4)]
        lines += ["", f"seed {cell['seed']}: final {cell['final']:.3f}; % of episodes", ""]
        lines.append(markdown_table(["quarter", *COLUMNS], rows))
        if cell["flags"]:
            held = [
                [
                    name,
                    f"{v['held']:.2f}",
                    "-" if v["median_step"] is None else f"{v['median_step']:.0f}",
                ]
                for name, v in cell["flags"].items()
            ]
            lines += [
                "",
                markdown_table(["trap", "held back by the end", "median first step"], held),
            ]
    return "\n".join(lines)


def _main(args: argparse.Namespace) -> int:
    names = [r.name for r in GRID]
    if args.regime not in names:
        raise BenchError(f"--regime {args.regime}: unknown; known: {', '.join(names)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        raise BenchError(f"--seeds {args.seeds}: must be integers separated by commas") from None
    try:
        variant = json.loads(args.variant)
    except json.JSONDecodeError as e:
        raise BenchError(f"--variant: not JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(variant, dict):
        raise BenchError("--variant: must be a JSON object of SchedulerConfig changes")
    if args.every < 1:
        raise BenchError(f"--every: must be at least 1, got {args.every}")
    if args.families < 1:
        raise BenchError(f"--families: must be at least 1, got {args.families}")
    if args.against and args.against == args.runner:
        raise BenchError(f"--against {args.against}: the same curriculum as --runner")
    cells = [run(args.regime, s, args.runner, variant, args.every) for s in seeds]
    print(render(args.regime, args.runner, cells))
    if args.against:
        others = [run(args.regime, s, args.against, variant, args.every) for s in seeds]
        print(f"\n### {args.regime}, {args.runner} against {args.against}")
        for cell, other in zip(cells, others, strict=True):
            rows = furthest_below(cell, other, args.families)
            print(render_gaps(args.runner, args.against, cell, rows))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regime", default="ext")
    parser.add_argument("--seeds", default="0")
    parser.add_argument(
        "--runner", default="ours", help="ours, fixed, ladder, ladder_probe, oracle"
    )
    parser.add_argument("--variant", default="{}", help="the default's changes, as quality.py's")
    parser.add_argument("--every", type=int, default=5, help="steps between reads of the flags")
    parser.add_argument(
        "--against", default="", help="list the families furthest below this curriculum"
    )
    parser.add_argument("--families", type=int, default=10, help="how many (with --against)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return run_main(_main, parser.parse_args(argv), log)


if __name__ == "__main__":
    sys.exit(main())
