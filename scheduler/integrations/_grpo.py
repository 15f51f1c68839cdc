"""The curriculum of a GRPO run: the sampler factory, the reward wrapper and the checkpoint.

``GRPOCurriculum`` holds one ``CurriculumStream``. Its ``sampler(...)`` takes the keywords
of TRL's ``RepeatSampler`` (so ``_get_train_sampler`` can call it as it calls RepeatSampler)
and its ``reward(fn)`` wraps a TRL reward function: the wrapper returns ``fn``'s rewards
unchanged, and on the side turns each prompt group into one report for the scheduler,
after gathering every rank's completions, so every replica makes the same update.

Nothing here imports TRL: the same object drives any GRPO-style trainer that calls reward
functions as TRL does (``fn(prompts=..., completions=..., **columns)``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence, Sized
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ConfigError
from .._scheduler import Scheduler
from .._serialize import dumps_state, loads_state
from ._collective import all_gather, broadcast
from ._columns import DatasetColumns
from ._groups import Completions, GroupReport
from ._repeat import CurriculumRepeatSampler
from ._rows import RowIndex, _family_ids, _integers
from ._stream import CurriculumStream

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
PerCompletion = Callable[..., Sequence[Any]]
STATE_FILE = "curriculum_state.npz"


class GRPOCurriculum:
    """The scheduler behind a GRPO trainer's sampler and rewards.

    ``gather=False`` reports each rank's own completions only: the replicas then drift
    apart and draw different blocks. It exists to show why the gather is needed."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        columns: DatasetColumns | None = None,
        max_lag: int = 2,
        gather: bool = True,
    ) -> None:
        self.scheduler = scheduler
        self.columns = columns or DatasetColumns()
        self.max_lag = max_lag
        self.gather = gather
        self.training = True  # off while the trainer evaluates: those rounds are not reported
        self.rounds: list[GroupReport] = []  # kept only when keep_rounds is set (tests, debug)
        self.keep_rounds = False
        self._stream: CurriculumStream | None = None
        self._saved: Mapping[str, Any] | None = None  # a checkpoint loaded before the sampler

    # ------------------------------------------------------------------ sampler
    def sampler(
        self,
        data_source: Sized,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        shuffle: bool = True,
        seed: int | None = None,
    ) -> CurriculumRepeatSampler:
        """RepeatSampler's signature and shape, with blocks drawn by the scheduler.

        ``shuffle`` and ``seed`` are accepted for the signature: the order comes from the
        scheduler, which is seeded by its own ``seed``, the same on every rank."""
        del shuffle, seed
        stream = self._ensure_stream(data_source)
        return CurriculumRepeatSampler(
            stream,
            data_source=data_source,
            mini_repeat_count=mini_repeat_count,
            batch_size=batch_size,
            repeat_count=repeat_count,
        )

    def _ensure_stream(self, data_source: Any) -> CurriculumStream:
        if self._stream is None:
            if self.gather and not self.scheduler.awaiting_report():
                # replicas of one run carry rank 0's batch token: their states stay equal
                self.scheduler.adopt_token(int(broadcast(self.scheduler.batch_token)))
            rows = RowIndex.from_dataset(self.scheduler.catalog, data_source, self.columns)
            self._stream = CurriculumStream(self.scheduler, rows, max_lag=self.max_lag)
            if self._saved is not None:
                self._stream.load_state_dict(self._saved)
                self._saved = None
        elif len(data_source) != self._stream.index.n_rows:
            raise ConfigError(
                "GRPOCurriculum: sampler() was called for another dataset; one curriculum "
                "serves one training dataset"
            )
        return self._stream

    @property
    def stream(self) -> CurriculumStream:
        if self._stream is None:
            raise ConfigError("GRPOCurriculum: no sampler yet; the trainer builds it in train()")
        return self._stream

    # ------------------------------------------------------------------ rewards
    def reward(
        self,
        fn: PerCompletion,
        *,
        success: float | PerCompletion | None = None,
        process: PerCompletion | None = None,
        cost: PerCompletion | None = None,
    ) -> CurriculumReward:
        """Wrap a TRL reward function so each round is reported to the scheduler.

        ``success``: a threshold on the reward, or a function with the reward function's
        signature returning a pass (bool or [0, 1]) per completion; by default a reward at
        the top of the family's reward range. ``process`` ([0, 1]) and ``cost`` (seconds)
        are optional per-completion functions with the same signature."""
        return CurriculumReward(self, fn, success=success, process=process, cost=cost)

    def report_completions(self, local: Completions, log_metric: Any = None) -> GroupReport:
        """Gather every rank's completions of the round, then report them as one block."""
        if self.gather:
            parts = all_gather(_to_plain(local))
            completions = Completions.concat([_from_plain(p) for p in parts])
        else:
            completions = local
        groups = self.stream.report_round(completions, complete=self.gather)
        if self.keep_rounds:
            self.rounds.append(groups)
        if callable(log_metric):
            flat = groups.zero_variance
            log_metric("curriculum/zero_variance_groups", float(flat.sum()))
            log_metric("curriculum/group_spread", float(np.nanmean(groups.spread)))
            log_metric("curriculum/feedback_lag", float(self.stream.feedback_lag()))
        return groups

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        if self._stream is None:
            raise ConfigError("GRPOCurriculum: nothing to save before the sampler exists")
        return self._stream.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore now, or as soon as the sampler is built (a resume loads the checkpoint
        before the trainer makes its dataloader)."""
        if self._stream is None:
            self._saved = state
        else:
            self._stream.load_state_dict(state)

    def save(self, directory: str | os.PathLike[str]) -> str:
        path = os.path.join(os.fspath(directory), STATE_FILE)
        os.makedirs(os.fspath(directory), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(dumps_state(self.state_dict()))
        os.replace(tmp, path)
        return path

    def load(self, directory: str | os.PathLike[str]) -> None:
        path = os.path.join(os.fspath(directory), STATE_FILE)
        if not os.path.isfile(path):
            raise ConfigError(
                f"{path}: the checkpoint has no curriculum state (was it saved with the "
                "curriculum's callback?)"
            )
        with open(path, "rb") as f:
            self.load_state_dict(loads_state(f.read()))


class CurriculumReward:
    """A TRL reward function that also reports each round to the curriculum."""

    def __init__(
        self,
        curriculum: GRPOCurriculum,
        fn: PerCompletion,
        *,
        success: float | PerCompletion | None,
        process: PerCompletion | None,
        cost: PerCompletion | None,
    ) -> None:
        self.curriculum = curriculum
        self.fn = fn
        self.success = success
        self.process = process
        self.cost = cost
        # TRL names its reward metrics after the function
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> Any:
        rewards = self.fn(prompts=prompts, completions=completions, **kwargs)
        if self.curriculum.training:
            local = self._completions(rewards, prompts, completions, kwargs)
            self.curriculum.report_completions(local, kwargs.get("log_metric"))
        return rewards

    def _completions(
        self,
        rewards: Sequence[Any],
        prompts: Sequence[Any],
        completions: Sequence[Any],
        kwargs: Mapping[str, Any],
    ) -> Completions:
        cur = self.curriculum
        index = cur.stream.index
        names = cur.columns
        missing = [c for c in names.names() if c not in kwargs]
        if missing:
            raise ConfigError(
                f"reward: the trainer passed no column {missing[0]!r}; keep the dataset's "
                "family, tier and variant columns (remove_unused_columns=False)"
            )
        n = len(rewards)
        reward = np.array([np.nan if r is None else float(r) for r in rewards], dtype=np.float64)
        problems: list[str] = []
        fam = _family_ids(index.catalog, np.asarray(kwargs[names.family]), names.family, problems)
        tier = _integers(np.asarray(kwargs[names.tier]), names.tier, problems)
        variant = _integers(np.asarray(kwargs[names.variant]), names.variant, problems)
        if problems:
            raise ConfigError("reward: " + "; ".join(problems))
        cat = index.catalog
        arm = np.where((tier >= 0) & (tier < cat.n_tiers[fam]), cat.arm_start[fam] + tier, -1)
        row = index.lookup(arm, variant)
        if (row < 0).any():
            bad = int(np.flatnonzero(row < 0)[0])
            raise ConfigError(
                f"reward: completion {bad} names {index.catalog.family_names[int(fam[bad])]!r} "
                f"tier {int(tier[bad])} variant {int(variant[bad])}, which no dataset row holds"
            )
        family = index.catalog.family_of_arm[arm]
        if self.success is None:
            succ = (reward >= index.catalog.reward_high[family] - 1e-9).astype(np.float64)
        elif callable(self.success):
            succ = _floats(self.success, n, "success", prompts, completions, kwargs)
        else:
            succ = (reward >= float(self.success)).astype(np.float64)
        process = (
            np.full(n, np.nan)
            if self.process is None
            else _floats(self.process, n, "process", prompts, completions, kwargs)
        )
        cost = (
            np.full(n, np.nan)
            if self.cost is None
            else _floats(self.cost, n, "cost", prompts, completions, kwargs)
        )
        return Completions(row=row, reward=reward, success=succ, process=process, cost=cost)


def _floats(
    fn: PerCompletion,
    n: int,
    name: str,
    prompts: Sequence[Any],
    completions: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> FloatArray:
    values = fn(prompts=prompts, completions=completions, **kwargs)
    out = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    if out.shape != (n,):
        raise ConfigError(f"reward: the {name} function returned {out.shape[0]} values for {n}")
    return out


def _to_plain(c: Completions) -> dict[str, list[Any]]:
    """Lists, not arrays: what crosses ranks is plain data (all_gather_object pickles)."""
    return {
        "row": c.row.tolist(),
        "reward": c.reward.tolist(),
        "success": c.success.tolist(),
        "process": c.process.tolist(),
        "cost": c.cost.tolist(),
    }


def _from_plain(d: Mapping[str, list[Any]]) -> Completions:
    return Completions(
        row=np.asarray(d["row"], dtype=np.int64),
        reward=np.asarray(d["reward"], dtype=np.float64),
        success=np.asarray(d["success"], dtype=np.float64),
        process=np.asarray(d["process"], dtype=np.float64),
        cost=np.asarray(d["cost"], dtype=np.float64),
    )
