"""Events: what the scheduler decided or detected, with the evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """Kinds: tier_promoted, tier_demoted, mastered, idle (payload reason: out_of_reach,
    flat or stalled), suspected_reward_hacking (and each of those three ``*_cleared``),
    breaker_opened, breaker_half_open, breaker_closed, quota_unreachable, cost_overrun."""

    step: int
    kind: str
    family: str | None = None
    domain: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
