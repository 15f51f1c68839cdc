"""One rank of a replicated scheduler run, launched by torchrun from test_distributed.py.

Outcomes depend on the rank (each rank's rollouts differ), yet every replica must end in
the same state. ``--die-at S`` makes rank 1 kill itself at step S; ``--resume`` restarts
from rank 0's last checkpoint, every rank taking rank 0's state."""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from domains import Catalog
from scheduler import RecordingConfig, RunRecorder, Scheduler, dumps_state, loads_state
from scheduler.distributed import ReplicatedScheduler
from scheduler.store import open_store


def outcomes(shard_arm: np.ndarray, shard_variant: np.ndarray, step: int, rank: int) -> np.ndarray:
    """Deterministic in (step, rank, task): a rerun of a step gives the same numbers."""
    rng = np.random.default_rng([step, rank])
    base = (shard_arm % 5) / 5.0 + 0.1 * rank
    noise = rng.random(shard_arm.shape[0]) * 0.1 + (shard_variant % 2) * 0.05
    return np.clip(base + noise, 0.0, 1.0)


def evaluate(families: np.ndarray, tiers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return ((families * 7 + tiers * 3) % 10) / 10.0, np.full(families.shape, 16)


def not_here(families: np.ndarray, tiers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    raise AssertionError("the probe evaluator ran on a rank other than 0")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=30)
    p.add_argument("--every", type=int, default=50)
    p.add_argument("--die-at", type=int, default=-1)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--store", default=None, help="a store URL: rank 0 records, checkpoints")
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cat = Catalog.synthetic(3, 4, 3, pool_size=8)
    # a restarted rank 1 starts from another seed: only the sync can make it agree
    seed = 0 if not (a.resume and rank == 1) else 99

    def recorder(sched: Scheduler) -> RunRecorder:
        (out / f"recorder-rank{rank}").touch()  # which ranks built one
        config = RecordingConfig(checkpoint_every=a.every, detail=False)
        return RunRecorder(sched, run_name="replicas", store=open_store(a.store), config=config)

    replica = ReplicatedScheduler(
        Scheduler(cat, "learning_progress", seed=seed),
        recorder=recorder if a.store else None,
    )
    ckpt = out / "rank0.ckpt"
    if a.store:
        restored = replica.open(resume=a.resume)
        (out / f"restored-rank{rank}.json").write_text(json.dumps(restored))
    elif a.resume:
        if rank == 0:
            replica.load_state_dict(loads_state(ckpt.read_bytes()))
        replica.sync_from(0)
    shards: dict[int, list[int]] = {}
    while replica.scheduler.step < a.steps:
        shard = replica.next_shard(a.batch)
        step = shard.batch.step
        if step == a.die_at and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        tasks = shard.tasks
        reward = outcomes(tasks.arm, tasks.variant, step, rank)
        replica.report(shard, rewards=reward, success=(reward > 0.5).astype(float))
        if step < 20:
            shards[step] = shard.positions.tolist()
        if rank == 0 and not a.store and (step + 1) % a.every == 0:
            tmp = ckpt.with_suffix(".tmp")
            tmp.write_bytes(dumps_state(replica.state_dict()))
            tmp.replace(ckpt)
        if step % 100 == 99:
            replica.verify()
        if step % 60 == 59:  # probes: evaluated on rank 0 only, replayed on the others
            replica.probe_round(evaluate if rank == 0 else not_here)
    result = {
        "checksum": replica.verify(),
        "own": replica.checksum(),
        "shards": shards,
        "step": replica.scheduler.step,
        "count": int(replica.scheduler.stats.count.sum()),
        "probed": int((replica.scheduler.stats.probe_n > 0).sum()),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    replica.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
