"""SchedulerConfig: the knobs around the policy, each with a safe default.

Settings (scheduler/app/_settings.py) read its fields and defaults, nested dataclasses
included, so a field added here is a setting with no other edit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policies import SkillConfig, TierConfig

from ._breakers import BreakerConfig


@dataclass(frozen=True)
class SchedulerConfig:
    """Knobs of the scheduler around the policy. Every field has a safe default."""

    ema_fast: float = 0.1
    ema_slow: float = 0.02
    exploration_floor: float = 0.5  # uniform share mixed into the family distribution
    temperature: float = 1.0
    # recompute the weights once the reports since the last time hold this many episodes
    # per family (at least one); a probe or a breaker's move recomputes them at once. At
    # 0.25 a batch of 256 refreshes every step up to 1,024 families; the quality grid reads
    # the same as refreshing every step (1.0 lost 0.47 of ext's p10; docs/benchmarks.md)
    refresh_per_family: float = 0.25
    # separate-skill families (tiers that are skills, not difficulty): mastery per arm
    tiers: TierConfig = field(default_factory=TierConfig)
    # the skill model that places ladder families on their tiers and flags them
    skill: SkillConfig = field(default_factory=SkillConfig)
    breakers: BreakerConfig = field(default_factory=BreakerConfig)
    probe_window: int = 16  # probe points per family kept for slopes
    max_retries: int = 2  # re-queues of a task whose environment failed (timeout, env_error)
    retry_share: float = 0.25  # at most this share of a batch is retried tasks
    cost_rate: float = 0.05  # EMA rate (per episode) of the learned cost of each family
    cost_overrun: float = 3.0  # learned cost above this multiple of the estimate: an event
    max_repeats: float | None = None  # draws of an arm per epoch, in pool sizes (None: no cap)
    epoch_episodes: int = 100_000  # the epoch of max_repeats, in episodes
    # a batch may be reported until this many more batches were drawn; then it expires
    report_window: int = 64

    def __post_init__(self) -> None:
        if self.max_repeats is not None and self.max_repeats <= 0:
            raise ValueError(f"max_repeats must be positive or None, got {self.max_repeats}")
        if not 0 < self.cost_rate <= 1 or self.cost_overrun <= 1 or self.epoch_episodes < 1:
            raise ValueError("need 0 < cost_rate <= 1, cost_overrun > 1, epoch_episodes >= 1")
        if self.report_window < 0:
            raise ValueError(f"report_window must be >= 0, got {self.report_window}")
        if not self.refresh_per_family >= 0:
            raise ValueError(f"refresh_per_family must be >= 0, got {self.refresh_per_family}")
