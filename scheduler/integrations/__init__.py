"""Adapters that plug the scheduler into trainers: torch samplers, TRL's GRPOTrainer, many ranks.

Each adapter imports its framework only when first used, so ``import scheduler`` (and this
package) stays light. The TRL adapter is the submodule ``scheduler.integrations.trl`` (extra
``[trl]``); the replicated scheduler over torch.distributed is ``scheduler.distributed``;
verl's curriculum sampler (0.5-0.7) and dataset (0.8+) are ``scheduler.integrations.verl``.
"""

from __future__ import annotations

import importlib

from ._columns import DatasetColumns
from ._rows import RowIndex

# name -> private module; these import torch, so they load on first use
_LAZY = {
    "CurriculumBatchSampler": "._torch",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'scheduler.integrations' has no attribute {name!r}")


__all__ = ["CurriculumBatchSampler", "DatasetColumns", "RowIndex"]
