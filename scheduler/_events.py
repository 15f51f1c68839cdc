"""Events: what the scheduler decided or detected, with the evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """Kinds: tier_promoted, tier_demoted, regression, plateau, quarantined, released,
    suspected_reward_hacking, breaker_opened, breaker_half_open, breaker_closed."""

    step: int
    kind: str
    family: str | None = None
    domain: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
