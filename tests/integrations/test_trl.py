"""A real TRL GRPOTrainer on CPU with the curriculum as its sampler (nothing downloaded)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("trl", reason="the [trl] extra is not installed")

import torch
from integrations.trl_setup import Spied, blocks_of, example, repeat_shape
from trl.trainer.utils import RepeatSampler

from scheduler import ConfigError, Scheduler, dumps_state
from scheduler.integrations.trl import (
    Completions,
    GRPOCurriculum,
    aggregate_groups,
)

torch.set_num_threads(1)
G = 4  # num_generations in the example's config
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Spied:
    """Eight steps of the example, one rank: two prompts x four completions a block."""
    spied = Spied(str(tmp_path_factory.mktemp("grpo") / "run"), steps=8)
    spied.initial_weights = spied.scheduler.weights().family.copy()  # type: ignore[attr-defined]
    spied.trainer.train()
    return spied


def test_the_dataloader_pulled_a_repeat_sampler_shaped_stream(run: Spied) -> None:
    b = run.trainer.args.generation_batch_size // G
    assert b == 2
    blocks = blocks_of(run.curriculum, run.blocks)
    # the loader pulled every drawn block in full, in order, each row G times in a row
    assert run.pulled == [i for rows in blocks for i in repeat_shape(rows, G, 1)]
    assert len(blocks) == 9  # eight trained on, one prefetched
    ds = run.trainer.train_dataset
    sampler = run.curriculum.sampler(data_source=ds, mini_repeat_count=G, batch_size=b)
    reference = RepeatSampler(data_source=ds, mini_repeat_count=G, batch_size=b, seed=0)
    assert len(ds) == 200 and len(sampler) == len(reference) == 200 * G


def test_each_reward_call_saw_exactly_the_sampled_rows_num_generations_times(run: Spied) -> None:
    blocks = blocks_of(run.curriculum, run.blocks)
    assert len(run.reward_rows) == 8
    for k, rows in enumerate(run.reward_rows):
        assert sorted(rows) == sorted(repeat_shape(blocks[k], G, 1))


def test_the_scheduler_heard_every_group_and_its_weights_moved(run: Spied) -> None:
    sched = run.scheduler
    assert int(sched.stats.count.sum()) == 8 * 2  # one outcome per prompt group
    assert run.curriculum.stream.reported == 8
    assert not np.allclose(sched.weights().family, run.initial_weights)  # type: ignore[attr-defined]
    # the group statistics match the completions the reward calls returned
    groups = aggregate_groups(run.rounds[0])
    assert groups.completions.tolist() == [G, G]
    assert int(run.curriculum.stream.groups.sum()) == 16
    flat = sum(int(aggregate_groups(c).zero_variance.sum()) for c in run.rounds)
    assert int(run.curriculum.stream.zero_variance.sum()) == flat


def test_feedback_from_block_k_first_reaches_block_k_plus_2(run: Spied) -> None:
    stream = run.curriculum.stream
    # block j was drawn knowing the rewards of blocks 0..j-2: accelerate prefetches one
    assert stream.reports_at_draw == [0, 0, *range(1, 8)]
    assert stream.feedback_lag() == 2


def test_probes_run_from_the_callback_every_n_steps(run: Spied) -> None:
    rounds = run.trainer.curriculum_callback.probe_rounds
    assert [step for step, _ in rounds] == [4, 8]
    assert all(r.families.size > 0 for _, r in rounds)
    assert int((run.scheduler.stats.probe_n > 0).sum()) > 0


def test_a_fresh_sampler_fed_the_same_rewards_and_probes_at_the_same_points_yields_the_same_stream(
    run: Spied,
) -> None:
    ex = example()
    cat = ex.catalog()
    curriculum = GRPOCurriculum(Scheduler(cat, "learning_progress", seed=0))
    sampler = curriculum.sampler(data_source=ex.dataset(cat), mini_repeat_count=G, batch_size=2)
    at_draw = run.curriculum.stream.reports_at_draw
    pulled: list[int] = []
    block = 2 * G
    it = iter(sampler)
    for known in at_draw:  # before each block is drawn, the rewards it knew
        while curriculum.stream.reported < known:
            curriculum.report_completions(run.rounds[curriculum.stream.reported])
            if curriculum.stream.reported % 4 == 0:  # the callback's probe, after step 4 and 8
                curriculum.scheduler.probe_round(ex.probe_for(curriculum.scheduler))
        pulled += [next(it) for _ in range(block)]
    assert pulled == run.pulled


def test_resume_from_checkpoint_gives_the_uninterrupted_stream(tmp_path: Path) -> None:
    whole = Spied(str(tmp_path / "a"), steps=8, save_strategy="steps", save_steps=4)
    whole.trainer.train()
    assert (tmp_path / "a" / "checkpoint-4" / "curriculum_state.npz").is_file()
    resumed = Spied(str(tmp_path / "a"), steps=8, save_strategy="no")
    resumed.trainer.train(resume_from_checkpoint=str(tmp_path / "a" / "checkpoint-4"))
    per_block = 2 * G
    # blocks 0..3 were trained on before the checkpoint; block 4 was prefetched and is
    # yielded again first, then the run goes on as the uninterrupted one did
    assert resumed.pulled == whole.pulled[4 * per_block :]
    assert resumed.reward_rows == whole.reward_rows[4:]
    # the same completions were sampled: the trainer's RNG resumed where it was saved
    assert [c.reward.tolist() for c in resumed.rounds] == [
        c.reward.tolist() for c in whole.rounds[4:]
    ]
    a = whole.scheduler.state_dict()
    b = resumed.scheduler.state_dict()
    assert dumps_state(a) == dumps_state(b)


def test_with_steps_per_generation_2_each_block_repeats_and_feedback_lags_one_block(
    tmp_path: Path,
) -> None:
    spied = Spied(str(tmp_path / "r"), steps=8, steps_per_generation=2)
    spied.trainer.train()
    b = spied.trainer.args.generation_batch_size // G  # 16 completions a round: 4 prompts
    assert b == 4
    blocks = blocks_of(spied.curriculum, spied.blocks)
    shaped = [i for rows in blocks for i in repeat_shape(rows, G, 2)]
    # a loader item is half a block (16 of 32); eight items and the prefetched ninth
    assert len(spied.pulled) == 9 * 16 and spied.pulled == shaped[: 9 * 16]
    assert len(spied.reward_rows) == 4  # one generation round per two steps
    stream = spied.curriculum.stream
    # the prefetch of a block's first half comes after its predecessor's round: lag 1
    assert stream.reports_at_draw == [0, 1, 2, 3, 4]
    assert stream.feedback_lag() == 1


def test_evaluation_rounds_are_not_reported(tmp_path: Path) -> None:
    ex = example()
    spied = Spied(
        str(tmp_path / "e"),
        steps=4,
        eval_strategy="steps",
        eval_steps=2,
        per_device_eval_batch_size=8,
        eval_dataset=ex.dataset(ex.catalog(), rows=16, seed=1),
    )
    reward = spied.trainer.reward_funcs[0]
    calls = []
    inner = reward.fn
    reward.fn = lambda **kw: calls.append(len(kw["completions"])) or inner(**kw)
    spied.trainer.train()
    assert len(calls) > 4  # the evaluations called the reward function too ...
    assert spied.curriculum.stream.reported == 4  # ... but only training rounds were reported
    assert int(spied.scheduler.stats.count.sum()) == 4 * 2


@pytest.mark.slow
def test_the_example_runs_from_the_readme_in_under_a_minute() -> None:
    import time

    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "examples/grpo_curriculum.py", "--steps", "8"],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert "blocks drawn 9, reported 8" in done.stdout
    assert "feedback lag 2 blocks" in done.stdout
    assert took < 60, took


def test_resume_needs_the_curriculum_state_in_the_checkpoint(tmp_path: Path) -> None:
    spied = Spied(str(tmp_path / "b"), steps=2)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no curriculum state"):
        spied.trainer.train(resume_from_checkpoint=str(tmp_path / "empty"))


def test_a_trainer_that_never_reports_is_stopped_at_the_lag_bound(tmp_path: Path) -> None:
    ex = example()
    cat = ex.catalog()
    curriculum = GRPOCurriculum(Scheduler(cat, "uniform", seed=0))
    sampler = curriculum.sampler(data_source=ex.dataset(cat), mini_repeat_count=G, batch_size=2)
    it = iter(sampler)
    for _ in range(2 * 2 * G):  # two blocks may be out at once
        next(it)
    with pytest.raises(ConfigError, match="feedback lag: block 2 was asked for"):
        next(it)


def test_rewards_that_do_not_match_the_block_are_refused(tmp_path: Path) -> None:
    ex = example()
    cat = ex.catalog()
    curriculum = GRPOCurriculum(Scheduler(cat, "uniform", seed=0))
    sampler = curriculum.sampler(data_source=ex.dataset(cat), mini_repeat_count=G, batch_size=2)
    first = [next(iter(sampler)) for _ in range(1)]
    half = np.array(first * G, dtype=np.int64)  # one of the block's two rows
    ones = np.ones(half.shape[0])
    with pytest.raises(ConfigError, match="do not match its rows"):
        curriculum.report_completions(Completions(half, ones, ones, ones * np.nan, ones * np.nan))


def test_a_streaming_dataset_is_refused(tmp_path: Path) -> None:
    ex = example()
    trainer, curriculum = ex.build(str(tmp_path / "s"), 2)
    stream = ex.dataset(ex.catalog()).to_iterable_dataset()
    with pytest.raises(ConfigError, match="must be map-style"):
        type(trainer)(
            model=trainer.model,
            args=trainer.args,
            train_dataset=stream,
            processing_class=trainer.processing_class,
            reward_funcs=trainer.reward_funcs,
            curriculum=curriculum,
        )


def test_save_steps_inside_a_generation_round_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="falls inside a generation round"):
        Spied(
            str(tmp_path / "c"),
            steps=4,
            steps_per_generation=2,
            save_strategy="steps",
            save_steps=1,
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun(tmp_path: Path, gather: bool, steps: int = 8) -> list[dict[str, Any]]:
    out = tmp_path / ("gathered" if gather else "local")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        str(HERE / "trl_worker.py"),
        "--out",
        str(out),
        "--steps",
        str(steps),
        "--gather",
        "1" if gather else "0",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.slow
def test_under_torchrun_both_ranks_pull_identical_streams(tmp_path: Path) -> None:
    ranks = _torchrun(tmp_path, gather=True)
    assert ranks[0]["pulled"] == ranks[1]["pulled"]
    assert len(ranks[0]["pulled"]) == 9 * 4 * G  # 4 prompts a block over two ranks
    assert ranks[0]["checksum"] == ranks[1]["checksum"]
    assert ranks[0]["reported"] == ranks[1]["reported"] == 8
    # each rank's reward calls saw its own half of every block
    for k in range(8):
        both = sorted(ranks[0]["reward_rows"][k] + ranks[1]["reward_rows"][k])
        assert both == sorted(i for i in ranks[0]["pulled"][k * 4 * G : (k + 1) * 4 * G])


@pytest.mark.slow
def test_under_torchrun_without_the_gather_the_ranks_drift_apart(tmp_path: Path) -> None:
    ranks = _torchrun(tmp_path, gather=False, steps=24)
    # each rank heard only its own half of every block, so the replicas differ ...
    assert ranks[0]["checksum"] != ranks[1]["checksum"]
    # ... and so do the blocks they draw: the ranks no longer agree on what to train
    a, b = ranks[0]["pulled"], ranks[1]["pulled"]
    first = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    assert first >= 2 * 4 * G  # blocks 0 and 1 were drawn before any feedback
