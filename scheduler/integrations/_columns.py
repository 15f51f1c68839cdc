"""The dataset columns that say which task a row is: named here, and only here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetColumns:
    """Names of the columns holding each row's family (name or id), tier and variant id.

    Every adapter (RowIndex, the TRL sampler and reward wrapper, verl) reads the columns
    through one of these, so a dataset with other names changes one value."""

    family: str = "family"
    tier: str = "tier"
    variant: str = "variant"

    def names(self) -> tuple[str, str, str]:
        return (self.family, self.tier, self.variant)
