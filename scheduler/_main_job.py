"""`curriculum simulate`: the policy and a baseline on the same seed, side by side.

Both runs go to the store (resumable) and to MLflow (the baseline with aggregates only).
"""

from __future__ import annotations

import argparse
import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass

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

from ._batch import Batch
from ._probes import ProbeRound
from ._recorder import RecordingConfig, RunRecorder
from ._redact import mask_url
from ._settings import Settings
from ._simulate import RunSummary, SimulationRun, run_simulation
from .backends import BatchOutcomes
from .store import Store, StoreError, open_store
from .tracking import MLflowTracker, NullTracker, Tracker, flatten_params

log = logging.getLogger(__name__)

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


@dataclass
class _Outcome:
    summary: RunSummary
    recorder: RunRecorder
    tracker: Tracker


def _table(main: RunSummary, base: RunSummary | None) -> Table:
    table = Table(title="curriculum vs baseline (same seed, same learner)")
    table.add_column("metric")
    table.add_column(main.policy, justify="right")
    if base is not None:
        table.add_column(base.policy, justify="right")
        table.add_column("ratio", justify="right")

    def row(name: str, a: float, b: float | None, fmt: str = "{:.3f}") -> None:
        cells = [name, fmt.format(a)]
        if b is not None:
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


def _open_store(settings: Settings, args: argparse.Namespace, err: Console) -> Store | None:
    if args.no_store:
        return None
    return open_store(settings.db, lock_timeout_s=settings.store_lock_timeout_s)


def _tracker(settings: Settings, args: argparse.Namespace, err: Console) -> Tracker:
    if args.no_tracking:
        return NullTracker()
    return MLflowTracker(settings.tracking_uri, settings.experiment)


def _run_name(settings: Settings, store: Store | None, resume: bool) -> str:
    if settings.run_name:
        return settings.run_name
    if resume:
        runs = [r for r in (store.runs() if store else []) if not r.name.endswith(".baseline")]
        if not runs:
            raise StoreError("--resume: no run to resume in the store; pass --run-name")
        return max(runs, key=lambda r: r.created_at).name
    return time.strftime("sim-%Y%m%d-%H%M%S")


def mlflow_line(run_id: str, tracking_uri: str) -> str:
    """Where the run is in MLflow and how to open it; the URI's password masked."""
    uri = mask_url(tracking_uri)
    how = (
        f"open {uri}"
        if uri.startswith(("http://", "https://"))
        else f"curriculum ui --tracking-uri {uri}"
    )
    return f"MLflow run {run_id} in {uri} ({how})"


def main_job(args: argparse.Namespace, out: Console, err: Console) -> int:
    settings = settings_from_args(args)
    catalog = load_catalog(*settings.domains, sources=settings.source_policy())
    settings.scheduler_config()  # surface config errors before anything is created
    roles = [("main", settings.policy)]
    if not args.no_baseline:
        roles.append(("baseline", settings.baseline))
    params = flatten_params(settings.model_dump())
    results: list[_Outcome] = []
    with ExitStack() as stack:
        store = _open_store(settings, args, err)
        if store is not None:
            stack.callback(store.close)
        run_name = _run_name(settings, store, args.resume)
        progress = Progress(
            TextColumn("{task.description:>24}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            disable=args.no_progress,
        )
        stack.enter_context(progress)
        for role, name in roles:
            sim = SimulationRun(catalog, settings, name)
            tracker = _tracker(settings, args, err)
            recorder = RunRecorder(
                sim.scheduler,
                run_name=run_name if role == "main" else f"{run_name}.baseline",
                store=store,
                tracker=tracker,
                config=RecordingConfig(
                    checkpoint_every=settings.checkpoint_every,
                    checkpoint_seconds=settings.checkpoint_seconds,
                    domain_every=settings.domain_every,
                    detail_every=settings.detail_every,
                    detail=role == "main",
                ),
                state=sim.state_dict,
                load_state=sim.load_state_dict,
                params={**params, "role": role},
            )
            restored = recorder.open(resume=args.resume)
            if recorder.tracking_error is not None:
                err.print(
                    f"warning: MLflow unavailable ({recorder.tracking_error}); "
                    "continuing without tracking",
                    markup=False,
                )
                tracker = recorder.tracker
            if restored is not None:
                err.print(f"{recorder.run_name}: resumed from the checkpoint at step {restored}")
            task = progress.add_task(f"{name} ({role})", total=settings.steps, completed=sim.step)

            def on_step(
                run: SimulationRun,
                batch: Batch,
                outcome: BatchOutcomes,
                probes: ProbeRound | None,
                task_id: TaskID = task,
                rec: RunRecorder = recorder,
            ) -> None:
                rec.step(batch, outcome, probes, extra=run.extra_metrics())
                progress.update(task_id, completed=run.step)

            summary = run_simulation(catalog, settings, name, on_step=on_step, run=sim)
            recorder.close(
                {
                    "policy": summary.policy,
                    "final_score": summary.final_score,
                    "p10": summary.p10,
                    "auc": summary.auc,
                    "waste": summary.waste,
                    "steps": summary.steps,
                }
            )
            results.append(_Outcome(summary, recorder, tracker))
        if not args.no_tracking:
            err.print("flushing MLflow ...")
        for r in results:
            stats = r.tracker.close()
            if stats.dropped:
                err.print(f"warning: {stats.dropped} metric values could not be logged")
    main, base = results[0].summary, results[1].summary if len(results) > 1 else None
    out.print(
        f"{catalog.n_domains} domains, {catalog.n_families} families, {catalog.n_arms} arms; "
        f"{settings.steps} steps x {settings.batch_size} episodes, seed {settings.seed}"
    )
    out.print(_table(main, base))
    rec = results[0].recorder
    if store is not None:
        out.print(
            f"run {rec.run_name!r} stored in {mask_url(settings.db)} "
            f"(curriculum report {rec.run_name})"
        )
    if rec.mlflow_run_id:
        out.print(mlflow_line(rec.mlflow_run_id, settings.tracking_uri))
    per_step = 1000 / max(main.steps, 1)
    out.print(
        f"recording on the training thread: {rec.overhead_s * per_step:.2f} ms/step "
        f"(store {rec.store_s * per_step:.2f}, tracking {rec.tracking_s * per_step:.2f}); "
        f"simulation {main.seconds * per_step:.2f} ms/step"
    )
    return 0
