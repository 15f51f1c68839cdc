"""Trainer backends: the protocol and the built-in simulated learner."""

from ._protocol import BatchOutcomes, TrainerBackend
from ._simulated import FamilyKind, SimulatedLearner, SimulatedLearnerConfig, SimulationError

__all__ = [
    "BatchOutcomes",
    "FamilyKind",
    "SimulatedLearner",
    "SimulatedLearnerConfig",
    "SimulationError",
    "TrainerBackend",
]
