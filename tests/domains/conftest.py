"""Helpers for manifest tests: write YAML into a temp dir, collect the problems it causes."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from domains import ManifestError, load_catalog

Writer = Callable[[str, str], Path]


@pytest.fixture
def write(tmp_path: Path) -> Writer:
    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return _write


def _problems(*paths: Path | str) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load_catalog(*paths)
    return [str(p) for p in info.value.problems]


@pytest.fixture
def problems() -> Callable[..., list[str]]:
    """Every problem of loading the paths, as text; fails the test if loading succeeds."""
    return _problems
