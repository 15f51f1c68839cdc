"""`curriculum simulate`: the policy and a baseline on the same seed, side by side.

Both runs go to the store (resumable) and to MLflow (the baseline with aggregates only).
"""

from __future__ import annotations

import argparse
import logging
import threading
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

from .._batch import Batch
from .._errors import ConfigError
from .._redact import mask_url
from ..backends import BatchOutcomes
from ..probing import ProbeRound
from ..recording._recorder import RunRecorder
from ..store import Store, StoreError, open_store
from ..tracking import MLflowTracker, NullTracker, Tracker, flatten_params
from ._settings import Settings
from ._simulate import FixedMixRun, RunSummary, SimulationRun, run_simulation

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
    labels = {name: "--" + name.replace("_", "-") for name in _FLAGS}
    return Settings.load(args.config, labels=labels, **overrides)


@dataclass
class _Outcome:
    summary: RunSummary
    recorder: RunRecorder
    tracker: Tracker


def _columns_note(main: str, others: list[str]) -> list[str]:
    """One line per column of the table: what ran in it."""
    lines = [f"{main}: the scheduler with its default machinery and the {main} policy"]
    for name in others:
        if name == FixedMixRun.policy_name:
            lines.append(f"{name}: every task (family x tier) equally likely, no scheduler")
        else:
            lines.append(f"{name}: the same scheduler with the {name} policy")
    return lines


def _table(main: RunSummary, others: list[RunSummary]) -> Table:
    table = Table(title="curriculum vs baselines (same seed, same learner)")
    table.add_column("metric")
    for summary in (main, *others):
        table.add_column(summary.policy, justify="right")
    if others:
        table.add_column(f"vs {others[-1].policy}", justify="right")

    def row(name: str, values: list[float], fmt: str = "{:.3f}", ratio: bool = True) -> None:
        cells = [name, *(fmt.format(v) for v in values)]
        if others:
            last = values[-1]
            cells.append(f"{values[0] / last:.2f}x" if ratio and last else "-")
        table.add_row(*cells)

    runs = (main, *others)
    row("mean held-out score (final)", [r.final_score for r in runs])
    row("p10 across families", [r.p10 for r in runs])
    row("area under score curve", [r.auc for r in runs])
    row("episodes wasted (share)", [r.waste for r in runs])
    if others:
        ref = others[-1]
        reach = [r.steps_to(ref.final_score) for r in (main, *others[:-1])]
        table.add_row(
            f"steps to {ref.policy}'s final score",
            *("never" if x is None else str(x) for x in reach),
            str(ref.steps),
            f"{reach[0] / ref.steps:.2f}x" if reach[0] else "-",
        )
    row("seconds simulating (no recording)", [r.seconds for r in runs], "{:.1f}", ratio=False)
    return table


def _open_store(settings: Settings, args: argparse.Namespace, err: Console) -> Store | None:
    if args.no_store:
        if args.resume:
            raise ConfigError("--resume: needs the store (drop --no-store)")
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


@dataclass(frozen=True)
class _Plan:
    """What a `simulate` call will do: each run's name, whether it resumes, from where."""

    settings: Settings  # with ``steps`` the target of this call
    names: dict[str, str]  # role -> run name
    resume: dict[str, bool]  # role -> resume an existing run (else start it)
    at: dict[str, int]  # role -> steps already done (0 for a run to start)


def _steps_done(store: Store, name: str) -> tuple[bool, int]:
    info = store.get_run(name)
    if info is None:
        return False, 0
    checkpoint = store.latest_checkpoint(info.run_id)
    return True, 0 if checkpoint is None else checkpoint[0] + 1


