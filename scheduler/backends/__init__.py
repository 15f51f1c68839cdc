"""Trainer backends: the protocol and the built-in simulated learner."""

from ._protocol import BatchOutcomes, TrainerBackend

__all__ = ["BatchOutcomes", "TrainerBackend"]
