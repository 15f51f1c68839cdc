"""Store speed: write 300 families x 1,000 probe points in step-sized batches, read curves.

Targets (issue 4): the writes in under 2 s on SQLite, one curve read in under 5 ms. Each
step is handed to a StepWriter; ``--commit-every N`` commits (with a checkpoint) every N steps.

    .venv/bin/python bench/store.py                       # SQLite in a temporary directory
    .venv/bin/python bench/store.py --url postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid

import numpy as np

from domains import Catalog
from scheduler.store import ProbePoints, StepWriter, open_store


def _step_points(step: int, n_families: int, rng: np.random.Generator) -> ProbePoints:
    families = np.arange(n_families, dtype=np.int64)
    score = rng.random(n_families)
    return ProbePoints(
        family=families,
        tier=np.zeros(n_families, np.int64),
        step=np.full(n_families, step, np.int64),
        wall_time=np.full(n_families, time.time()),
        score=score,
        n=np.full(n_families, 32, np.int64),
        ci_low=score - 0.1,
        ci_high=score + 0.1,
        probe_version="bench",
    )


def run(url: str, families: int, steps: int, reads: int, every: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    catalog = Catalog.synthetic(n_domains=families // 10, families_per_domain=10, n_tiers=1)
    store = open_store(url)
    try:
        run = store.open_run(f"bench-{uuid.uuid4().hex[:8]}", seed=0, config={}, catalog=catalog)
        batches = [_step_points(s, catalog.n_families, rng) for s in range(steps)]
        writer = StepWriter(store, run.run_id, every_steps=every)
        state = b"\0" * 4096  # stands in for a small checkpoint
        t0 = time.perf_counter()
        for step, points in enumerate(batches):  # one write per step, committed every `every`
            writer.step(step, lambda: state, probe_points=points)
        if writer.pending_steps:
            writer.commit(steps - 1, state)
        write_s = time.perf_counter() - t0
        times = []
        for i in range(reads):
            t1 = time.perf_counter()
            curve = store.probe_curve(run.run_id, i % catalog.n_families, tier=0)
            times.append(time.perf_counter() - t1)
            assert len(curve) == steps
        return {
            "points": float(steps * catalog.n_families),
            "commit_every_steps": float(every),
            "commits": float(writer.commits),
            "write_s": write_s,
            "points_per_s": steps * catalog.n_families / write_s,
            "curve_read_median_ms": 1e3 * statistics.median(times),
            "curve_read_p95_ms": 1e3 * float(np.percentile(times, 95)),
        }
    finally:
        store.close()


def simulate_overhead(
    url: str, steps: int, every: int, background: bool = True
) -> dict[str, float]:
    """Store cost inside the main job: the same simulate run with and without the store.

    Both runs go through ``RunRecorder`` (a listener on the scheduler) exactly as
    ``curriculum simulate`` does (tracking off), so the difference is what the store costs
    the training thread: buffering rows, serialising checkpoints, and handing commits to the
    background writer. The runs alternate twice and the faster of each is kept, to damp a
    busy machine.
    """
    from domains import load_catalog
    from scheduler import RecordingConfig, RunRecorder, Settings, SimulationRun

    settings = Settings(steps=steps)
    catalog = load_catalog(*settings.domains)

    def one(with_store: bool, bg: bool = True) -> tuple[float, float]:
        sim = SimulationRun(catalog, settings)
        store = open_store(url) if with_store else None
        recorder = RunRecorder(
            sim.scheduler,
            run_name=f"sim-{uuid.uuid4().hex[:8]}",
            store=store,
            config=RecordingConfig(checkpoint_every=every, detail=False, background_commits=bg),
            state=sim.state_dict,
            load_state=sim.load_state_dict,
        )
        recorder.open()
        t0 = time.perf_counter()
        while sim.step < steps:
            sim.advance()  # the recorder hears each report and probe round itself
        recorder.close()
        elapsed = time.perf_counter() - t0
        if store is not None:
            store.close()
        return elapsed, recorder.store_s

    plain_s = min(one(False)[0], one(False)[0])
    runs = [one(True, background), one(True, background)]
    store_s, in_store = min(runs)
    return {
        "simulate_steps": float(steps),
        "batch_size": float(settings.batch_size),
        "commit_every_steps": float(every),
        "background_commits": float(background),
        "plain_s": plain_s,
        "with_store_s": store_s,
        "store_ms_per_step": 1e3 * in_store / steps,
        # Both ways: the store's own time on the training thread against the run (robust to
        # a busy machine), and the wall-clock difference against a plain run (noisier).
        "overhead_pct_same_run": 100.0 * in_store / (store_s - in_store),
        "overhead_pct_vs_plain": 100.0 * (store_s / plain_s - 1.0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="store URL (default: SQLite in a temp dir)")
    parser.add_argument("--families", type=int, default=300)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--reads", type=int, default=100)
    parser.add_argument(
        "--commit-every", type=int, default=1, help="steps per transaction (1: every step)"
    )
    parser.add_argument(
        "--foreground-commits",
        action="store_true",
        help="with --simulate: run the store transactions on the training thread",
    )
    parser.add_argument(
        "--simulate",
        type=int,
        default=0,
        metavar="STEPS",
        help="instead: time a simulate run of STEPS steps with and without the store",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{os.path.join(tmp, 'bench.db')}"
        if args.simulate:
            result = simulate_overhead(
                url, args.simulate, args.commit_every, not args.foreground_commits
            )
        else:
            result = run(url, args.families, args.steps, args.reads, args.commit_every)
    print(json.dumps({"url": url.split("@")[-1], **result}, indent=2))


if __name__ == "__main__":
    main()
