"""Lazy re-exports: a package names a public class without importing its module.

``import scheduler`` must stay light (no SQLAlchemy, MLflow, pydantic-settings or torch), yet
``from scheduler import RunRecorder`` must work. A package lists such names in a table; the
module is imported on first access and the value cached on the package. The package keeps
type-checker-visible imports under ``if TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_getattr(package: str, table: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that imports ``table[name]`` (a module path
    relative to the package) when ``name`` is first read."""

    def __getattr__(name: str) -> object:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # later reads skip this function
        return value

    return __getattr__
