"""Weights: the scheduler's sampling distribution, as arrays and as labelled views."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from domains import Catalog

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Weights:
    """The current sampling distribution at three levels.

    The arrays are indexed by id, as the scheduler's state is; ``by_domain()``,
    ``by_family()`` and ``to_frame()`` put names on them (from the catalog the scheduler
    attaches in ``Scheduler.weights()``)."""

    arm: FloatArray  # float64 [n_arms], the policy's normalised raw weights
    family: FloatArray  # float64 [n_families], after smoothing and quota projection
    domain: FloatArray  # float64 [n_domains]
    # float64 [n_arms]: how a family's draws split over its tiers (sums to 1 per family);
    # used for families whose tiers are separate skills, uniform for ladders
    tier: FloatArray = field(default_factory=lambda: np.zeros(0))
    catalog: Catalog | None = field(default=None, repr=False)

    def _names(self) -> Catalog:
        if self.catalog is None:
            raise ValueError("these Weights carry no catalog; take them from Scheduler.weights()")
        return self.catalog

    def by_domain(self) -> dict[str, float]:
        """Each domain's share of the draws, by domain name."""
        names = self._names().domain_names
        return {str(name): float(w) for name, w in zip(names, self.domain.tolist(), strict=True)}

    def by_family(self) -> dict[str, float]:
        """Each family's share of the draws, by family name."""
        names = self._names().family_names
        return {str(name): float(w) for name, w in zip(names, self.family.tolist(), strict=True)}

    def to_frame(self) -> Any:
        """A pandas DataFrame, one row per family: ``domain``, ``family``, ``weight`` (its
        share of the draws) and ``domain_weight``. Needs pandas (MLflow brings it)."""
        import importlib

        try:
            pd = importlib.import_module("pandas")
        except ImportError as exc:  # pragma: no cover - pandas comes with mlflow
            raise ImportError("Weights.to_frame() needs pandas: pip install pandas") from exc
        cat = self._names()
        domain_of = np.asarray(cat.domain_of_family)
        return pd.DataFrame(
            {
                "domain": [cat.domain_names[int(d)] for d in domain_of],
                "family": list(cat.family_names),
                "weight": self.family,
                "domain_weight": self.domain[domain_of],
            }
        )