def _plan(settings: Settings, store: Store | None, roles: list[str], resume: bool) -> _Plan:
    """Decide, before anything is written, which runs resume and to which step. A resumed
    run goes to the target it was started with unless a target is given; one below the
    steps already done is refused. A baseline the kill came before is started."""
    name = _run_name(settings, store, resume)
    names = {role: name if role == "main" else f"{name}.{role}" for role in roles}
    if not resume or store is None:
        return _Plan(settings, names, dict.fromkeys(roles, False), dict.fromkeys(roles, 0))
    info = store.get_run(name)
    if info is None:
        known = ", ".join(r.name for r in store.runs()) or "(no runs yet)"
        raise StoreError(
            f"--resume: run {name!r} is not in the store, so it cannot be resumed (it never "
            f"started, or was killed before its first write): run it without --resume; the "
            f"store holds {known}"
        )
    found = {role: _steps_done(store, names[role]) for role in roles}
    done = found["main"][1]
    recorded = str(info.config.get("params", {}).get("steps", settings.steps))
    if "steps" in settings.model_fields_set:
        target = settings.steps
        if target < done:
            raise ConfigError(
                f"--steps {target}: run {name!r} is already at step {done}; pass --steps "
                f"{done} or more, or leave --steps out to finish it at its own target "
                f"({recorded})"
            )
    else:
        target = int(recorded) if recorded.isdigit() else settings.steps
        target = max(target, done)
    return _Plan(
        settings.model_copy(update={"steps": target}),
        names,
        {role: exists for role, (exists, _) in found.items()},
        {role: at for role, (_, at) in found.items()},
    )


def _say_plan(plan: _Plan, err: Console) -> None:
    target = plan.settings.steps
    for role, name in plan.names.items():
        if plan.resume[role]:
            at = plan.at[role]
            what = "already done" if at >= target else f"from step {at} to step {target}"
            err.print(f"resuming run {name!r} {what}", markup=False)
        elif any(plan.resume.values()):
            err.print(
                f"starting run {name!r} (it was not in the store yet): steps 0 to {target}",
                markup=False,
            )


