"""`curriculum simulate`: the policy and a baseline on the same seed, side by side."""

from __future__ import annotations

import argparse
from contextlib import ExitStack

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from domains import load_catalog

from ._settings import Settings
from ._simulate import RunSummary, SimulationRun, run_simulation

_FLAGS = (
    "steps",
    "seed",
    "policy",
    "baseline",
    "batch_size",
    "domains",
    "db",
    "tracking_uri",
    "run_name",
)


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides = {name: getattr(args, name, None) for name in _FLAGS}
    return Settings.load(args.config, **overrides)


def _table(main: RunSummary, base: RunSummary | None) -> Table:
    table = Table(title="curriculum vs baseline (same seed, same learner)")
    table.add_column("metric")
    table.add_column(main.policy, justify="right")
    if base is not None:
        table.add_column(base.policy, justify="right")
        table.add_column("ratio", justify="right")

    def row(name: str, a: float, b: float | None, fmt: str = "{:.3f}") -> None:
        if base is None:
            b = None
        cells = [name, fmt.format(a)]
        if base is not None and b is not None:
            cells += [fmt.format(b), f"{a / b:.2f}x" if b else "-"]
        table.add_row(*cells)

    row("mean held-out score (final)", main.final_score, None if base is None else base.final_score)
    row("p10 across families", main.p10, None if base is None else base.p10)
    row("area under score curve", main.auc, None if base is None else base.auc)
    row("episodes wasted (share)", main.waste, None if base is None else base.waste)
    if base is not None:
        reach = main.steps_to(base.final_score)
        table.add_row(
            "steps to baseline's final score",
            "never" if reach is None else str(reach),
            str(base.steps),
            f"{reach / base.steps:.2f}x" if reach else "-",
        )
    row("seconds", main.seconds, None if base is None else base.seconds, "{:.1f}")
    return table


def main_job(args: argparse.Namespace, out: Console, err: Console) -> int:
    settings = settings_from_args(args)
    catalog = load_catalog(*settings.domains)
    names = [settings.policy] + ([] if args.no_baseline else [settings.baseline])
    summaries: list[RunSummary] = []
    with ExitStack() as stack:
        progress = Progress(
            TextColumn("{task.description:>20}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            disable=args.no_progress,
        )
        stack.enter_context(progress)
        for name in names:
            sim = SimulationRun(catalog, settings, name)
            task = progress.add_task(name, total=settings.steps, completed=sim.step)

            def tick(run: SimulationRun, *_: object, task_id: TaskID = task) -> None:
                progress.update(task_id, completed=run.step)

            summaries.append(run_simulation(catalog, settings, name, on_step=tick, run=sim))
    out.print(
        f"{catalog.n_domains} domains, {catalog.n_families} families, {catalog.n_arms} arms; "
        f"{settings.steps} steps x {settings.batch_size} episodes, seed {settings.seed}"
    )
    out.print(_table(summaries[0], summaries[1] if len(summaries) > 1 else None))
    return 0
