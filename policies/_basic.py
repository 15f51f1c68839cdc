"""Baselines: uniform over families, and the static weights written in the manifests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._registry import PolicyState, Stateless, register
from ._view import ArmView


@register("uniform")
@dataclass(frozen=True)
class Uniform(Stateless):
    """Every family equally often (the scheduler reads the weight of each family's current arm)."""

    constant = True  # the catalog alone decides the weights: asked for them once

    def weights(self, view: ArmView, state: PolicyState) -> npt.NDArray[np.float64]:
        return np.ones(view.catalog.n_arms)


@register("static")
@dataclass(frozen=True)
class Static(Stateless):
    """The fixed mix from the manifests: each family's ``weight`` field."""

    constant = True

    def weights(self, view: ArmView, state: PolicyState) -> npt.NDArray[np.float64]:
        catalog = view.catalog
        return np.asarray(catalog.family_weight[catalog.family_of_arm], dtype=np.float64)
