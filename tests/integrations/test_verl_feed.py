"""The verl feedback loop without verl: options, the dataset's rows, uid groups, matching."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from scheduler import ConfigError
from scheduler.integrations._verl_feed import CurriculumFeed, RowTable, VerlOptions, read_groups

MANIFEST = """\
version: 1
domains:
  - name: d
    families:
      - {name: a, environment: e1, verification: v, tiers: [lo, hi], variants: {count: 2}}
      - {name: b, environment: e2, verification: v, tiers: 1, variants: {count: 2}}
"""


class Frame:
    """The two columns of an RLHFDataset's dataframe the adapter reads."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.column_names = ["data_source", "extra_info"]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, column: str) -> list[Any]:
        return [r[column] for r in self.rows]


@dataclass
class Proto:
    """What the adapter reads of a DataProto."""

    batch: dict[str, torch.Tensor]
    non_tensor_batch: dict[str, np.ndarray]


def _rows() -> list[dict[str, Any]]:
    spec = [("a", "lo"), ("a", "lo"), ("a", "hi"), ("a", "hi"), ("b", 0), ("b", 0)]
    return [
        {"data_source": f, "extra_info": {"tier": t, "index": 100 + i}}
        for i, (f, t) in enumerate(spec)
    ]


def _feed(tmp_path: Path, **options: Any) -> CurriculumFeed:
    """A feed over the six-row dataset above, four tasks a step."""
    (tmp_path / "d.yaml").write_text(MANIFEST)
    opts = VerlOptions.from_config(
        {"manifests": str(tmp_path / "d.yaml"), **options}, {"train_batch_size": 4}, "data.sampler"
    )
    sched = opts.scheduler()
    return CurriculumFeed(sched, RowTable(sched.catalog, opts, Frame(_rows())), opts)


def _proto(feed: CurriculumFeed, rows: list[int], rewards: list[list[float]]) -> Proto:
    """One group of responses per served row, shuffled as balancing shuffles them."""
    uid, extra, score = [], [], []
    for g, (row, rs) in enumerate(zip(rows, rewards, strict=True)):
        for r in rs:
            uid.append(f"u{g}")
            extra.append({"index": 100 + row, "tier": 0})
            score.append([0.0, r])
    perm = np.random.default_rng(0).permutation(len(uid))
    return Proto(
        batch={"token_level_scores": torch.tensor(score)[perm]},
        non_tensor_batch={
            "uid": np.array(uid, dtype=object)[perm],
            "extra_info": np.array(extra, dtype=object)[perm],
        },
    )


def test_options_are_checked_as_a_whole_and_named_by_their_config_node() -> None:
    with pytest.raises(ConfigError) as err:
        VerlOptions.from_config({"tier": "x", "max_lag": -1}, {}, "data.curriculum")
    text = str(err.value)
    assert "data.curriculum.tier: unknown option" in text
    assert "data.curriculum.manifests: required" in text
    assert "data.curriculum.max_lag: must be an integer >= 0" in text
    assert "data.curriculum.batch_size: must be an integer >= 1, got None" in text
    opts = VerlOptions.from_config(
        {"manifests": "m.yaml", "class_path": "pkg://x", "class_name": "C"},
        {"gen_batch_size": 8, "train_batch_size": 4, "seed": 9},
        "data.sampler",
    )
    assert (opts.manifests, opts.batch_size, opts.seed) == (("m.yaml",), 8, 9)


def test_rows_that_name_no_family_or_tier_are_refused_with_row_and_field(tmp_path: Path) -> None:
    feed = _feed(tmp_path)
    rows = _rows()
    rows[1]["data_source"] = "nope"
    rows[4]["extra_info"]["tier"] = "hi"
    rows[5]["extra_info"]["index"] = "x"
    with pytest.raises(ConfigError) as err:
        RowTable(feed.scheduler.catalog, feed.options, Frame(rows))
    text = str(err.value)
    assert "row 1: data_source: unknown family 'nope'" in text
    assert "row 4: extra_info.tier: family 'b' has tiers ['t0']" in text
    assert "row 5: extra_info.index: must be an integer, got 'x'" in text
    rows = _rows()
    rows[3]["extra_info"]["index"] = 100
    with pytest.raises(ConfigError, match=r"extra_info\.index must be unique"):
        RowTable(feed.scheduler.catalog, feed.options, Frame(rows))


def test_groups_become_one_report_per_task_whatever_their_order(tmp_path: Path) -> None:
    feed = _feed(tmp_path)
    served = [feed.next_row() for _ in range(4)]
    batch = feed.pending[0]
    groups = read_groups(
        _proto(feed, served, [[1, 1], [0, 1], [0, 0], [1, 0]]), feed.table, feed.options
    )
    order = np.argsort(groups.position, kind="stable")
    assert sorted(groups.position.tolist()) == sorted(served)
    assert groups.size.tolist() == [2, 2, 2, 2]
    assert groups.flat.sum() == 2  # [1, 1] and [0, 0]
    assert np.isclose(groups.reward[order].sum(), 2.0)
    feed.report(_proto(feed, served, [[1, 1], [0, 1], [0, 0], [1, 0]]))
    assert feed.stats.reported_tasks == 4 and feed.stats.flat_groups == 2
    assert feed.scheduler.stats.count.sum() == 4
    got = np.bincount(batch.arm, minlength=feed.scheduler.catalog.n_arms)
    np.testing.assert_array_equal(feed.scheduler.stats.count, got)


def test_a_filtered_batch_reports_what_it_has_and_counts_the_rest(tmp_path: Path) -> None:
    feed = _feed(tmp_path)
    served = [feed.next_row() for _ in range(4)]
    feed.report(_proto(feed, served[:3], [[1, 0]] * 3))  # one group dropped (DAPO filter)
    assert feed.stats.missing_tasks == 1 and feed.scheduler.stats.count.sum() == 3
    assert not feed.pending


def test_a_batch_of_rows_never_served_is_an_error_naming_the_waiting_steps(
    tmp_path: Path,
) -> None:
    feed = _feed(tmp_path)
    served = [feed.next_row() for _ in range(4)]
    unserved = next(r for r in range(6) if r not in served)
    with pytest.raises(
        ConfigError, match=r"match no batch the curriculum drew \(waiting: steps \[0\]\)"
    ):
        feed.report(_proto(feed, [unserved], [[1, 1]]))
    assert feed.scheduler.stats.count.sum() == 0 and list(feed.pending) == [0]  # nothing applied


def test_the_feed_state_restores_the_stream_mid_batch(tmp_path: Path) -> None:
    a = _feed(tmp_path)
    for _ in range(6):  # one batch and half of the next
        a.next_row()
    b = _feed(tmp_path)
    b.load_state_dict(a.state_dict())
    assert list(b.pending) == list(a.pending) == [0, 1]
    assert [a.next_row() for _ in range(10)] == [b.next_row() for _ in range(10)]
    with pytest.raises(ConfigError, match="format"):
        b.load_state_dict({"format": 99})


def test_the_verl_module_imports_verl_only_when_a_name_is_read() -> None:
    import subprocess
    import sys

    code = (
        "import sys, scheduler.integrations.verl as v\n"
        "assert 'verl' not in sys.modules and 'torch' not in sys.modules, 'eager import'\n"
        "try:\n"
        "    v.CurriculumSampler\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "CurriculumSampler needs verl 0.5 to 0.7" in out.stdout
