"""verl 0.7.1: the curriculum sampler through verl's own create_rl_sampler, loader and batch.

Runs inside the verl 0.7.1 environment (scripts/build_verl_envs.sh builds it;
tests/integrations/test_verl_envs.py runs this file there). Elsewhere it skips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

verl = pytest.importorskip("verl", reason="runs in the verl 0.7.1 env: scripts/build_verl_envs.sh")
if not verl.__version__.startswith("0.7"):
    pytest.skip(f"verl {verl.__version__} here; this file is for 0.7", allow_module_level=True)

import torch  # noqa: E402
import verl_fit  # noqa: E402

from scheduler import ConfigError  # noqa: E402

torch.set_num_threads(1)
B = 4  # prompts per step; the 20-row dataset is 5 steps an epoch


def _trainer(tmp: Path, **sampler: Any) -> Any:
    manifest, train, val = verl_fit.write_data(tmp)
    options = {
        "class_path": "pkg://scheduler.integrations.verl",
        "class_name": "CurriculumSampler",
        "manifests": str(manifest),
        **sampler,
    }
    return verl_fit.build_loader(verl_fit.data_config(train, val, B, sampler=options))


def _run(
    trainer: Any, steps: int, reward: verl_fit.RewardFn = verl_fit.default_reward, start: int = 0
) -> dict[str, Any]:
    """fit's loop: epochs over the loader, one update(batch=...) per step."""
    loader = trainer.train_dataloader
    sampler = loader.sampler
    sched = sampler.scheduler
    tok = trainer.tokenizer
    lm = verl_fit.model(len(tok))
    served: list[list[int]] = []
    expected = np.zeros(sched.catalog.n_families)
    drawn = np.zeros(sched.catalog.n_families)
    step = start
    ahead = sched.demand(1, B).family  # what the next draw should follow
    while step < start + steps:
        for batch_dict in loader:
            expected += ahead
            batch = sampler.feed.pending[sched.step - 1]  # the batch these rows came from
            rows = sampler.table.rows.rows(batch)
            served_rows = sampler.table.positions(verl_fit.served_index(batch_dict))
            np.testing.assert_array_equal(served_rows, rows)  # row i is the i-th task
            served.append(verl_fit.served_index(batch_dict))
            drawn += np.bincount(batch.family, minlength=drawn.size)
            data = verl_fit.fit_step(batch_dict, step, tok=tok, lm=lm, reward=reward)
            sampler.update(batch=data)
            step += 1
            ahead = sched.demand(1, B).family
            if step == start + steps:
                break
    return {"served": served, "expected": expected, "drawn": drawn}


def test_create_rl_sampler_loads_the_curriculum_sampler_from_data_sampler(tmp_path: Path) -> None:
    from verl.experimental.dataset.sampler import AbstractCurriculumSampler

    from scheduler.integrations.verl import CurriculumSampler

    trainer = _trainer(tmp_path, seed=3)
    sampler = trainer.train_dataloader.sampler
    assert isinstance(sampler, CurriculumSampler)
    assert isinstance(sampler, AbstractCurriculumSampler)
    assert len(trainer.train_dataloader) == 5
    assert sampler.scheduler.seed == 3


def test_a_bad_option_or_worker_count_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"data\.sampler\.tiers_field: unknown option"):
        _trainer(tmp_path, tiers_field="tier")
    manifest, train, val = verl_fit.write_data(tmp_path)
    config = verl_fit.data_config(
        train,
        val,
        B,
        dataloader_num_workers=2,
        sampler={
            "class_path": "pkg://scheduler.integrations.verl",
            "class_name": "CurriculumSampler",
            "manifests": str(manifest),
        },
    )
    with pytest.raises(AssertionError, match="num_workers must be 0"):
        verl_fit.build_loader(config)


def test_rewards_move_the_weights_and_the_draws_follow_them(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path / "a")
    sampler = trainer.train_dataloader.sampler
    sched = sampler.scheduler
    before = sched.weights().family.copy()
    out = _run(trainer, 30)
    cat = sched.catalog
    # every task of every step was reported once, as one group of n responses
    assert sched.stats.count.sum() == 30 * B
    assert sampler.stats.reported_batches == 30 and sampler.stats.missing_tasks == 0
    assert sampler.stats.lag_max == 0  # step k's report reached step k+1's draw
    assert sampler.stats.flat_groups > 0  # 'hard' never pays: no GRPO signal there
    easy0 = cat.arm_start[cat.family_id("easy")]
    hard = slice(cat.arm_start[cat.family_id("hard")], cat.arm_start[cat.family_id("hard") + 1])
    assert sched.stats.success_fast[easy0] > 0.8
    assert sched.stats.success_fast[hard].max() == 0.0
    after = sched.weights().family
    assert not np.allclose(before, after, atol=1e-3)
    # the same run with the rewards swapped ends with other weights
    swapped = _trainer(tmp_path / "b")
    _run(
        swapped,
        30,
        reward=lambda f, t, r: verl_fit.default_reward(
            {"easy": "hard", "hard": "easy"}.get(f, f), t, r
        ),
    )
    assert not np.allclose(
        swapped.train_dataloader.sampler.scheduler.weights().family, after, atol=1e-3
    )
    # what was drawn follows the weights in force at each draw
    e, d = out["expected"], out["drawn"]
    assert d.sum() == 30 * B and e.sum() == pytest.approx(30 * B)
    assert np.all(np.abs(d - e) <= 4 * np.sqrt(e) + 2), (d, e)


def test_a_resume_through_data_pt_reproduces_the_stream(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path / "a")
    _run(trainer, 3)
    torch.save(trainer.train_dataloader.state_dict(), tmp_path / "data.pt")  # as verl saves
    tail = _run(trainer, 6, start=3)["served"]  # crosses the epoch boundary at step 5
    fresh = _trainer(tmp_path / "b")
    state = torch.load(tmp_path / "data.pt", weights_only=False)  # as verl loads
    fresh.train_dataloader.load_state_dict(state)
    resumed = _run(fresh, 6, start=3)["served"]
    assert resumed == tail
    a = trainer.train_dataloader.sampler.scheduler
    b = fresh.train_dataloader.sampler.scheduler
    np.testing.assert_allclose(a.weights().family, b.weights().family)