def _drain(results: list[_Outcome], err: Console, show: bool) -> float:
    """Close every tracker at once (each drains its own backlog), with a progress bar of
    the metric values logged; returns the seconds it took."""
    start = time.perf_counter()
    closers = [threading.Thread(target=r.tracker.close, daemon=True) for r in results]
    for thread in closers:
        thread.start()
    stats = [r.tracker.stats for r in results]
    queued = sum(s.queued for s in stats)
    if not show:
        err.print(f"MLflow: {sum(s.pending for s in stats)} of {queued} values still to write")
    with Progress(
        TextColumn("{task.description:>24}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=not show,
    ) as progress:
        task = progress.add_task("MLflow drain", total=max(queued, 1))
        while any(t.is_alive() for t in closers):
            pending = sum(r.tracker.stats.pending for r in results)
            progress.update(task, completed=queued - pending)
            time.sleep(0.2)
        progress.update(task, completed=max(queued, 1))
    for r in results:
        dropped = r.tracker.stats.dropped
        if dropped:
            err.print(f"warning: {dropped} metric values could not be logged")
    return time.perf_counter() - start


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
    began = time.perf_counter()
    settings = settings_from_args(args)
    catalog = load_catalog(*settings.domains, sources=settings.source_policy())
    spent = {"catalog": time.perf_counter() - began, "start": 0.0, "close": 0.0}
    settings.scheduler_config()  # surface config errors before anything is created
    roles = [("main", settings.policy)]
    if not args.no_baseline:
        roles.append(("baseline", settings.baseline))
    results: list[_Outcome] = []
    with ExitStack() as stack:
        store = _open_store(settings, args, err)
        if store is not None:
            stack.callback(store.close)
        plan = _plan(settings, store, [role for role, _ in roles], args.resume)
        settings = plan.settings
        _say_plan(plan, err)
        params = flatten_params(settings.model_dump())
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
                run_name=plan.names[role],
                store=store,
                tracker=tracker,
                config=settings.recording_config(detail=role == "main"),
                state=sim.state_dict,
                load_state=sim.load_state_dict,
                params={**params, "role": role},
                extra_metrics=sim.extra_metrics,  # a listener: it hears each step itself
            )
            opened = time.perf_counter()
            restored = recorder.open(resume=plan.resume[role])
            spent["start"] += time.perf_counter() - opened
            if restored is not None and restored + 1 != plan.at[role]:
                # the newest checkpoint did not decode: say where the run really resumes
                err.print(
                    f"{recorder.run_name}: resumed from the checkpoint at step {restored}",
                    markup=False,
                )
            if recorder.tracking_error is not None:
                err.print(
                    f"warning: MLflow unavailable ({recorder.tracking_error}); "
                    "continuing without tracking",
                    markup=False,
                )
                tracker = recorder.tracker
            task = progress.add_task(f"{name} ({role})", total=settings.steps, completed=sim.step)

            def on_step(
                run: SimulationRun,
                batch: Batch,
                outcome: BatchOutcomes,
                probes: ProbeRound | None,
                task_id: TaskID = task,
            ) -> None:
                progress.update(task_id, completed=run.step)

            summary = run_simulation(catalog, settings, name, on_step=on_step, run=sim)
            closing = time.perf_counter()
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
            spent["close"] += time.perf_counter() - closing
            results.append(_Outcome(summary, recorder, tracker))
        fixed = None
        if not args.no_baseline:
            mix = FixedMixRun(catalog, settings)
            task = progress.add_task("fixed mix", total=settings.steps)
            while mix.step < settings.steps:
                mix.advance()
                if mix.step % 50 == 0:
                    progress.update(task, completed=mix.step)
            progress.update(task, completed=mix.step)
            fixed = mix.run(settings.steps)
    main = results[0].summary
    others = [r.summary for r in results[1:]] + ([fixed] if fixed is not None else [])
    out.print(
        f"{catalog.n_domains} domains, {catalog.n_families} families, {catalog.n_arms} arms; "
        f"{settings.steps} steps x {settings.batch_size} episodes, seed {settings.seed}"
    )
    out.print(_table(main, others))
    for line in _columns_note(main.policy, [o.policy for o in others]):
        out.print(line, markup=False)
    drain_s = 0.0
    if not args.no_tracking:
        drain_s = _drain(results, err, show=not args.no_progress)
    rec = results[0].recorder
    if store is not None:
        out.print(
            f"run {rec.run_name!r} stored in {mask_url(settings.db)} "
            f"(curriculum report {rec.run_name})"
        )
    if rec.mlflow_run_id:
        out.print(mlflow_line(rec.mlflow_run_id, settings.tracking_uri))
    spent["drain"] = drain_s
    out.print(_timing(results, fixed, spent, time.perf_counter() - began))
    per_step = 1000 / max(main.steps, 1)
    out.print(
        f"recording on the training thread: {rec.overhead_s * per_step:.2f} ms/step "
        f"(store {rec.store_s * per_step:.2f}, tracking {rec.tracking_s * per_step:.2f}); "
        f"simulation {main.seconds * per_step:.2f} ms/step"
    )
    return 0


def _timing(
    results: list[_Outcome], fixed: RunSummary | None, spent: dict[str, float], total_s: float
) -> str:
    """Where this call's time went. Simulating is the scheduler and the learner (a resumed
    run counts the processes before the kill too); store and MLflow queue are the
    recorder's time on the training thread (rows, checkpoints; metric dicts queued); start
    opens the runs (MLflow's first use creates its database) and close commits the last
    rows and draws the figures; the drain waits for MLflow's backlog."""
    sim = sum(r.summary.seconds for r in results) + (fixed.seconds if fixed else 0.0)
    store = sum(r.recorder.store_s for r in results)
    queue = sum(r.recorder.tracking_s for r in results)
    known = sim + store + queue + sum(spent.values())
    return (
        f"time: simulating {sim:.1f} s, store {store:.1f} s, MLflow queue {queue:.1f} s, "
        f"MLflow drain {spent['drain']:.1f} s, starting runs {spent['start']:.1f} s, "
        f"closing them (figures) {spent['close']:.1f} s, catalog {spent['catalog']:.1f} s, "
        f"other {max(total_s - known, 0.0):.1f} s; {total_s:.1f} s in all"
    )
