"""verl integration: ``CurriculumSampler`` (verl 0.5 to 0.7, ``data.sampler``) and
``CurriculumDataset`` (verl 0.8+, ``data.custom_cls``). docs/integrations.md has a launch
command for each.

Each name imports its verl module only when first used: verl 0.8+ has no
``verl.experimental.dataset.sampler``, and verl 0.7's ``RLHFDataset`` has no hook to serve.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._verl07 import CurriculumSampler
    from ._verl09 import CurriculumDataset
    from ._verl_feed import FeedStats, VerlOptions

_LAZY = {
    "CurriculumSampler": "._verl07",
    "CurriculumDataset": "._verl09",
    "FeedStats": "._verl_feed",
    "VerlOptions": "._verl_feed",
}

__all__ = ["CurriculumDataset", "CurriculumSampler", "FeedStats", "VerlOptions"]


_NEEDS = {
    "CurriculumSampler": "verl 0.5 to 0.7 (verl.experimental.dataset.sampler)",
    "CurriculumDataset": "verl 0.8 or later (verl.utils.dataset.rl_dataset)",
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'scheduler.integrations.verl' has no attribute {name!r}")
    try:
        module = importlib.import_module(_LAZY[name], __package__)
    except ImportError as exc:
        raise ImportError(
            f"scheduler.integrations.verl.{name} needs {_NEEDS[name]}: {exc} "
            "(docs/integrations.md; scripts/verl/ lists a working set of pins)"
        ) from exc
    return getattr(module, name)
