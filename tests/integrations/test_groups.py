"""Prompt groups folded into one report per task, and the stream's bookkeeping, without TRL."""

from __future__ import annotations

import numpy as np
import pytest

from domains import Catalog
from scheduler import ConfigError, RowIndex, Scheduler
from scheduler.integrations._groups import Completions, aggregate_groups
from scheduler.integrations._stream import CurriculumStream

NAN = float("nan")


def _completions(row: list[int], reward: list[float]) -> Completions:
    n = len(row)
    r = np.asarray(reward, dtype=np.float64)
    return Completions(
        row=np.asarray(row, dtype=np.int64),
        reward=r,
        success=(r >= 0.5).astype(np.float64),
        process=np.full(n, NAN),
        cost=np.arange(n, dtype=np.float64),
    )


def test_groups_carry_mean_success_spread_and_count_zero_variance() -> None:
    c = _completions([4, 4, 4, 4, 9, 9, 9, 9], [0.0, 1.0, 1.0, 0.0, 0.5, 0.5, 0.5, 0.5])
    g = aggregate_groups(c)
    assert g.row.tolist() == [4, 9]
    assert g.reward.tolist() == [0.5, 0.5]
    assert g.success.tolist() == [0.5, 1.0]
    assert g.spread.tolist() == [0.5, 0.0]
    assert g.zero_variance.tolist() == [False, True]  # the flat group gives GRPO nothing
    assert g.cost.tolist() == [1.5, 5.5]  # mean seconds per completion
    assert np.isnan(g.process).all()


def test_none_rewards_are_left_out_and_a_single_scored_completion_is_not_flat() -> None:
    g = aggregate_groups(_completions([1, 1, 1, 2, 2], [NAN, 0.2, NAN, NAN, NAN]))
    assert g.completions.tolist() == [3, 2] and g.scored.tolist() == [1, 0]
    assert g.reward[0] == pytest.approx(0.2) and np.isnan(g.reward[1])
    assert g.zero_variance.tolist() == [False, False]


def _stream() -> tuple[CurriculumStream, Catalog]:
    cat = Catalog.synthetic(1, 2, 2, pool_size=3)
    arm = np.repeat(np.arange(cat.n_arms), 3)
    rows = RowIndex.from_columns(
        cat, family=cat.family_of_arm[arm], tier=cat.tier_of_arm[arm], variant=np.tile([0, 1, 2], 4)
    )
    return CurriculumStream(Scheduler(cat, "uniform", seed=0), rows), cat


def test_a_round_without_any_scored_completion_reports_nothing_and_moves_on() -> None:
    stream, _ = _stream()
    batch = stream.next_block(2)
    rows = stream.index.rows(batch).tolist()
    stream.report_round(_completions([r for r in rows for _ in range(2)], [NAN] * 4))
    assert stream.reported == 1 and int(stream.scheduler.stats.count.sum()) == 0
    stream.next_block(2)  # the next blocks are not held up
    stream.next_block(2)


def test_the_stream_state_restores_pending_blocks_to_yield_them_again() -> None:
    stream, _ = _stream()
    first = stream.next_block(2)
    stream.report_round(
        _completions([r for r in stream.index.rows(first).tolist() for _ in range(2)], [1.0] * 4)
    )
    pending = stream.next_block(2)
    state = stream.state_dict()
    again, _ = _stream()
    again.load_state_dict(state)
    replayed = again.next_block(2)
    assert replayed.step == pending.step
    np.testing.assert_array_equal(replayed.arm, pending.arm)
    assert again.drawn == 2 and again.reported == 1
    with pytest.raises(ConfigError, match="unknown format"):
        again.load_state_dict({**state, "format": 99})
