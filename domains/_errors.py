"""The error hierarchy. Every error the user can fix names where it was and what would be right."""

from __future__ import annotations

from dataclasses import dataclass


class CurriculumError(Exception):
    """Base of every error caused by bad input (a manifest, an outcome, a config, a flag)."""


@dataclass(frozen=True)
class Problem:
    """One problem in one manifest: where it is and what is wrong."""

    file: str
    line: int  # 1-based; 0 when unknown
    column: int  # 1-based; 0 when unknown
    field: str  # dotted path, e.g. "domains[0].families[3].quota.min_share"
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class ManifestError(CurriculumError):
    """Every problem found in a set of manifests, gathered before failing."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
