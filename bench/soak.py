"""Soak: a long run of the scheduler with its store, watching memory and disk.

    .venv/bin/python bench/soak.py                          # 1,000,000 steps, 1,000 families
    .venv/bin/python bench/soak.py --steps 100000 --out runs/soak.json

Each step draws a batch, reports random outcomes and buffers them in a StepWriter on a
SQLite store (a commit with a checkpoint every ``--commit-every`` steps); every
``--probe-every`` steps every family gets a probe point. Every ``--sample-every`` steps it
samples the process's resident memory (``/proc/self/statm``) and the store's size on disk
(the database file; its WAL apart, as SQLite folds it back every ~40 MB). A healthy run
has a flat RSS after warm-up and a store that grows linearly with the steps: the table
prints both, with the RSS growth after the first
tenth of the run and the straight-line fit (R^2) of the store size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from domains import Catalog
from scheduler import Scheduler, SchedulerConfig
from scheduler._serialize import dumps_state
from scheduler.store import OutcomeRows, ProbePoints, StepWriter, open_store

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**20


def file_mb(path: Path) -> float:
    return path.stat().st_size / 2**20 if path.exists() else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--families", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--policy", default="learning_progress")
    ap.add_argument("--commit-every", type=int, default=500)
    ap.add_argument("--probe-every", type=int, default=1000)
    ap.add_argument("--sample-every", type=int, default=None)
    ap.add_argument("--dir", default=None, help="where the store goes (default: a temp dir)")
    ap.add_argument("--out", help="write the samples as JSON")
    args = ap.parse_args()
    sample_every = args.sample_every or max(args.steps // 20, 1)
    catalog = Catalog.synthetic(n_domains=10, families_per_domain=args.families // 10, n_tiers=3)
    sched = Scheduler(catalog, args.policy, seed=0, config=SchedulerConfig(refresh_per_family=1.0))
    rng = np.random.default_rng(0)
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="soak-"))
    db = workdir / "soak.db"
    store = open_store(f"sqlite:///{db}", keep_checkpoints=2)
    run = store.open_run(f"soak-{time.time_ns()}", seed=0, config={}, catalog=catalog)
    writer = StepWriter(store, run.run_id, every_steps=args.commit_every)
    fams = np.arange(catalog.n_families, dtype=np.int64)
    samples: list[dict[str, float]] = []
    t0 = time.perf_counter()
    for i in range(args.steps):
        batch = sched.next_batch(args.batch)
        success = (rng.random(args.batch) < 0.5).astype(np.float64)
        sched.report(batch, rewards=success, success=success)
        probes = None
        if i % args.probe_every == args.probe_every - 1:
            scores = rng.random(catalog.n_families)
            sched.record_probes(fams, scores, n=np.full(catalog.n_families, 32))
            probes = ProbePoints(
                family=fams,
                tier=np.zeros(catalog.n_families, np.int64),
                step=np.full(catalog.n_families, batch.step, np.int64),
                wall_time=np.full(catalog.n_families, time.time()),
                score=scores,
                n=np.full(catalog.n_families, 32, np.int64),
                ci_low=scores - 0.1,
                ci_high=scores + 0.1,
            )
        outcomes = OutcomeRows(
            step=np.full(args.batch, batch.step, np.int64),
            arm=batch.arm,
            family=batch.family,
            tier=batch.tier,
            variant=batch.variant,
            reward=success,
            success=success,
            process=np.full(args.batch, np.nan),
            cost=np.ones(args.batch),
            status=np.zeros(args.batch, np.int64),
        )
        writer.step(
            batch.step,
            lambda: dumps_state(sched.state_dict()),
            probe_points=probes,
            events=sched.drain_events(),
            outcomes=outcomes,
        )
        if (i + 1) % sample_every == 0:
            samples.append(
                {
                    "step": i + 1,
                    "seconds": round(time.perf_counter() - t0, 1),
                    "rss_mb": round(rss_mb(), 1),
                    "store_mb": round(file_mb(db), 1),  # the database file
                    "wal_mb": round(file_mb(Path(f"{db}-wal")), 1),  # bounded by autocheckpoint
                }
            )
            print(samples[-1], flush=True)
    writer.close()
    store.close()
    steps = np.array([s["step"] for s in samples], dtype=np.float64)
    rss = np.array([s["rss_mb"] for s in samples])
    size = np.array([s["store_mb"] for s in samples])
    tenth = max(len(samples) // 10, 1) - 1
    growth = float(rss[-1] - rss[tenth])
    fit = np.polyfit(steps, size, 1)
    r2 = 1 - float(((size - np.polyval(fit, steps)) ** 2).sum()) / float(
        ((size - size.mean()) ** 2).sum() or 1.0
    )
    print()
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.steps:,} steps, {catalog.n_families} families, batch {args.batch}, "
        f"{time.perf_counter() - t0:.0f} s; max RSS {max_rss:.0f} MB"
    )
    print("| step | seconds | RSS MB | store MB | WAL MB |\n|---:|---:|---:|---:|---:|")
    for s in samples:
        print(
            f"| {s['step']:,} | {s['seconds']} | {s['rss_mb']} | {s['store_mb']} | {s['wal_mb']} |"
        )
    print(
        f"\nRSS growth after the first tenth: {growth:+.1f} MB "
        f"({growth / max(rss[tenth], 1e-9):+.1%}); store: {fit[0] * 1e6:.1f} MB per million "
        f"steps, linear fit R^2 = {r2:.4f}"
    )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(
            json.dumps(
                {
                    "args": vars(args),
                    "samples": samples,
                    "rss_growth_mb": growth,
                    "store_mb_per_step": fit[0],
                    "store_r2": r2,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
