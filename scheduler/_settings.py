"""Settings: defaults < configs/scheduler.yaml < CURRICULUM_* environment < CLI flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from domains import MAX_FILE_BYTES, SourcePolicy
from policies import TierConfig

from ._breakers import BreakerConfig
from ._detectors import DetectorConfig
from ._errors import ConfigError
from ._scheduler import SchedulerConfig

DEFAULT_CONFIG = Path("configs/scheduler.yaml")


class TierSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    promote_at: float = Field(0.75, ge=0, le=1)
    demote_at: float = Field(0.15, ge=0, le=1)
    min_samples: int = Field(24, ge=1)
    confidence: float = Field(0.9, gt=0, lt=1)
    cooldown_steps: int = Field(5, ge=0)
    adjacent_share: float = Field(0.0, ge=0, le=1)
    adjacent_down: float = Field(0.5, ge=0, le=1)  # part of adjacent draws one tier down
    review_share: float = Field(0.5, ge=0, le=1)  # draws sent to a left tier under review
    retain_at: float = Field(0.9, ge=0, le=1)  # a left tier probing under this is reviewed
    start_tier: int = Field(0, ge=0)
    window: int = Field(128, ge=1)
    probe_evidence: bool = True  # held-out probes at the current tier count as trials
    mastered_at: float = Field(0.85, gt=0, le=1)  # top tier, lower bound above this: mastered
    mastered_weight: float = Field(0.05, ge=0, le=1)  # a mastered family's cap, uniform shares
    innate_weight: float = Field(0.01, ge=0, le=1)  # the same, mastered before training taught it
    practice_share: float = Field(0.05, ge=0, le=1)  # a mastered separate tier's draws, same


class Settings(BaseSettings):
    """Everything a run is configured by. Field docs are the reference for scheduler.yaml."""

    model_config = SettingsConfigDict(
        env_prefix="CURRICULUM_", env_nested_delimiter="__", extra="forbid"
    )

    domains: list[str] = Field(default_factory=lambda: ["configs/domains"])
    policy: str = "uniform"
    policy_options: dict[str, Any] = Field(default_factory=dict)
    baseline: str = "learning_progress"  # what `simulate` compares the policy against
    seed: int = 0
    steps: int = Field(1500, ge=1)
    batch_size: int = Field(256, ge=1)
    ema_fast: float = Field(0.1, gt=0, le=1)
    ema_slow: float = Field(0.02, gt=0, le=1)
    exploration_floor: float = Field(0.5, ge=0, le=1)
    temperature: float = Field(1.0, gt=0)
    weights_every: int = Field(1, ge=1)
    tiers: TierSettings = Field(default_factory=TierSettings)
    max_retries: int = Field(2, ge=0)  # re-queues of a task whose environment failed
    retry_share: float = Field(0.25, ge=0, le=1)  # most of a batch that retries may take
    max_repeats: float | None = Field(None, gt=0)  # draws per arm per epoch, in pool sizes
    epoch_episodes: int = Field(100_000, ge=1)  # the epoch of max_repeats
    cost_overrun: float = Field(3.0, gt=1)  # learned/estimated cost ratio that raises an event
    probe_window: int = Field(16, ge=2)  # probe points per family kept for slopes
    report_window: int = Field(64, ge=0, le=1_000_000)  # batches a late report may trail by
    breakers: dict[str, Any] = Field(default_factory=dict)  # BreakerConfig fields
    detectors: dict[str, Any] = Field(default_factory=dict)  # DetectorConfig fields (nested)
    probe_every: int = Field(25, ge=1)  # steps between probe rounds
    checkpoint_every: int = Field(100, ge=1)  # steps between checkpoints
    checkpoint_seconds: float | None = Field(None, gt=0)  # ... or seconds, whichever first
    domain_every: int = Field(1, ge=1)  # steps between per-domain metrics
    detail_every: int = Field(50, ge=1)  # steps between per-family metrics
    db: str = "sqlite:///curriculum.db"
    tracking_uri: str = "sqlite:///mlflow.db"
    experiment: str = "curriculum"
    run_name: str | None = None
    simulator: dict[str, Any] = Field(default_factory=dict)  # SimulatedLearnerConfig fields
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    # A manifest's JSONL `source:` must lie under the manifest's root unless this is true.
    manifest_sources_anywhere: bool = False
    manifest_max_bytes: int = Field(MAX_FILE_BYTES, ge=1)  # cap on every manifest/data file
    store_lock_timeout_s: float = Field(60.0, gt=0)  # give up on a locked SQLite store

    def source_policy(self) -> SourcePolicy:
        """Which files manifests may read, for ``load_catalog(..., sources=...)``."""
        return SourcePolicy(
            allow_outside_root=self.manifest_sources_anywhere, max_bytes=self.manifest_max_bytes
        )

    def scheduler_config(self) -> SchedulerConfig:
        """The SchedulerConfig these settings describe; ConfigError names a bad field."""
        try:
            breakers = BreakerConfig(**self.breakers)
        except TypeError as exc:
            raise ConfigError(f"breakers: {exc}") from None
        try:
            return SchedulerConfig(
                ema_fast=self.ema_fast,
                ema_slow=self.ema_slow,
                exploration_floor=self.exploration_floor,
                temperature=self.temperature,
                weights_every=self.weights_every,
                tiers=TierConfig(**self.tiers.model_dump()),
                breakers=breakers,
                detectors=DetectorConfig.from_dict(self.detectors),
                probe_window=self.probe_window,
                max_retries=self.max_retries,
                retry_share=self.retry_share,
                cost_overrun=self.cost_overrun,
                max_repeats=self.max_repeats,
                epoch_episodes=self.epoch_episodes,
                report_window=self.report_window,
            )
        except ValueError as exc:
            raise ConfigError(f"settings: {exc}") from None

    @classmethod
    def load(cls, config_file: str | Path | None = None, **overrides: Any) -> Settings:
        """Settings from a YAML file (default configs/scheduler.yaml if it exists), the
        environment and explicit overrides, highest last. Raises ConfigError naming the
        file and field of every problem."""
        path = Path(config_file) if config_file is not None else DEFAULT_CONFIG
        if config_file is not None and not path.is_file():
            raise ConfigError(f"{path}: no such config file")
        yaml_file = path if path.is_file() else None
        if yaml_file is not None:
            _check_yaml(yaml_file)

        class _FromSources(cls):  # type: ignore[valid-type,misc]
            @classmethod
            def settings_customise_sources(
                cls,
                settings_cls: type[BaseSettings],
                init_settings: PydanticBaseSettingsSource,
                env_settings: PydanticBaseSettingsSource,
                dotenv_settings: PydanticBaseSettingsSource,
                file_secret_settings: PydanticBaseSettingsSource,
            ) -> tuple[PydanticBaseSettingsSource, ...]:
                sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
                if yaml_file is not None:
                    sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_file))
                return tuple(sources)

        try:
            loaded = _FromSources(**{k: v for k, v in overrides.items() if v is not None})
        except ValidationError as exc:
            where = str(yaml_file) if yaml_file else "settings"
            lines = [
                f"{where}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                + (f", got {err['input']!r}" if "input" in err and err["type"] != "missing" else "")
                for err in exc.errors()
            ]
            raise ConfigError(
                "\n".join(lines) + "\n(values come from the config file, CURRICULUM_* "
                "environment variables and command-line flags)"
            ) from None
        return loaded


def _check_yaml(path: Path) -> None:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of settings")
