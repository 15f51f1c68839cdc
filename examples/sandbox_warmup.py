"""A sandbox pool that warms environments ahead of the draws, from ``Scheduler.demand``.

Starting a sandbox (a container, a VM, a simulator) takes far longer than running one
episode in a warm one, so a rollout fleet keeps a few environments warm. Which few? Every
``horizon`` steps this pool asks the scheduler for the expected demand over the next
``horizon`` steps (``sched.demand(horizon)``: no draw, the RNG untouched) and keeps the top
``k`` environments warm. It then counts, over the draws that actually followed, how many
tasks found their environment warm: the hit rate. Beside it run two pools without the hint:
one keeps the ``k`` environments with the most families warm for the whole run, the other
keeps warm the ``k`` that the previous window drew most (a pool that reacts to what it saw);
a pool that warms ``k`` environments at random each window (the floor); and the best any
choice could have done (the window's own top ``k``, known only afterwards).

    .venv/bin/python examples/sandbox_warmup.py --steps 300 --k 6

The scheduler trains the built-in simulated learner over configs/domains; the curriculum
moves its weights as families are learned, and the demand-driven pool follows them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from domains import load_catalog
from scheduler import Scheduler
from scheduler._demand import environment_of_family
from scheduler.backends import SimulatedLearner

ROOT = Path(__file__).resolve().parents[1]


class WarmPool:
    """Keeps ``k`` environments warm and counts hits: tasks whose environment was warm."""

    def __init__(self, names: tuple[str, ...], k: int) -> None:
        self.names = names
        self.k = k
        self.warm = np.zeros(len(names), dtype=bool)  # bool [n_environments]
        self.hits = 0
        self.tasks = 0
        self.starts = 0  # environments started (cold starts paid ahead of time)

    def keep(self, environments: list[str]) -> None:
        want = np.isin(np.array(self.names), environments)
        self.starts += int((want & ~self.warm).sum())
        self.warm = want

    def serve(self, env_of_task: np.ndarray) -> None:
        self.hits += int(self.warm[env_of_task].sum())
        self.tasks += int(env_of_task.shape[0])

    def names_warm(self) -> list[str]:
        return [n for n, w in zip(self.names, self.warm.tolist(), strict=True) if w]

    @property
    def hit_rate(self) -> float:
        return self.hits / max(self.tasks, 1)


def _top(counts: np.ndarray, names: tuple[str, ...], k: int) -> list[str]:
    return [names[i] for i in np.argsort(-counts, kind="stable")[:k]]


def run(
    steps: int = 300, k: int = 6, horizon: int = 20, batch: int = 128, seed: int = 0
) -> dict[str, float]:
    catalog = load_catalog(ROOT / "configs" / "domains")
    sched = Scheduler(catalog, policy="learning_progress", seed=seed)
    learner = SimulatedLearner(catalog, seed=seed)
    names, env_of_family = environment_of_family(catalog)
    demand_pool = WarmPool(names, k)
    static_pool = WarmPool(names, k)
    families_per_env = np.bincount(env_of_family, minlength=len(names))
    static_pool.keep(_top(families_per_env, names, k))
    reactive_pool = WarmPool(names, k)
    reactive_pool.keep(static_pool.names_warm())
    random_pool = WarmPool(names, k)
    pick = np.random.default_rng(seed + 1)
    best_hits = 0
    window = np.zeros(len(names))  # tasks per environment in the current window
    for step in range(steps):
        if step % horizon == 0:  # plan the next window from the expected demand
            demand_pool.keep([name for name, _ in sched.demand(horizon, batch).top_environments(k)])
            random_pool.keep([names[i] for i in pick.choice(len(names), k, replace=False)])
            if step:
                reactive_pool.keep(_top(window, names, k))
                best_hits += int(np.sort(window)[::-1][:k].sum())
            window[:] = 0
        drawn = sched.next_batch(batch)
        env = env_of_family[drawn.family]
        window += np.bincount(env, minlength=len(names))
        for pool in (demand_pool, static_pool, reactive_pool, random_pool):
            pool.serve(env)
        sched.report(drawn, learner.run(drawn))
    best_hits += int(np.sort(window)[::-1][:k].sum())
    return {
        "demand_hit_rate": demand_pool.hit_rate,
        "static_hit_rate": static_pool.hit_rate,
        "reactive_hit_rate": reactive_pool.hit_rate,
        "random_hit_rate": random_pool.hit_rate,
        "best_hit_rate": best_hits / max(demand_pool.tasks, 1),
        "demand_starts": float(demand_pool.starts),
        "environments": float(len(names)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--k", type=int, default=6, help="environments kept warm")
    parser.add_argument("--horizon", type=int, default=20, help="steps planned at a time")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = run(args.steps, args.k, args.horizon, args.batch, args.seed)
    print(
        f"{int(out['environments'])} environments, {args.k} kept warm, planned every "
        f"{args.horizon} steps over {args.steps} steps x {args.batch} tasks"
    )
    print(f"hit rate, warmed from sched.demand():      {out['demand_hit_rate']:.1%}")
    print(f"hit rate, the {args.k} largest kept warm:      {out['static_hit_rate']:.1%}")
    print(f"hit rate, last window's top {args.k} kept warm: {out['reactive_hit_rate']:.1%}")
    print(f"hit rate, {args.k} at random each window:      {out['random_hit_rate']:.1%}")
    print(f"hit rate at best (each window's own top {args.k}): {out['best_hit_rate']:.1%}")
    print(f"environments started ahead of time: {int(out['demand_starts'])}")


if __name__ == "__main__":
    main()
