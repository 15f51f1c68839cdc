"""The scheduler as a torch DataLoader batch sampler in a plain training loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from domains import Catalog
from scheduler import (
    ConfigError,
    CurriculumBatchSampler,
    RowIndex,
    Scheduler,
    dumps_state,
    loads_state,
)

torch.set_num_threads(1)


class VariantTable(Dataset[dict[str, torch.Tensor]]):
    """One row per (family, tier, variant), shuffled so rows and arms do not line up."""

    def __init__(self, catalog: Catalog, seed: int = 0) -> None:
        arm = np.repeat(np.arange(catalog.n_arms), catalog.pool_size)
        variant = np.concatenate([np.arange(n) for n in catalog.pool_size.tolist()])
        order = np.random.default_rng(seed).permutation(arm.shape[0])
        self.arm, self.variant = arm[order], variant[order]
        self.family = catalog.family_of_arm[self.arm]
        self.tier = catalog.tier_of_arm[self.arm]
        self.names = [catalog.family_names[f] for f in self.family.tolist()]

    def __len__(self) -> int:
        return int(self.arm.shape[0])

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"arm": torch.tensor(self.arm[i]), "variant": torch.tensor(self.variant[i])}


def _setup() -> tuple[Catalog, VariantTable, RowIndex]:
    cat = Catalog.synthetic(2, 3, 2, pool_size=5)
    data = VariantTable(cat, seed=7)
    rows = RowIndex.from_columns(cat, family=data.names, tier=data.tier, variant=data.variant)
    return cat, data, rows


def test_loader_yields_the_rows_of_each_scheduled_batch_and_reports_back() -> None:
    cat, data, rows = _setup()
    sched = Scheduler(cat, "learning_progress", seed=1)
    sampler = CurriculumBatchSampler(sched, rows, batch_size=8, num_batches=12)
    loader = DataLoader(data, batch_sampler=sampler)
    seen = 0
    for item in loader:
        batch = sampler.take_batch()
        np.testing.assert_array_equal(item["arm"].numpy(), batch.arm)
        np.testing.assert_array_equal(item["variant"].numpy(), batch.variant)
        success = (item["arm"].numpy() % 2).astype(float)
        sched.report(batch, rewards=success, success=success)
        seen += 1
    assert seen == len(sampler) == 12
    assert sched.stats.count.sum() == 12 * 8
    assert len(list(iter(sampler))) == 12  # a new epoch


def test_sampler_resumes_exactly_mid_epoch() -> None:
    cat, _, rows = _setup()

    def drive(sampler: CurriculumBatchSampler, n: int) -> list[list[int]]:
        out = []
        it = iter(sampler)
        for _ in range(n):
            indices = next(it)
            batch = sampler.last_batch
            assert batch is not None
            sampler.scheduler.report(batch, rewards=np.ones(len(indices)))
            out.append(indices)
        return out

    first = CurriculumBatchSampler(Scheduler(cat, "uniform", seed=3), rows, batch_size=6,
                                   num_batches=10)  # fmt: skip
    drive(first, 4)
    saved = loads_state(dumps_state(first.state_dict()))
    rest = drive(first, 6)

    again = CurriculumBatchSampler(Scheduler(cat, "uniform", seed=0), rows, batch_size=6,
                                   num_batches=10)  # fmt: skip
    again.load_state_dict(saved)
    assert drive(again, 6) == rest


def test_row_index_rejects_a_dataset_that_does_not_cover_the_pools() -> None:
    cat, data, _ = _setup()
    with pytest.raises(ConfigError, match="rows for 59 of the catalog's 60"):
        RowIndex.from_columns(
            cat, family=data.names[1:], tier=data.tier[1:], variant=data.variant[1:]
        )
    with pytest.raises(ConfigError, match="several rows"):
        RowIndex.from_columns(
            cat,
            family=[*data.names, data.names[0]],
            tier=np.r_[data.tier, data.tier[0]],
            variant=np.r_[data.variant, data.variant[0]],
        )
    with pytest.raises(ConfigError, match="does not have"):
        RowIndex.from_columns(cat, family=data.family, tier=data.tier, variant=data.variant + 5)


def test_take_batch_pairs_items_with_batches_when_workers_prefetch() -> None:
    cat, data, rows = _setup()
    sched = Scheduler(cat, "uniform", seed=2)
    sampler = CurriculumBatchSampler(sched, rows, batch_size=5, num_batches=8)
    loader = DataLoader(data, batch_sampler=sampler, num_workers=2, prefetch_factor=2)
    for item in loader:
        batch = sampler.take_batch()
        np.testing.assert_array_equal(item["arm"].numpy(), batch.arm)
        sched.report(batch, rewards=np.zeros(len(batch)))
    with pytest.raises(LookupError):
        sampler.take_batch()
