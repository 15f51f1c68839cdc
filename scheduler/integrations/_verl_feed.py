"""What both verl hooks share: the options, the dataset's rows, and the feedback loop.

verl hands its curriculum hook two things: the training dataset (an ``RLHFDataset``, whose
``dataframe`` holds the parquet columns) and, once per step, the trained batch as a
``DataProto``. This module turns the first into a :class:`~scheduler.RowIndex` and the second
into one report per task. It imports neither verl nor torch: the batch is read by duck typing
(``batch["token_level_scores"]``, ``non_tensor_batch["uid"]`` and ``["extra_info"]``), so one
loop serves verl 0.7's sampler and verl 0.8+'s dataset.

One task is one prompt row. verl repeats it ``rollout.n`` times under one ``uid`` and shuffles
the rows to balance the ranks; the group's responses become one report: the mean sequence
reward (``token_level_scores.sum(-1)``), the share of responses at or above the success
threshold, and whether the group had any spread at all (a flat group carries no GRPO signal;
they are counted, DAPO style). The group's row comes from ``extra_info[index]``, since verl
only fills the batch's ``index`` key when a reward model runs.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog, load_catalog

from .._batch import Batch, Outcome
from .._errors import ConfigError
from .._scheduler import Scheduler
from .._serialize import dumps_state, loads_state
from .._variants import occurrence_rank
from ._rows import RowIndex

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
FEED_FORMAT = 1


@dataclass(frozen=True)
class VerlOptions:
    """The curriculum's settings, read from verl's data config (``+data.sampler.<key>`` for
    verl 0.7, ``+data.curriculum.<key>`` for verl 0.8+)."""

    manifests: tuple[str, ...]  # domain manifests: files, directories or globs
    policy: str | None = None  # a registered policy; None: the scheduler's default
    seed: int = 0
    family_field: str | None = None  # extra_info key of the family; None: data_source
    tier_field: str = "tier"  # extra_info key of the tier (an id or a tier name)
    variant_field: str = "variant"  # extra_info key of the variant id; absent: row order
    index_field: str = "index"  # extra_info key that names the row in the batch
    success_threshold: float | None = None  # None: the family's reward_range high
    batch_size: int | None = None  # None: data.gen_batch_size or data.train_batch_size
    max_lag: int = 2  # batches drawn ahead of their feedback, at most (older ones expire)
    policy_options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, options: Mapping[str, Any], data_config: Any, where: str) -> VerlOptions:
        """Validate ``options`` (a plain mapping) as a whole; ``where`` names the config
        node in every error (``data.sampler``)."""
        names = {f.name for f in fields(cls)}
        known = names | {"class_path", "class_name"}  # verl's own keys of data.sampler
        problems = [
            f"{where}.{key}: unknown option (known: {', '.join(sorted(names))})"
            for key in options
            if key not in known
        ]
        manifests = options.get("manifests")
        if isinstance(manifests, str):
            manifests = (manifests,)
        if not manifests or not all(isinstance(m, str) for m in manifests):
            problems.append(f"{where}.manifests: required, a path or a list of paths")
            manifests = ()
        values: dict[str, Any] = {k: v for k, v in options.items() if k in names}
        values["manifests"] = tuple(manifests)
        if values.get("batch_size") is None:
            size = _get(data_config, "gen_batch_size") or _get(data_config, "train_batch_size")
            values["batch_size"] = size
        if values.get("seed") is None:
            values["seed"] = _get(data_config, "seed") or 0
        for name, low in (("seed", 0), ("batch_size", 1), ("max_lag", 0)):
            value = values.get(name, low)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                problems.append(f"{where}.{name}: must be an integer >= {low}, got {value!r}")
        threshold = values.get("success_threshold")
        if threshold is not None and not isinstance(threshold, int | float):
            problems.append(f"{where}.success_threshold: must be a number, got {threshold!r}")
        if problems:
            raise ConfigError("; ".join(problems))
        values["policy_options"] = dict(values.get("policy_options") or {})
        return cls(**values)

    def scheduler(self) -> Scheduler:
        catalog = load_catalog(*self.manifests)
        if self.policy is None:
            return Scheduler(catalog, seed=self.seed, **self.policy_options)
        return Scheduler(catalog, policy=self.policy, seed=self.seed, **self.policy_options)


def _get(config: Any, key: str) -> Any:
    getter = getattr(config, "get", None)
    return getter(key, None) if callable(getter) else None


def plain(node: Any) -> dict[str, Any]:
    """A DictConfig (or any mapping) as a plain dict; verl always brings omegaconf."""
    if node is None:
        return {}
    from omegaconf import OmegaConf

    if OmegaConf.is_config(node):
        result = OmegaConf.to_container(node, resolve=True)
        assert isinstance(result, dict)
        return {str(k): v for k, v in result.items()}
    return dict(node)


class RowTable:
    """The dataset's rows as (arm, variant), read once from its columns."""

    def __init__(self, catalog: Catalog, options: VerlOptions, dataframe: Any) -> None:
        n = len(dataframe)
        sources = list(dataframe["data_source"]) if "data_source" in dataframe.column_names else []
        extra: Sequence[Mapping[str, Any] | None] = (
            list(dataframe["extra_info"]) if "extra_info" in dataframe.column_names else [None] * n
        )
        family: list[str] = []
        tier = np.zeros(n, dtype=np.int64)
        variant = np.full(n, -1, dtype=np.int64)
        index = np.zeros(n, dtype=np.int64)
        problems: list[str] = []
        for i in range(n):  # once, at start-up: the columns are Python objects
            info = extra[i] or {}
            if options.family_field is None:
                name = sources[i] if sources else None
                label = "data_source"
            else:
                name, label = info.get(options.family_field), f"extra_info.{options.family_field}"
            if not isinstance(name, str) or name not in catalog.family_names:
                problems.append(f"row {i}: {label}: unknown family {name!r}")
                family.append(catalog.family_names[0])
                continue
            family.append(name)
            raw_tier = info.get(options.tier_field, 0)
            names = catalog.tier_names[catalog.family_id(name)]
            if isinstance(raw_tier, str) and raw_tier in names:
                tier[i] = names.index(raw_tier)
            elif isinstance(raw_tier, int | np.integer) and 0 <= raw_tier < len(names):
                tier[i] = int(raw_tier)
            else:
                problems.append(
                    f"row {i}: extra_info.{options.tier_field}: family {name!r} has tiers "
                    f"{list(names)} (or ids 0..{len(names) - 1}), got {raw_tier!r}"
                )
            raw_index = info.get(options.index_field)
            if not isinstance(raw_index, int | np.integer):
                problems.append(
                    f"row {i}: extra_info.{options.index_field}: must be an integer, got "
                    f"{raw_index!r}"
                )
            else:
                index[i] = int(raw_index)
            if options.variant_field in info:
                variant[i] = int(info[options.variant_field])
            if len(problems) >= 10:
                problems.append("... (first 10 problems)")
                break
        if problems:
            raise ConfigError("verl dataset: " + "; ".join(problems))
        fam = np.array([catalog.family_id(f) for f in family], dtype=np.int64)
        arm = catalog.arm_start[fam] + tier
        if (variant < 0).any():  # no variant ids: number each (family, tier)'s rows in order
            if (variant >= 0).any():
                raise ConfigError(
                    f"verl dataset: extra_info.{options.variant_field} is set on some rows only"
                )
            variant = occurrence_rank(arm)
        unique, counts = np.unique(index, return_counts=True)
        if (counts > 1).any():
            raise ConfigError(
                f"verl dataset: extra_info.{options.index_field} must be unique per row; "
                f"{int(unique[counts > 1][0])} appears {int(counts.max())} times"
            )
        self.catalog = catalog
        self.rows = RowIndex.from_columns(catalog, family=fam, tier=tier, variant=variant)
        self.arm: IntArray = arm  # int64 [n_rows]
        self.variant: IntArray = variant  # int64 [n_rows]
        order = np.argsort(index)
        self._index_sorted = index[order]  # int64 [n_rows], extra_info index, sorted
        self._position = order.astype(np.int64)  # dataset position of each sorted index

    def positions(self, index: npt.ArrayLike) -> IntArray:
        """Dataset positions of ``extra_info[index]`` values (ConfigError if unknown)."""
        idx = np.asarray(index, dtype=np.int64)
        at = np.clip(np.searchsorted(self._index_sorted, idx), 0, self._index_sorted.size - 1)
        bad = self._index_sorted[at] != idx
        if bad.any():
            raise ConfigError(
                f"verl batch: extra_info index {int(idx[bad][0])} is not a row of the dataset"
            )
        result: IntArray = self._position[at]
        return result


