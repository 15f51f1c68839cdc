"""Policies: from a read-only view of the state to sampling weights; quotas and tiers wrap them."""

from ._basic import Static, Uniform
from ._exp3s import Exp3S
from ._intervals import binomial_interval
from ._learning_progress import LearningProgress
from ._mixture import Mixture
from ._pass_rate import PassRateBand
from ._quota import project_quotas, project_quotas_compute, waterfill
from ._registry import (
    Policy,
    PolicyConfigError,
    PolicyState,
    Stateless,
    available_policies,
    make_policy,
    policy_params,
    register,
)
from ._regression_guard import RegressionGuard
from ._replay import PrioritizedReplay
from ._skill import SkillConfig, SkillModel, distinct
from ._smoothing import smooth
from ._tiers import TierConfig
from ._view import ArmView, CurveView

__all__ = [
    "ArmView",
    "CurveView",
    "Exp3S",
    "LearningProgress",
    "Mixture",
    "PassRateBand",
    "Policy",
    "PolicyConfigError",
    "PolicyState",
    "PrioritizedReplay",
    "RegressionGuard",
    "SkillConfig",
    "SkillModel",
    "Stateless",
    "Static",
    "TierConfig",
    "Uniform",
    "available_policies",
    "binomial_interval",
    "distinct",
    "make_policy",
    "policy_params",
    "project_quotas",
    "project_quotas_compute",
    "register",
    "smooth",
    "waterfill",
]
