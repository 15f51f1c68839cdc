"""Settings: defaults < configs/scheduler.yaml < CURRICULUM_* environment < CLI flags.

The scheduler's knobs are not written out here: every field of ``SchedulerConfig`` (and of
the nested ``SkillConfig``, ``TierConfig``, ``BreakerConfig``) becomes a setting with the
dataclass's own default, and the recording cadences come from ``RecordingConfig`` the same
way. So ``Scheduler(catalog)`` and ``curriculum simulate`` run on the same defaults, and a
field added, removed or re-defaulted in a dataclass is followed here without an edit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, get_type_hints

from pydantic import Field, create_model
from pydantic_settings import SettingsConfigDict

from domains import CurriculumError

from .._config import SchedulerConfig
from .._errors import ConfigError
from ..recording._config import RecordingConfig
from ._sources import ENV_PREFIX, NESTED, ManifestSettings, load_from_sources

if TYPE_CHECKING:
    from domains import Catalog

    from .._scheduler import Scheduler

# Bounds the dataclasses check only loosely (or not at all) in __post_init__. Bounds, not
# defaults: a name the dataclass no longer has is skipped.
_BOUNDS: dict[str, dict[str, Any]] = {
    "ema_fast": {"gt": 0, "le": 1},
    "ema_slow": {"gt": 0, "le": 1},
    "exploration_floor": {"ge": 0, "le": 1},
    "temperature": {"gt": 0},
    "refresh_per_family": {"ge": 0},
    "probe_window": {"ge": 2},
    "max_retries": {"ge": 0},
    "retry_share": {"ge": 0, "le": 1},
    "cost_rate": {"gt": 0, "le": 1},
    "cost_overrun": {"gt": 1},
    "max_repeats": {"gt": 0},
    "epoch_episodes": {"ge": 1},
    "report_window": {"ge": 0, "le": 1_000_000},
    "checkpoint_every": {"ge": 1},
    "checkpoint_seconds": {"gt": 0},
    "domain_every": {"ge": 1},
    "detail_every": {"ge": 1},
}
# RecordingConfig fields that are settings (the rest are wiring of one recorder).
RECORDING_SETTINGS = ("checkpoint_every", "checkpoint_seconds", "domain_every", "detail_every")


def _fields_of(cls: type[Any], names: Iterable[str] | None = None) -> dict[str, Any]:
    """pydantic field definitions (type, FieldInfo) for a dataclass's fields, with its
    defaults. Nested dataclasses stay dataclasses: pydantic validates them field by field
    and refuses unknown keys."""
    hints = get_type_hints(cls)
    wanted = None if names is None else set(names)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if wanted is not None and f.name not in wanted:
            continue
        bounds = _BOUNDS.get(f.name, {})
        if f.default is not dataclasses.MISSING:
            out[f.name] = (hints[f.name], Field(f.default, **bounds))
        else:
            factory = cast("Callable[[], Any]", f.default_factory)
            out[f.name] = (hints[f.name], Field(default_factory=factory, **bounds))
    return out


_Derived: Any = create_model(
    "_Derived",
    __base__=ManifestSettings,
    **_fields_of(SchedulerConfig),
    **_fields_of(RecordingConfig, RECORDING_SETTINGS),
)


class Settings(_Derived):
    """Everything a run is configured by. The fields below are the run's own; every field of
    ``SchedulerConfig`` (``ema_fast``, ``tiers``, ``detectors``, ...) and the recording
    cadences of ``RecordingConfig`` are settings too, with those dataclasses' defaults."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter=NESTED, extra="forbid"
    )

    domains: list[str] = Field(default_factory=lambda: ["configs/domains"])
    policy: str = Field(default_factory=lambda: _default_policy())  # Scheduler's own default
    policy_options: dict[str, Any] = Field(default_factory=dict)
    baseline: str = "learning_progress"  # what `simulate` compares the policy against
    seed: int = 0
    steps: int = Field(1500, ge=1)
    batch_size: int = Field(256, ge=1)
    probe_every: int = Field(25, ge=1)  # steps between probe rounds of `simulate`
    db: str = "sqlite:///curriculum.db"
    tracking_uri: str = "sqlite:///mlflow.db"
    experiment: str = "curriculum"
    run_name: str | None = None
    simulator: dict[str, Any] = Field(default_factory=dict)  # SimulatedLearnerConfig fields
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    # manifest_sources_anywhere and manifest_max_bytes come from ManifestSettings
    store_lock_timeout_s: float = Field(60.0, gt=0)  # give up on a locked SQLite store

    def scheduler_config(self) -> SchedulerConfig:
        """The SchedulerConfig these settings describe; ConfigError names a bad field."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(SchedulerConfig)}
        try:
            return SchedulerConfig(**values)
        except (ValueError, CurriculumError) as exc:
            raise ConfigError(f"settings: {exc}") from None

    def recording_config(self, **wiring: Any) -> RecordingConfig:
        """The RecordingConfig of these settings' cadences, plus ``wiring`` (detail, ...)."""
        return RecordingConfig(**{n: getattr(self, n) for n in RECORDING_SETTINGS}, **wiring)

    def build_scheduler(self, catalog: Catalog | None = None) -> Scheduler:
        """The Scheduler these settings describe, over ``catalog`` (default: the manifests
        under ``domains``). ``Scheduler.from_settings`` calls this."""
        from domains import load_catalog

        from .._scheduler import Scheduler

        config = self.scheduler_config()
        catalog = (
            load_catalog(*self.domains, sources=self.source_policy())
            if catalog is None
            else catalog
        )
        return Scheduler(catalog, self.policy, seed=self.seed, config=config, **self.policy_options)

    @classmethod
    def load(
        cls,
        config_file: str | Path | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Settings from a YAML file (default configs/scheduler.yaml if it exists), the
        environment and explicit overrides, highest last. ``labels`` names where each
        override came from (the CLI passes its flags: ``{"steps": "--steps"}``).

        Raises one ConfigError naming, for every problem, the source of the bad value: the
        flag, the ``CURRICULUM_*`` variable or ``file:line:col``."""
        loaded, where = load_from_sources(cls, config_file, labels, overrides)
        try:
            loaded.scheduler_config()  # the dataclass's cross-field checks, before any use
        except ConfigError as exc:
            raise ConfigError(where.explain_text(str(exc).removeprefix("settings: "))) from None
        return loaded


def _default_policy() -> str:
    """The policy ``Scheduler(catalog)`` runs when none is named."""
    import inspect

    from policies import policy_params

    from .._scheduler import Scheduler

    default = inspect.signature(Scheduler.__init__).parameters["policy"].default
    return default if isinstance(default, str) else str(policy_params(default)["name"])
