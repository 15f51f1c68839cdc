"""The application: settings (pydantic-settings), the main job on the simulated learner,
`curriculum report` and the command line (``scheduler.app.cli``, the only module that
prints).

Imported on first use, so ``curriculum validate`` loads neither the store nor MLflow.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from ._settings import Settings
    from ._simulate import RunSummary, SimulationRun, run_simulation

_LAZY = {
    "Settings": "._settings",
    "RunSummary": "._simulate",
    "SimulationRun": "._simulate",
    "run_simulation": "._simulate",
}
__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = [
    "RunSummary",
    "Settings",
    "SimulationRun",
    "run_simulation",
]
