"""Errors raised by the scheduler for bad input. The CLI maps CurriculumError to exit code 2."""

from __future__ import annotations

from domains import CurriculumError


class ReportError(CurriculumError):
    """Outcomes that cannot be applied. Nothing of the report was applied."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:10]
        more = len(self.problems) - len(shown)
        text = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        super().__init__(f"report rejected: {text}")


class ConfigError(CurriculumError):
    """A setting, a config file, a CLI flag or a checkpoint that does not fit."""
