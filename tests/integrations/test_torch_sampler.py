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
    DatasetColumns,
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


def test_row_index_rejects_repeated_rows_and_a_family_tier_without_rows() -> None:
    cat, data, _ = _setup()
    with pytest.raises(ConfigError, match=r"rows 0 and 60 both hold"):
        RowIndex.from_columns(
            cat,
            family=[*data.names, data.names[0]],
            tier=np.r_[data.tier, data.tier[0]],
            variant=np.r_[data.variant, data.variant[0]],
        )
    keep = ~((data.family == 1) & (data.tier == 1))
    with pytest.raises(ConfigError, match=r"'domain_0.family_1' tier 1 has no row"):
        RowIndex.from_columns(
            cat,
            family=[n for n, k in zip(data.names, keep, strict=True) if k],
            tier=data.tier[keep],
            variant=data.variant[keep],
        )


def test_bad_rows_raise_the_projects_error_naming_row_and_column() -> None:
    cat, data, _ = _setup()
    names = list(data.names)
    names[3] = "no_such_family"
    tier = data.tier.copy()
    tier[7] = 9
    variant = data.variant.copy()
    variant[11] = 5
    with pytest.raises(ConfigError) as err:
        RowIndex.from_columns(
            cat, family=names, tier=tier, variant=variant, columns=DatasetColumns(tier="level")
        )
    text = str(err.value)
    assert "row 3, column 'family': unknown family 'no_such_family'" in text
    assert "row 7, column 'level': family" in text and "got 9" in text
    assert "row 11, column 'variant'" in text and "got 5" in text
    with pytest.raises(ConfigError, match=r"row 2, column 'tier': must be an integer"):
        RowIndex.from_columns(cat, family=names[:3], tier=[0, 1, "x"], variant=[0, 0, 0])


def test_a_partial_pool_is_the_rows_a_family_tier_has() -> None:
    cat = Catalog.synthetic(1, 2, 2, pool_size=8)
    # arm 0 has variants 2 and 5 only; the others have 0..7
    arm = np.r_[[0, 0], np.repeat([1, 2, 3], 8)]
    variant = np.r_[[5, 2], np.tile(np.arange(8), 3)]
    rows = RowIndex.from_columns(
        cat,
        family=cat.family_of_arm[arm],
        tier=cat.tier_of_arm[arm],
        variant=variant,
    )
    assert rows.rows_per_arm.tolist() == [2, 8, 8, 8]
    sched = Scheduler(cat, "uniform", seed=0)
    drawn = []
    for _ in range(40):
        batch = sched.next_batch(8)
        got = rows.rows(batch)
        np.testing.assert_array_equal(arm[got], batch.arm)
        full = batch.arm != 0
        np.testing.assert_array_equal(variant[got][full], batch.variant[full])
        drawn += got[~full].tolist()
        sched.report(batch, rewards=np.zeros(8))
    assert set(drawn) == {0, 1}  # both rows of the partial pool, and nothing else
    assert rows.lookup(np.array([0, 0, 1]), np.array([5, 3, 7])).tolist() == [0, -1, 9]


def test_stateful_dataloader_resumes_the_batch_sampler_mid_epoch() -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    cat, data, rows = _setup()

    def loader(seed: int) -> tuple[StatefulDataLoader, CurriculumBatchSampler]:
        sampler = CurriculumBatchSampler(
            Scheduler(cat, "learning_progress", seed=seed), rows, batch_size=6, num_batches=10
        )
        return StatefulDataLoader(data, batch_sampler=sampler), sampler

    def run(dl: StatefulDataLoader, sampler: CurriculumBatchSampler, n: int) -> list[list[int]]:
        seen = []
        it = iter(dl)
        for _ in range(n):
            item = next(it)
            batch = sampler.take_batch()
            seen.append(item["arm"].tolist())
            sampler.scheduler.report(batch, rewards=(item["arm"].numpy() % 3 == 0) * 1.0)
        return seen

    dl, sampler = loader(seed=3)
    first = run(dl, sampler, 4)
    saved = loads_state(dumps_state(dl.state_dict()["_index_sampler_state"]))
    state = dl.state_dict()
    rest = run(dl, sampler, 6)
    assert len(first + rest) == 10
    dl2, sampler2 = loader(seed=0)  # another seed: everything comes from the checkpoint
    dl2.load_state_dict(state)
    assert saved["yielded"] == 4
    assert run(dl2, sampler2, 6) == rest


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
