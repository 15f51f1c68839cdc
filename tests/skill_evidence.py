"""Evidence for a SkillModel that more than one test module builds."""

from __future__ import annotations

import numpy as np

from policies import SkillModel


def two_tiers_alike(model: SkillModel, top_probe: tuple[float, float], rounds: int = 24) -> None:
    """Two families of a 4-tier catalog train at tiers 0 and 1 alike, passing 80 % at
    each (the one-slope belief reads that flat), and their top tier is probed every fourth
    round, reading ``top_probe`` (one per family)."""
    cat = model._catalog
    rng = np.random.default_rng(0)
    for i in range(rounds):
        for family in (0, 1):
            for tier in (0, 1):
                arm = np.full(8, cat.arm_start[family] + tier, dtype=np.int64)
                model.observe_training(arm, (rng.random(8) < 0.8).astype(np.float64))
        if i % 4 == 0:
            model.observe_probes(
                np.array([0, 1]), np.array([3, 3]), np.array(top_probe), np.full(2, 8)
            )
