"""Separate-skill tiers: when a tier whose probe reads mastered stops taking draws.

A ladder family's tiers are one skill at rising difficulty, placed by the skill model
(``SkillModel``). A family whose tiers are separate skills (``tier_separate`` in its
manifest) is judged arm by arm instead: an arm whose latest probe clears ``mastered_at``
with ``confidence`` (the Jeffreys lower bound of the chance-normalised score) is mastered,
keeps ``practice_share`` of a uniform share of its family's draws, and a family with every
arm mastered is held to ``mastered_weight`` of a uniform share.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TierConfig:
    confidence: float = 0.9
    mastered_at: float = 0.85  # lower bound of the normalised probe score above this
    mastered_weight: float = 0.05  # a fully mastered family's share cap, in uniform shares
    # what each mastered tier keeps of a uniform share of its family's draws while other
    # tiers still train (practice against their interference)
    practice_share: float = 0.05

    def __post_init__(self) -> None:
        if not 0.0 < self.mastered_at <= 1.0 or not 0.0 <= self.mastered_weight <= 1.0:
            raise ValueError(
                "tiers: need 0 < mastered_at <= 1 and 0 <= mastered_weight <= 1, got "
                f"{self.mastered_at}, {self.mastered_weight}"
            )
        if not 0.0 <= self.practice_share <= 1.0:
            raise ValueError(f"tiers: practice_share must be in [0, 1], got {self.practice_share}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"tiers: confidence must be in (0, 1), got {self.confidence}")