@dataclass(frozen=True, eq=False)
class GroupReport:
    """One verl batch read as one row per uid group."""

    position: IntArray  # int64 [g], dataset position of the group's prompt
    reward: FloatArray  # float64 [g], mean sequence reward
    success: FloatArray  # float64 [g], share of responses at or above the threshold
    flat: npt.NDArray[np.bool_]  # bool [g], every response scored the same
    size: IntArray  # int64 [g], responses in the group


def read_groups(batch: Any, table: RowTable, options: VerlOptions) -> GroupReport:
    """Aggregate a DataProto's responses by ``uid``, whatever order balancing left them in."""
    scores = batch.batch["token_level_scores"].sum(-1).detach().to("cpu").double().numpy()
    uid = np.asarray(batch.non_tensor_batch["uid"]).astype(str)
    extra = batch.non_tensor_batch["extra_info"]
    groups, first, inverse = np.unique(uid, return_index=True, return_inverse=True)
    g = groups.shape[0]
    index = np.array(
        [int((extra[i] or {}).get(options.index_field, -1)) for i in first.tolist()],
        dtype=np.int64,
    )  # one dict read per group
    position = table.positions(index)
    family = table.catalog.family_of_arm[table.arm[position]]
    if options.success_threshold is None:
        threshold = table.catalog.reward_high[family][inverse]
    else:
        threshold = np.full(uid.shape[0], float(options.success_threshold))
    size = np.bincount(inverse, minlength=g)
    reward = np.bincount(inverse, weights=scores, minlength=g) / size
    success = np.bincount(inverse, weights=scores >= threshold - 1e-9, minlength=g) / size
    low = np.full(g, np.inf)
    high = np.full(g, -np.inf)
    np.minimum.at(low, inverse, scores)
    np.maximum.at(high, inverse, scores)
    return GroupReport(position, reward, success, high - low <= 1e-12, size.astype(np.int64))


