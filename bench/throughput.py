"""Scheduler throughput: one step (next_batch + report) at several catalog sizes.

    .venv/bin/python bench/throughput.py          # the example catalog and two synthetic ones
    .venv/bin/python bench/throughput.py --policies uniform learning_progress --batch 256

Reports the median and p95 milliseconds per step over ``--steps`` steps after a warm-up, with
the weights recomputed every step (the default) and with ``weights_every=10``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from domains import Catalog, load_catalog
from scheduler import Scheduler, SchedulerConfig


def measure(
    catalog: Catalog, policy: str, batch: int, steps: int, every: int
) -> tuple[float, float]:
    sched = Scheduler(catalog, policy, seed=0, config=SchedulerConfig(weights_every=every))
    rng = np.random.default_rng(0)
    times = []
    for i in range(steps + 20):
        start = time.perf_counter()
        b = sched.next_batch(batch)
        success = (rng.random(batch) < 0.5).astype(np.float64)
        sched.report(b, rewards=success, success=success)
        if i >= 20:
            times.append(time.perf_counter() - start)
    ms = sorted(1e3 * t for t in times)
    return statistics.median(ms), ms[int(0.95 * (len(ms) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", nargs="+", default=["uniform", "learning_progress"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    catalogs = {
        "configs/domains (1,040 arms)": load_catalog("configs/domains"),
        "synthetic 30x100x4 (12,000 arms)": Catalog.synthetic(30, 100, 4),
        "synthetic 30x100x4, separate tiers": Catalog.synthetic(30, 100, 4, tier_mode="separate"),
        "synthetic 100x250x4 (100,000 arms)": Catalog.synthetic(100, 250, 4),
    }
    print("| catalog | policy | weights every | median ms/step | p95 ms/step |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, catalog in catalogs.items():
        for policy in args.policies:
            for every in (1, 10):
                steps = args.steps if catalog.n_arms < 50_000 else max(20, args.steps // 5)
                med, p95 = measure(catalog, policy, args.batch, steps, every)
                print(f"| {name} | {policy} | {every} | {med:.2f} | {p95:.2f} |", flush=True)


if __name__ == "__main__":
    main()
