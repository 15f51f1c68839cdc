"""Scheduler throughput: one step (next_batch + report) at several catalog sizes.

    .venv/bin/python bench/throughput.py          # the example catalog and two synthetic ones
    .venv/bin/python bench/throughput.py --policies uniform learning_progress --batch 256
    .venv/bin/python bench/throughput.py --probe-rounds 3   # also the cost of a probe round

Reports the median and p95 milliseconds per step over ``--steps`` steps after a warm-up, with
the weights recomputed every step (the default) and with ``weights_every=10``. With
``--probe-rounds``, also the mean milliseconds of recording one probe of every family (all
arms probed once before, so every reader of the probe bounds has every arm to read).
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


def probe_round_ms(catalog: Catalog, rounds: int) -> float:
    """Mean milliseconds of ``record_probes`` with one probe per family, after a first probe
    of every arm (that first one, which fills every per-arm cache, is not timed)."""
    sched = Scheduler(catalog, "uniform", seed=0)
    rng = np.random.default_rng(0)
    fam = catalog.family_of_arm
    n = np.full(catalog.n_arms, 32)
    sched.record_probes(fam, rng.random(fam.size), tiers=catalog.tier_of_arm, n=n, step=0)
    families = np.arange(catalog.n_families)
    start = time.perf_counter()
    for i in range(rounds):
        scores = rng.random(families.size)
        sched.record_probes(families, scores, n=n[: families.size], step=1 + i)
    return 1e3 * (time.perf_counter() - start) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", nargs="+", default=["uniform", "learning_progress"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--probe-rounds", type=int, default=0, help="time this many rounds")
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
    if args.probe_rounds > 0:
        print("\n| catalog | ms per probe round (one probe per family) |")
        print("| --- | ---: |")
        for name, catalog in catalogs.items():
            print(f"| {name} | {probe_round_ms(catalog, args.probe_rounds):.1f} |", flush=True)


if __name__ == "__main__":
    main()