@dataclass
class FeedStats:
    """What the feedback loop saw: counts, and the lag between a draw and its report."""

    reported_batches: int = 0
    reported_tasks: int = 0
    missing_tasks: int = 0  # drawn, but absent from their batch's report (filtered groups)
    expired_batches: int = 0  # drawn, never reported within max_lag
    flat_groups: int = 0  # groups whose responses all scored the same (no GRPO signal)
    lag_last: int = -1  # batches drawn after the last reported one, before its report
    lag_max: int = -1

    def as_dict(self) -> dict[str, int]:
        return {f.name: int(getattr(self, f.name)) for f in fields(self)}


class CurriculumFeed:
    """Draws the scheduler's batches as dataset rows and reports verl's batches back.

    ``next_row()`` serves the scheduler's tasks one at a time, drawing a batch of
    ``batch_size`` when the previous one is used up; ``report(data)`` matches a DataProto's
    uid groups to the batch they were drawn in and reports them. At most ``max_lag`` batches
    wait for feedback; an older one expires (logged and counted)."""

    def __init__(self, scheduler: Scheduler, table: RowTable, options: VerlOptions) -> None:
        assert options.batch_size is not None
        self.scheduler = scheduler
        self.table = table
        self.options = options
        self.batch_size = int(options.batch_size)
        self.pending: OrderedDict[int, Batch] = OrderedDict()  # step -> batch, unreported
        self.stats = FeedStats()
        self._rows: IntArray = np.zeros(0, dtype=np.int64)  # rows of the batch being served
        self._offset = 0  # rows of it served so far

    def next_row(self) -> int:
        if self._offset >= self._rows.shape[0]:
            self._draw()
        row = int(self._rows[self._offset])
        self._offset += 1
        return row

    def _draw(self) -> None:
        while len(self.pending) > self.options.max_lag:
            step, _ = self.pending.popitem(last=False)
            self.stats.expired_batches += 1
            log.warning(
                "verl curriculum: batch %d got no feedback within %d batches; its tasks are "
                "not reported (raise max_lag if the trainer runs further ahead)",
                step,
                self.options.max_lag,
            )
        batch = self.scheduler.next_batch(self.batch_size)
        self.pending[batch.step] = batch
        self._rows = self.table.rows.rows(batch)
        self._offset = 0

    def report(self, data: Any) -> None:
        """Report a trained DataProto: one outcome per uid group, matched to its batch."""
        groups = read_groups(data, self.table, self.options)
        step, task = self._match(groups.position)
        batch = self.pending.pop(step)
        sched = self.scheduler
        self.stats.lag_last = sched.step - 1 - step
        self.stats.lag_max = max(self.stats.lag_max, self.stats.lag_last)
        self.stats.reported_batches += 1
        self.stats.reported_tasks += int(task.shape[0])
        self.stats.flat_groups += int(groups.flat.sum())
        if task.shape[0] == len(batch):  # the whole batch came back: report it as one
            reward = np.empty(len(batch))
            success = np.empty(len(batch))
            reward[task] = groups.reward
            success[task] = groups.success
            sched.report(batch, rewards=reward, success=success)
            return
        self.stats.missing_tasks += len(batch) - int(task.shape[0])
        outcomes = [
            Outcome(arm=int(a), variant=int(v), reward=float(r), success=float(s))
            for a, v, r, s in zip(
                batch.arm[task].tolist(),
                batch.variant[task].tolist(),
                groups.reward.tolist(),
                groups.success.tolist(),
                strict=True,
            )
        ]
        sched.report(outcomes)

    def _match(self, position: IntArray) -> tuple[int, IntArray]:
        """The pending batch these rows were drawn in (oldest first), and the task of each
        row within it (repeated rows are paired in order)."""
        for step, batch in self.pending.items():
            rows = self.table.rows.rows(batch)
            stride = len(batch) + 1
            have = rows * stride + occurrence_rank(rows)
            want = position * stride + occurrence_rank(position)
            order = np.argsort(have)
            at = np.clip(np.searchsorted(have[order], want), 0, have.shape[0] - 1)
            if want.shape[0] <= have.shape[0] and np.array_equal(have[order][at], want):
                return step, order[at].astype(np.int64)
        waiting = list(self.pending)
        raise ConfigError(
            f"verl batch: its {position.shape[0]} prompt groups match no batch the curriculum "
            f"drew (waiting: steps {waiting}); the trainer must train on the rows the sampler "
            "served, with extra_info.index naming each row"
        )

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {
            "format": FEED_FORMAT,
            "scheduler": dumps_state(self.scheduler.state_dict()),
            "rows": self._rows.copy(),
            "offset": self._offset,
            "pending": [
                {
                    "step": b.step,
                    "arm": b.arm.copy(),
                    "family": b.family.copy(),
                    "tier": b.tier.copy(),
                    "variant": b.variant.copy(),
                    "attempt": None if b.attempt is None else b.attempt.copy(),
                    "token": int(b.token),
                }
                for b in self.pending.values()
            ],
            "stats": self.stats.as_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or state.get("format") != FEED_FORMAT:
            got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
            raise ConfigError(f"verl curriculum checkpoint: format {got!r}, expected {FEED_FORMAT}")
        self.scheduler.load_state_dict(loads_state(state["scheduler"]))
        cat = self.scheduler.catalog
        self.pending = OrderedDict(
            (
                int(p["step"]),
                Batch(
                    step=int(p["step"]),
                    arm=np.asarray(p["arm"], dtype=np.int64),
                    family=np.asarray(p["family"], dtype=np.int64),
                    tier=np.asarray(p["tier"], dtype=np.int64),
                    variant=np.asarray(p["variant"], dtype=np.int64),
                    catalog=cat,
                    attempt=None if p["attempt"] is None else np.asarray(p["attempt"], np.int64),
                    token=int(p.get("token", 0)),
                ),
            )
            for p in state["pending"]
        )
        self._rows = np.asarray(state["rows"], dtype=np.int64)
        self._offset = int(state["offset"])
        self.stats = FeedStats(**{k: int(v) for k, v in state["stats"].items()})
