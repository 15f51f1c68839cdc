"""verl 0.9.1: the curriculum dataset through verl's own custom-class loading, loader and batch.

Runs inside the verl 0.9.1 environment (scripts/build_verl_envs.sh builds it;
tests/integrations/test_verl_envs.py runs this file there). Elsewhere it skips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

verl = pytest.importorskip("verl", reason="runs in the verl 0.9.1 env: scripts/build_verl_envs.sh")
if not verl.__version__.startswith(("0.8", "0.9")):
    pytest.skip(f"verl {verl.__version__} here; this file is for 0.8+", allow_module_level=True)

import torch  # noqa: E402
import verl_fit  # noqa: E402

from scheduler import ConfigError  # noqa: E402

torch.set_num_threads(1)
B = 4  # prompts per step; the 20-row dataset is 5 steps an epoch


def _trainer(tmp: Path, workers: int = 0, **curriculum: Any) -> Any:
    manifest, train, val = verl_fit.write_data(tmp)
    config = verl_fit.data_config(
        train,
        val,
        B,
        dataloader_num_workers=workers,
        custom_cls={"path": "pkg://scheduler.integrations.verl", "name": "CurriculumDataset"},
        curriculum={"manifests": str(manifest), **curriculum},
    )
    return verl_fit.build_loader(config)


def _run(
    trainer: Any,
    steps: int,
    reward: verl_fit.RewardFn = verl_fit.default_reward,
    start: int = 0,
    ahead: int = 0,
    drop_feedback: bool = False,
) -> dict[str, Any]:
    """fit's loop: epochs over the loader, on_batch_end(batch=...) after each step. With
    ``ahead`` = 1 the next batch is fetched before the last one's feedback, as an async
    rollout does; with ``drop_feedback`` no feedback arrives at all."""
    dataset = trainer.train_dataset
    feed = dataset.feed
    sched = feed.scheduler
    tok = trainer.tokenizer
    lm = verl_fit.model(len(tok))
    served: list[list[int]] = []
    expected = np.zeros(sched.catalog.n_families)
    drawn = np.zeros(sched.catalog.n_families)
    waiting: list[Any] = []
    step = start
    next_draw = sched.demand(1, B).family
    while step < start + steps:
        for batch_dict in trainer.train_dataloader:
            expected += next_draw
            batch = feed.pending[sched.step - 1]
            positions = feed.table.positions(verl_fit.served_index(batch_dict))
            np.testing.assert_array_equal(positions, feed.table.rows.rows(batch))
            served.append(verl_fit.served_index(batch_dict))
            drawn += np.bincount(batch.family, minlength=drawn.size)
            waiting.append(verl_fit.fit_step(batch_dict, step, tok=tok, lm=lm, reward=reward))
            while len(waiting) > ahead:
                data = waiting.pop(0)
                if not drop_feedback:
                    dataset.on_batch_end(batch=data)
            step += 1
            next_draw = sched.demand(1, B).family
            if step == start + steps:
                break
    return {"served": served, "expected": expected, "drawn": drawn}


def test_custom_cls_loads_the_curriculum_dataset_for_train_and_a_plain_one_for_val(
    tmp_path: Path,
) -> None:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from scheduler.integrations.verl import CurriculumDataset

    trainer = _trainer(tmp_path, seed=5)
    assert isinstance(trainer.train_dataset, CurriculumDataset)
    assert isinstance(trainer.train_dataset, RLHFDataset)
    assert trainer.train_dataset.feed is not None
    assert trainer.train_dataset.feed.scheduler.seed == 5
    assert isinstance(trainer.val_dataset, CurriculumDataset)
    assert trainer.val_dataset.feed is None  # validation rows come in the loader's order
    rows = [trainer.val_dataset[i]["extra_info"]["index"] for i in range(4)]
    assert rows == [1000, 1001, 1002, 1003]


def test_a_bad_option_or_worker_count_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"data\.curriculum\.max_lag: must be an integer"):
        _trainer(tmp_path / "a", max_lag=-1)
    with pytest.raises(ValueError, match="dataloader_num_workers: must be 0"):
        _trainer(tmp_path / "b", workers=2)


def test_rewards_move_the_weights_and_the_draws_follow_them(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path / "a")
    feed = trainer.train_dataset.feed
    sched = feed.scheduler
    before = sched.weights().family.copy()
    out = _run(trainer, 30)
    cat = sched.catalog
    assert sched.stats.count.sum() == 30 * B
    assert feed.stats.reported_batches == 30 and feed.stats.lag_max == 0
    easy0 = cat.arm_start[cat.family_id("easy")]
    hard = slice(cat.arm_start[cat.family_id("hard")], cat.arm_start[cat.family_id("hard") + 1])
    assert sched.stats.success_fast[easy0] > 0.8
    assert sched.stats.success_fast[hard].max() == 0.0
    after = sched.weights().family
    assert not np.allclose(before, after, atol=1e-3)
    swapped = _trainer(tmp_path / "b")
    swap = {"easy": "hard", "hard": "easy"}
    _run(swapped, 30, reward=lambda f, t, r: verl_fit.default_reward(swap.get(f, f), t, r))
    assert not np.allclose(swapped.train_dataset.feed.scheduler.weights().family, after, atol=1e-3)
    e, d = out["expected"], out["drawn"]
    assert d.sum() == pytest.approx(e.sum()) and d.sum() == 30 * B
    assert np.all(np.abs(d - e) <= 4 * np.sqrt(e) + 2), (d, e)


def test_a_trainer_running_one_step_ahead_lags_by_one_and_no_more(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path)
    feed = trainer.train_dataset.feed
    _run(trainer, 12, ahead=1)
    assert feed.stats.lag_max == 1 and feed.stats.lag_last == 1
    assert feed.stats.reported_batches == 11  # the last one is still in flight
    assert feed.stats.expired_batches == 0
    assert feed.scheduler.stats.count.sum() == 11 * B


def test_without_feedback_the_batches_waiting_stay_bounded(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, max_lag=2)
    feed = trainer.train_dataset.feed
    _run(trainer, 8, drop_feedback=True)
    assert len(feed.pending) == 3  # max_lag waiting, plus the one being served
    assert feed.stats.expired_batches == 5


def test_a_resume_through_data_pt_reproduces_the_stream(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path / "a")
    _run(trainer, 3)
    torch.save(trainer.train_dataloader.state_dict(), tmp_path / "data.pt")  # as verl saves
    tail = _run(trainer, 6, start=3)["served"]
    fresh = _trainer(tmp_path / "b")
    fresh.train_dataloader.load_state_dict(torch.load(tmp_path / "data.pt", weights_only=False))
    resumed = _run(fresh, 6, start=3)["served"]
    assert resumed == tail
    np.testing.assert_allclose(
        trainer.train_dataset.feed.scheduler.weights().family,
        fresh.train_dataset.feed.scheduler.weights().family,
    )
