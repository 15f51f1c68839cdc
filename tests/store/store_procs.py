"""Row builders and writer processes shared by the store tests.

Run as a script it is the crash-test writer: it resumes (or starts) a run, then writes one
step per transaction (outcomes + probe points + weights + an event + a checkpoint whose state
holds the step number) and prints each committed step, until killed or done.

    python store_procs.py URL RUN_NAME MAX_STEPS
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from domains import Catalog
from scheduler import Event, Status
from scheduler._serialize import dumps_state, loads_state
from scheduler.store import OutcomeRows, ProbePoints, open_store

CATALOG = Catalog.synthetic(n_domains=3, families_per_domain=4, n_tiers=3)
ROWS_PER_STEP = 48  # outcomes per step in the writer processes
PROBES_PER_STEP = CATALOG.n_families


def outcomes_for(step: int, n: int, *, tag: int = 0, seed: int = 0) -> OutcomeRows:
    """``n`` outcomes of one step; ``variant`` encodes (tag, step, i) so rows are traceable."""
    rng = np.random.default_rng([seed, tag, step])
    arm = rng.integers(0, CATALOG.n_arms, n)
    status = rng.choice(np.array([int(s) for s in Status]), n, p=[0.6, 0.3, 0.05, 0.05])
    process = rng.random(n)
    process[rng.random(n) < 0.3] = np.nan
    return OutcomeRows(
        step=np.full(n, step),
        arm=arm,
        family=CATALOG.family_of_arm[arm],
        tier=CATALOG.tier_of_arm[arm],
        variant=tag * 10_000_000 + step * 1000 + np.arange(n),
        reward=rng.normal(size=n),
        success=(rng.random(n) < 0.4).astype(np.float64),
        process=process,
        cost=rng.exponential(2.0, n),
        status=status,
        trajectory_uri=[f"s3://traj/{tag}/{step}/{i}" if i % 3 else None for i in range(n)],
    )


def probes_for(step: int, *, seed: int = 0) -> ProbePoints:
    """One probe point per family at ``step`` (tier = step % 3), with awkward floats."""
    rng = np.random.default_rng([seed, step, 7])
    k = CATALOG.n_families
    score = rng.random(k)
    score[0] = 1 / 3  # not representable exactly in float32: catches lossy columns
    return ProbePoints(
        family=np.arange(k),
        tier=np.full(k, step % 3),
        step=np.full(k, step),
        wall_time=1.7e9 + step + rng.random(k),
        score=score,
        n=rng.integers(1, 64, k),
        ci_low=score - rng.random(k) / 10,
        ci_high=score + rng.random(k) / 10,
        probe_version="v1",
    )


def write_steps(url: str, run_name: str, tag: int, steps: int, start: Any = None) -> int:
    """Spawn target: write ``steps`` steps of rows into an existing run; returns rows written.

    ``start`` is a multiprocessing Event to wait for, so all writers begin at once.
    """
    store = open_store(url)
    try:
        run = store.open_run(run_name, seed=0, config={}, catalog=CATALOG, resume=True)
        if start is not None:
            start.wait(60)
        for s in range(steps):
            step = tag * 100_000 + s
            store.write(
                run.run_id,
                outcomes=outcomes_for(step, 8, tag=tag),
                probe_points=probes_for(step),
                events=[Event(step, "tick", CATALOG.family_names[tag], payload={"tag": tag})],
                weights=(step, np.full(CATALOG.n_arms, tag + s / steps)),
            )
        return steps
    finally:
        store.close()


def crash_writer(url: str, run_name: str, max_steps: int) -> None:
    """Resume from the latest checkpoint and write one committed step at a time."""
    store = open_store(url)
    run = store.open_run(run_name, seed=0, config={"k": 1}, catalog=CATALOG, resume=True)
    latest = store.latest_checkpoint(run.run_id)
    start = 0
    if latest is not None:
        step, state = latest
        assert loads_state(state)["step"] == step
        store.truncate_after(run.run_id, step)  # the resume protocol; a no-op here
        start = step + 1
    print(f"start {start}", flush=True)
    weights = np.linspace(0.0, 1.0, CATALOG.n_arms)
    for step in range(start, max_steps):
        state = dumps_state({"step": step, "weights": weights * step, "pad": np.zeros(2000)})
        store.write(
            run.run_id,
            outcomes=outcomes_for(step, ROWS_PER_STEP),
            probe_points=probes_for(step),
            events=[Event(step, "step_done", None, payload={"step": step})],
            weights=(step, weights * step),
            checkpoint=(step, state),
        )
        print(step, flush=True)
    store.close()
    print("done", flush=True)


if __name__ == "__main__":
    crash_writer(sys.argv[1], sys.argv[2], int(sys.argv[3]))
