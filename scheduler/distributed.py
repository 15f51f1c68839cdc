"""The scheduler over many ranks (torch.distributed): one identical replica per rank.

    import torch.distributed as dist
    from scheduler.distributed import ReplicatedScheduler

    dist.init_process_group("gloo")          # torchrun sets rank, world size, master
    replica = ReplicatedScheduler(Scheduler(catalog, seed=0), recorder=recorder)
    shard = replica.next_shard(256)          # the same global batch everywhere; my part
    replica.report(shard, rewards=r)         # gathered, then reported on every rank
    replica.verify()                         # checksums agree, or ConfigError

docs/deploy.md shows a two-node launch with a PostgreSQL store and an MLflow server.
"""

from .integrations._collective import all_gather, broadcast, rank_and_world, replicated_probe_round
from .integrations._distributed import ReplicatedScheduler, Shard

__all__ = [
    "ReplicatedScheduler",
    "Shard",
    "all_gather",
    "broadcast",
    "rank_and_world",
    "replicated_probe_round",
]
