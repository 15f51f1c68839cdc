"""Benchmark: what MLflow tracking costs the training thread, and how long the drain takes.

A `simulate`-style run: Scheduler + SimulatedLearner over a synthetic catalog of 300
families (30 domains x 10, 3 tiers), batch 256. Every step logs aggregates and per-domain
weights (~100 values); every 10th step also per-family detail (300 x 5 values). The same
loop runs once with NullTracker and once with MLflowTracker on a fresh sqlite store.

    .venv/bin/python bench/tracking.py [--steps 1000] [--sink process|thread]

Reports the time spent inside tracker calls on the training thread (mean, p50, p99, max per
step), the loop's wall time with and without tracking, the time close() took to drain the
backlog, and whether every logged value is in the store (counted in its metrics table).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from domains import Catalog
from scheduler import Scheduler
from scheduler.backends import SimulatedLearner
from scheduler.tracking import MLflowTracker, NullTracker, Tracker


def run(tracker: Tracker, steps: int, catalog: Catalog, detail_every: int) -> dict[str, float]:
    sched = Scheduler(catalog, policy="learning_progress", seed=0)
    learner = SimulatedLearner(catalog, seed=0)
    fam, dom = catalog.family_names, catalog.domain_names
    domain_of = catalog.domain_of_family
    per_step = np.zeros(steps)  # wall time in tracker calls: includes GIL waits, preemption
    cpu_step = np.zeros(steps)  # this thread's CPU time in tracker calls
    t_loop = time.perf_counter()
    for step in range(steps):
        batch = sched.next_batch(256)
        out = learner.run(batch)
        sched.report(batch, out)
        w = sched.weights()
        success = np.bincount(batch.family, weights=out.success, minlength=len(fam))
        metrics = {
            "train/reward_mean": float(out.reward.mean()),
            "train/success_mean": float(out.success.mean()),
            "train/cost_s": float(out.cost.sum()),
            "train/entropy": float(-(w.family * np.log(w.family + 1e-12)).sum()),
        }
        for d, name in enumerate(dom):
            metrics[f"weight/{name}"] = float(w.domain[d])
            metrics[f"success/{name}"] = float(success[domain_of == d].sum())
            metrics[f"share/{name}"] = float(w.domain[d])
        if step % detail_every == 0:
            tier = sched.tiers.tier
            probe = sched.stats.probe_score
            fast = sched.stats.success_fast
            for f, name in enumerate(fam):
                d = dom[int(domain_of[f])]
                metrics[f"family_weight/{d}/{name}"] = float(w.family[f])
                metrics[f"tier/{d}/{name}"] = float(tier[f])
                metrics[f"success_fast/{d}/{name}"] = float(fast[catalog.arm_start[f]])
                metrics[f"probe/{d}/{name}"] = float(np.nan_to_num(probe[catalog.arm_start[f]]))
                metrics[f"count/{d}/{name}"] = float(sched.stats.count[catalog.arm_start[f]])
        t1, c1 = time.perf_counter(), time.thread_time()
        tracker.log_metrics(metrics, step)
        tracker.log_events(sched.drain_events())
        per_step[step] = time.perf_counter() - t1
        cpu_step[step] = time.thread_time() - c1
    loop_s = time.perf_counter() - t_loop
    return {
        "loop_s": loop_s,
        "mean_ms": 1e3 * per_step.mean(),
        "p50_ms": 1e3 * float(np.percentile(per_step, 50)),
        "p99_ms": 1e3 * float(np.percentile(per_step, 99)),
        "max_ms": 1e3 * per_step.max(),
        "cpu_mean_ms": 1e3 * cpu_step.mean(),
        "cpu_p99_ms": 1e3 * float(np.percentile(cpu_step, 99)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--domains", type=int, default=30)
    parser.add_argument("--families-per-domain", type=int, default=10)
    parser.add_argument("--detail-every", type=int, default=10)
    parser.add_argument("--max-queue", type=int, default=1_000_000)
    parser.add_argument("--sink", choices=["process", "thread"], default="process")
    args = parser.parse_args()
    torch.set_num_threads(1)
    catalog = Catalog.synthetic(args.domains, args.families_per_domain, n_tiers=3)

    base = run(NullTracker(), args.steps, catalog, args.detail_every)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "mlflow.db"
        tracker = MLflowTracker(f"sqlite:///{db}", max_queue=args.max_queue, sink=args.sink)
        t_start = time.perf_counter()
        run_id = tracker.start("bench-tracking", params=vars(args))
        start_s = time.perf_counter() - t_start
        timed = run(tracker, args.steps, catalog, args.detail_every)
        t_close = time.perf_counter()
        stats = tracker.close()
        close_s = time.perf_counter() - t_close
        with sqlite3.connect(db) as conn:
            (stored,) = conn.execute(
                "SELECT COUNT(*) FROM metrics WHERE run_uuid = ? AND key NOT LIKE 'tracking/%'",
                (run_id,),
            ).fetchone()

    print(
        f"catalog: {catalog.n_families} families, {catalog.n_domains} domains, {args.steps} steps"
    )
    print(f"values logged: {stats.queued:,} ({stats.queued / args.steps:.0f} per step)")
    print(
        "tracker calls on the training thread: "
        f"mean {timed['mean_ms']:.3f} ms, p50 {timed['p50_ms']:.3f} ms, "
        f"p99 {timed['p99_ms']:.3f} ms, max {timed['max_ms']:.3f} ms per step (wall); "
        f"CPU mean {timed['cpu_mean_ms']:.3f} ms, p99 {timed['cpu_p99_ms']:.3f} ms"
    )
    print(
        f"same calls on NullTracker: wall mean {base['mean_ms']:.3f} ms, "
        f"p99 {base['p99_ms']:.3f} ms"
    )
    print(
        f"loop wall time: {timed['loop_s']:.2f} s with MLflowTracker, "
        f"{base['loop_s']:.2f} s with NullTracker "
        f"(+{1e3 * (timed['loop_s'] - base['loop_s']) / args.steps:.2f} ms per step)"
    )
    print(
        f"start(): {start_s:.2f} s; close() drain: {close_s:.2f} s; "
        f"max backlog {stats.max_backlog:,}"
    )
    print(
        f"sent {stats.sent:,}, coalesced {stats.coalesced:,}, dropped {stats.dropped:,}, "
        f"failed batches {stats.failed_batches}; in the store: {stored:,} "
        f"({'all arrived' if stored == stats.queued else 'MISSING ' + str(stats.queued - stored)})"
    )


if __name__ == "__main__":
    main()
