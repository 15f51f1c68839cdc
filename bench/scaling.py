"""How a step's cost grows with families, tiers, ranks and probe frequency.

    .venv/bin/python bench/scaling.py                       # every part
    .venv/bin/python bench/scaling.py --parts families tiers --steps 40
    .venv/bin/python bench/scaling.py --parts ranks --ranks 1 2 4 8

Only the public API is used (``Scheduler``, ``next_batch``, ``report``, ``record_probes``,
``ReplicatedScheduler``, ``RunRecorder`` with ``open_store`` and a ``NullTracker``), so the
figures stay comparable while the core changes underneath. Every part prints a table and
a least-squares line through its sizes (slope and intercept), and ``--out`` keeps the JSON.

* ``families``: ms per step (``next_batch(256)`` + ``report``) over F families x 4 tiers;
* ``tiers``: the same at 2,500 families and 1..8 tiers;
* ``probes``: ms of one ``record_probes`` round of every family, over F; and ms per step
  at 10,000 arms with a round every k steps;
* ``recording``: the recorder's share of a step (store rows, a commit with a checkpoint
  every 10 steps, metric values handed to the tracker, per-family ones every 10 steps)
  over F, and the values per step MLflow would have to take;
* ``ranks``: ``ReplicatedScheduler`` over torch.distributed gloo on 127.0.0.1
  (``mp.spawn``), ms per step at 1..8 ranks, beside the local step.

A step's outcomes are coin flips from a seeded generator; seeds are fixed (0).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from domains import Catalog
from scheduler import RecordingConfig, RunRecorder, Scheduler
from scheduler.backends import SimulatedLearner
from scheduler.store import open_store
from scheduler.tracking import NullTracker

BATCH = 256
# a commit (rows and a checkpoint) and per-family metrics every 10 steps, so that a short
# run holds several of each; the defaults are every 100 and every 50 steps
RECORDING = RecordingConfig(checkpoint_every=10, detail_every=10)
PARTS = ("families", "tiers", "probes", "recording", "ranks")


def catalog(families: int, tiers: int) -> Catalog:
    """``families`` families of ``tiers`` tiers in domains of at most 100 families."""
    per_domain = min(100, families)
    return Catalog.synthetic(max(1, families // per_domain), per_domain, tiers)


def step_ms(sched: Scheduler, steps: int, warmup: int = 5) -> float:
    """Median ms of ``next_batch(BATCH)`` + ``report`` over ``steps`` steps."""
    rng = np.random.default_rng(0)
    times = []
    for i in range(warmup + steps):
        began = time.perf_counter()
        batch = sched.next_batch(BATCH)
        success = (rng.random(BATCH) < 0.5).astype(np.float64)
        sched.report(batch, rewards=success, success=success)
        if i >= warmup:
            times.append(time.perf_counter() - began)
    return 1e3 * statistics.median(times)


def probe_round_ms(sched: Scheduler, rounds: int) -> float:
    """Mean ms of ``record_probes`` with one point for every family (after a first round
    of every arm, untimed, that fills every per-arm cache)."""
    cat = sched.catalog
    rng = np.random.default_rng(0)
    sched.record_probes(
        cat.family_of_arm, rng.random(cat.n_arms), tiers=cat.tier_of_arm, n=np.full(cat.n_arms, 32)
    )
    families = np.arange(cat.n_families)
    n = np.full(cat.n_families, 32)
    began = time.perf_counter()
    for _ in range(rounds):
        sched.record_probes(families, rng.random(cat.n_families), n=n)
    return 1e3 * (time.perf_counter() - began) / rounds


def fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope and intercept of ys over xs."""
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(slope), float(intercept)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " ---: |" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# Parts ------------------------------------------------------------------------------------
def part_families(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for f in args.families:
        cat = catalog(f, 4)
        rows.append((f, cat.n_arms, step_ms(Scheduler(cat, seed=0), args.steps)))
    slope, icpt = fit([r[1] / 1e4 for r in rows], [r[2] for r in rows])
    print(table(["families", "arms", "ms/step"], [(f, a, f"{m:.2f}") for f, a, m in rows]))
    print(f"fit: {slope:.2f} ms per step per 10,000 arms, intercept {icpt:.2f} ms\n")
    return {"rows": rows, "ms_per_step_per_10k_arms": slope, "intercept_ms": icpt}


def part_tiers(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for t in args.tiers:
        cat = catalog(2500, t)
        rows.append((t, cat.n_arms, step_ms(Scheduler(cat, seed=0), args.steps)))
    slope, icpt = fit([r[0] for r in rows], [r[2] for r in rows])
    print(table(["tiers", "arms", "ms/step"], [(t, a, f"{m:.2f}") for t, a, m in rows]))
    print(f"fit at 2,500 families: {slope:.2f} ms per step per tier, intercept {icpt:.2f} ms\n")
    return {"rows": rows, "ms_per_step_per_tier": slope, "intercept_ms": icpt}


def part_probes(args: argparse.Namespace) -> dict[str, Any]:
    rounds = []
    for f in args.families:
        cat = catalog(f, 4)
        rounds.append((f, cat.n_arms, probe_round_ms(Scheduler(cat, seed=0), 3)))
    slope, icpt = fit([r[0] / 1e4 for r in rounds], [r[2] for r in rounds])
    print(
        table(
            ["families", "arms", "ms per probe round"], [(f, a, f"{m:.1f}") for f, a, m in rounds]
        )
    )
    print(f"fit: {slope:.1f} ms per round per 10,000 families, intercept {icpt:.1f} ms\n")
    every_rows = []
    cat = catalog(2500, 4)
    families = np.arange(cat.n_families)
    for k in args.probe_every:
        sched = Scheduler(cat, seed=0)
        rng = np.random.default_rng(0)
        times = []
        for i in range(5 + args.steps):
            began = time.perf_counter()
            batch = sched.next_batch(BATCH)
            success = (rng.random(BATCH) < 0.5).astype(np.float64)
            sched.report(batch, rewards=success, success=success)
            if i % k == 0:
                sched.record_probes(
                    families, rng.random(cat.n_families), n=np.full(cat.n_families, 32)
                )
            if i >= 5:
                times.append(time.perf_counter() - began)
        every_rows.append((k, 1e3 * float(np.mean(times))))
    print(
        table(
            ["probe every k steps (10,000 arms)", "mean ms/step"],
            [(k, f"{m:.2f}") for k, m in every_rows],
        )
    )
    print()
    return {
        "rounds": rounds,
        "ms_per_round_per_10k_families": slope,
        "round_intercept_ms": icpt,
        "every": every_rows,
    }


class CountingTracker:
    """A Tracker that counts the metric values the recorder hands it and sends none."""

    def __init__(self) -> None:
        self.values = 0
        self._null = NullTracker()

    def start(self, run_name: str, **_: Any) -> str | None:
        return "counting"

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.values += len(metrics)

    def __getattr__(self, name: str) -> Any:  # events, artifacts, flush, close, stats
        return getattr(self._null, name)


def part_recording(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for f in args.recording_families:
        cat = catalog(f, 4)
        with tempfile.TemporaryDirectory() as tmp:
            sched = Scheduler(cat, seed=0)
            learner = SimulatedLearner(cat, seed=0)
            tracker = CountingTracker()
            store = open_store(f"sqlite:///{Path(tmp) / 'run.db'}")
            recorder = RunRecorder(
                sched, run_name="scaling", store=store, tracker=tracker, config=RECORDING
            )
            recorder.open()
            began = time.perf_counter()
            core = 0.0
            for _ in range(args.steps):
                t0 = time.perf_counter()
                batch = sched.next_batch(BATCH)
                out = learner.run(batch)
                sched.report(
                    batch,
                    rewards=out.reward,
                    success=out.success,
                    process=out.process,
                    cost=out.cost,
                    status=out.status,
                )
                core += time.perf_counter() - t0
            wall = time.perf_counter() - began
            core -= sched.listeners.seconds  # the recorder hears each report as a listener
            recorder.close()
            store.close()
        per = 1e3 / args.steps
        rows.append(
            {
                "families": f,
                "arms": cat.n_arms,
                "core_ms": core * per,
                "recorder_ms": recorder.overhead_s * per,
                "store_ms": recorder.store_s * per,
                "tracking_ms": recorder.tracking_s * per,
                "values_per_step": tracker.values / args.steps,
                "wall_ms": wall * per,
            }
        )
    print(
        table(
            ["families", "arms", "core ms/step", "recorder ms/step", "of which store",
             "of which tracking", "values/step"],
            [
                (r["families"], r["arms"], f"{r['core_ms']:.2f}", f"{r['recorder_ms']:.2f}",
                 f"{r['store_ms']:.2f}", f"{r['tracking_ms']:.2f}", f"{r['values_per_step']:.0f}")
                for r in rows
            ],
        )
    )  # fmt: skip
    fams = [r["families"] / 1e4 for r in rows]
    rec_slope, rec_icpt = fit(fams, [r["recorder_ms"] for r in rows])
    val_slope, val_icpt = fit(fams, [r["values_per_step"] for r in rows])
    print(
        f"fit: recorder {rec_slope:.2f} ms per step per 10,000 families (+{rec_icpt:.2f}); "
        f"{val_slope:.0f} values per step per 10,000 families (+{val_icpt:.0f})\n"
    )
    return {
        "rows": rows,
        "recorder_ms_per_10k_families": rec_slope,
        "recorder_intercept_ms": rec_icpt,
        "values_per_step_per_10k_families": val_slope,
        "values_intercept": val_icpt,
    }


# Ranks: one process per rank -----------------------------------------------------------------
def _rank_main(
    rank: int, world: int, port: int, steps: int, arms_per_family: int, out: str
) -> None:
    import torch
    import torch.distributed as dist

    from scheduler.distributed import ReplicatedScheduler

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        replica = ReplicatedScheduler(Scheduler(catalog(250, arms_per_family), seed=0))
        rng = np.random.default_rng(rank)
        times = []
        for i in range(3 + steps):
            dist.barrier()
            began = time.perf_counter()
            shard = replica.next_shard(BATCH)
            success = (rng.random(len(shard)) < 0.5).astype(np.float64)
            replica.report(shard, rewards=success, success=success)
            if i >= 3:
                times.append(time.perf_counter() - began)
        # the gather alone: torch's all_gather_object of a shard's outcome lists, the
        # payload ReplicatedScheduler sends (positions, rewards, success of BATCH / world)
        n_local = len(shard)
        payload = {"positions": list(range(n_local)), "rewards": [0.5] * n_local}
        payload["success"] = [1.0] * n_local
        gathers = []
        for _ in range(steps):
            parts: list[Any] = [None] * world
            dist.barrier()
            began = time.perf_counter()
            dist.all_gather_object(parts, payload)
            gathers.append(time.perf_counter() - began)
        if rank == 0:
            result = {
                "median_ms": 1e3 * statistics.median(times),
                "gather_ms": 1e3 * statistics.median(gathers),
            }
            Path(out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def part_ranks(args: argparse.Namespace) -> dict[str, Any]:
    import torch.multiprocessing as mp

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    local = step_ms(Scheduler(catalog(250, 4), seed=0), args.rank_steps)
    rows = [("local (no process group)", local, 0.0, 0.0)]
    for world in args.ranks:
        with tempfile.TemporaryDirectory() as tmp:
            out = str(Path(tmp) / "rank0.json")
            began = time.perf_counter()
            mp.spawn(
                _rank_main,
                args=(world, _free_port(), args.rank_steps, 4, out),
                nprocs=world,
                join=True,
            )
            spawn_s = time.perf_counter() - began
            got = json.loads(Path(out).read_text())
            rows.append((f"{world} gloo rank(s)", got["median_ms"], got["gather_ms"], spawn_s))
    print(
        table(
            ["1,000 arms, batch 256", "median ms/step", "all-gather alone ms", "spawn + run s"],
            [(name, f"{ms:.2f}", f"{g:.2f}", f"{s:.1f}") for name, ms, g, s in rows],
        )
    )
    worlds = list(args.ranks)
    nan = (float("nan"), float("nan"))
    slope, icpt = fit(worlds, [r[1] for r in rows[1:]]) if len(worlds) >= 2 else nan
    g_slope, g_icpt = fit(worlds, [r[2] for r in rows[1:]]) if len(worlds) >= 2 else nan
    print(
        f"fit: {slope:.2f} ms per step per rank (+{icpt:.2f}); the all-gather alone "
        f"{g_slope:.2f} ms per rank (+{g_icpt:.2f}); local step {local:.2f} ms; "
        f"{os.cpu_count()} CPU cores for all the ranks\n"
    )
    return {
        "rows": rows,
        "ms_per_step_per_rank": slope,
        "intercept_ms": icpt,
        "gather_ms_per_rank": g_slope,
        "gather_intercept_ms": g_icpt,
        "local_ms": local,
    }


PART_FUNCS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "families": part_families,
    "tiers": part_tiers,
    "probes": part_probes,
    "recording": part_recording,
    "ranks": part_ranks,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--families", type=int, nargs="+", default=[1000, 2500, 5000, 10000, 25000])
    parser.add_argument("--tiers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--probe-every", type=int, nargs="+", default=[1, 5, 10, 50])
    parser.add_argument(
        "--recording-families", type=int, nargs="+", default=[300, 1000, 3000, 10000]
    )
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--rank-steps", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print(f"<!-- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}, batch {BATCH}, seed 0 -->\n")  # fmt: skip
    results = {}
    for part in args.parts:
        print(f"### {part}\n")
        began = time.perf_counter()
        results[part] = PART_FUNCS[part](args)
        results[part]["elapsed_s"] = time.perf_counter() - began
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
