"""The replicated scheduler over real gloo ranks on 127.0.0.1, launched by torchrun."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from domains import Catalog
from scheduler import ReportError, Scheduler
from scheduler.distributed import ReplicatedScheduler
from scheduler.store import open_store

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(out: Path, n: int, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(n),
        "--master_addr", "127.0.0.1", "--master_port", str(_port()), "--max-restarts", "0",
        str(HERE / "replica_worker.py"), "--out", str(out), *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def _results(out: Path, n: int) -> list[dict[str, Any]]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(n)]


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_replicas_stay_identical_over_300_steps_with_rank_dependent_outcomes(
    tmp_path: Path, world: int
) -> None:
    done = _launch(tmp_path, world, "--steps", "300")
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = _results(tmp_path, world)
    assert len({r["own"] for r in ranks}) == 1  # the state_dict is the same on every rank
    assert all(r["step"] == 300 and r["count"] == 300 * 30 for r in ranks)
    assert all(r["probed"] > 0 for r in ranks)  # rank 0's probes reached every replica
    for step in range(20):
        parts = [r["shards"][str(step)] for r in ranks]
        flat = sorted(i for p in parts for i in p)
        assert flat == list(range(30))  # disjoint, and together the whole batch
        assert all(len(p) in (30 // world, 30 // world + 1) for p in parts)


@pytest.mark.slow
def test_only_rank_0_writes_the_store_and_a_killed_rank_rejoins_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    whole = tmp_path / "whole"
    assert _launch(whole, 2, "--steps", "300", "--store", f"sqlite:///{whole}/s.db").returncode == 0
    reference = _results(whole, 2)[0]["own"]
    broken = tmp_path / "broken"
    url = f"sqlite:///{broken}/store.db"
    died = _launch(broken, 2, "--steps", "300", "--die-at", "170", "--store", url)
    assert died.returncode != 0  # rank 1 was killed; torchrun took the job down
    assert not (broken / "rank0.json").exists()
    again = _launch(broken, 2, "--steps", "300", "--resume", "--store", url)
    assert again.returncode == 0, again.stderr[-3000:]
    ranks = _results(broken, 2)
    # rank 0 restored the store's last checkpoint; rank 1 came back from another seed,
    # took rank 0's state, and both replayed to step 300: the uninterrupted run's state
    assert json.loads((broken / "restored-rank1.json").read_text()) == 149
    assert ranks[0]["own"] == ranks[1]["own"]
    assert ranks[0]["own"] == reference
    # only rank 0 ever built a recorder, and the store holds every outcome exactly once
    assert (broken / "recorder-rank0").exists() and not (broken / "recorder-rank1").exists()
    store = open_store(url)
    run = store.get_run("replicas")
    assert run is not None
    rows = store.outcomes(run.run_id)
    assert len(rows) == 300 * 30
    store.close()


def test_one_process_is_a_world_of_one() -> None:
    cat = Catalog.synthetic(2, 2, 2, pool_size=4)
    replica = ReplicatedScheduler(Scheduler(cat, "uniform", seed=0))
    plain = Scheduler(cat, "uniform", seed=0)
    for _ in range(5):
        shard = replica.next_shard(6)
        batch = plain.next_batch(6)
        np.testing.assert_array_equal(shard.batch.arm, batch.arm)
        assert shard.positions.tolist() == list(range(6))
        replica.report(shard, rewards=np.linspace(0, 1, 6))
        plain.report(batch, rewards=np.linspace(0, 1, 6))
    assert replica.verify() == replica.checksum()
    np.testing.assert_array_equal(replica.scheduler.stats.count, plain.stats.count)


def test_a_shard_report_of_the_wrong_length_is_refused_and_nothing_applied() -> None:
    cat = Catalog.synthetic(2, 2, 2, pool_size=4)
    replica = ReplicatedScheduler(Scheduler(cat, "uniform", seed=0))
    shard = replica.next_shard(6)
    before = replica.scheduler.stats.count.copy()
    with pytest.raises(ReportError, match="rank 0: rewards has the wrong length"):
        replica.report(shard, rewards=np.zeros(5))
    np.testing.assert_array_equal(replica.scheduler.stats.count, before)
    replica.report(shard, rewards=np.zeros(6))  # the batch still waits for a good report
    assert int(replica.scheduler.stats.count.sum()) == 6
