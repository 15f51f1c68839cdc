"""Settings: defaults < configs/scheduler.yaml < CURRICULUM_* environment < CLI flags.

The scheduler's knobs are not written out here: every field of ``SchedulerConfig`` (and of
the nested ``TierConfig``, ``BreakerConfig``, ``DetectorConfig``) becomes a setting with the
dataclass's own default, and the recording cadences come from ``RecordingConfig`` the same
way. So ``Scheduler(catalog)`` and ``curriculum simulate`` run on the same defaults, and a
field added, removed or re-defaulted in a dataclass is followed here without an edit.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, get_type_hints

from pydantic import Field, ValidationError, create_model
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from domains import MAX_FILE_BYTES, CurriculumError, SourcePolicy

from ._errors import ConfigError
from ._recorder import RecordingConfig
from ._scheduler import SchedulerConfig

if TYPE_CHECKING:
    from domains import Catalog

    from ._scheduler import Scheduler

DEFAULT_CONFIG = Path("configs/scheduler.yaml")
ENV_PREFIX = "CURRICULUM_"
_NESTED = "__"

# Bounds the dataclasses check only loosely (or not at all) in __post_init__. Bounds, not
# defaults: a name the dataclass no longer has is skipped.
_BOUNDS: dict[str, dict[str, Any]] = {
    "ema_fast": {"gt": 0, "le": 1},
    "ema_slow": {"gt": 0, "le": 1},
    "exploration_floor": {"ge": 0, "le": 1},
    "temperature": {"gt": 0},
    "weights_every": {"ge": 1},
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
    __base__=BaseSettings,
    **_fields_of(SchedulerConfig),
    **_fields_of(RecordingConfig, RECORDING_SETTINGS),
)


class Settings(_Derived):
    """Everything a run is configured by. The fields below are the run's own; every field of
    ``SchedulerConfig`` (``ema_fast``, ``tiers``, ``detectors``, ...) and the recording
    cadences of ``RecordingConfig`` are settings too, with those dataclasses' defaults."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter=_NESTED, extra="forbid"
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

        from ._scheduler import Scheduler

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
        path = Path(config_file) if config_file is not None else DEFAULT_CONFIG
        if config_file is not None and not path.is_file():
            raise ConfigError(f"{path}: no such config file")
        yaml_file = path if path.is_file() else None
        yaml_marks = _yaml_marks(yaml_file) if yaml_file is not None else {}
        given = {k: v for k, v in overrides.items() if v is not None}

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

        where = _Sources(given, labels or {}, yaml_file, yaml_marks)
        try:
            loaded = _FromSources(**given)
        except ValidationError as exc:
            raise ConfigError(where.explain(exc)) from None
        except (ValueError, CurriculumError) as exc:  # raised by a dataclass's own checks
            raise ConfigError(where.explain_text(str(exc))) from None
        try:
            loaded.scheduler_config()  # the dataclass's cross-field checks, before any use
        except ConfigError as exc:
            raise ConfigError(where.explain_text(str(exc).removeprefix("settings: "))) from None
        result: Settings = loaded
        return result


def _default_policy() -> str:
    """The policy ``Scheduler(catalog)`` runs when none is named."""
    import inspect

    from policies import policy_params

    from ._scheduler import Scheduler

    default = inspect.signature(Scheduler.__init__).parameters["policy"].default
    return default if isinstance(default, str) else str(policy_params(default)["name"])


class _Sources:
    """Which source gave the value at a field path: a flag, a variable or a YAML line."""

    def __init__(
        self,
        overrides: Mapping[str, Any],
        labels: Mapping[str, str],
        yaml_file: Path | None,
        yaml_marks: Mapping[tuple[str, ...], tuple[int, int]],
    ) -> None:
        self.overrides = overrides
        self.labels = labels
        self.yaml_file = yaml_file
        self.yaml_marks = yaml_marks
        prefix = ENV_PREFIX.lower()
        self.env: dict[tuple[str, ...], str] = {
            tuple(key.lower()[len(prefix) :].split(_NESTED)): key
            for key in os.environ
            if key.lower().startswith(prefix)
        }

    def of(self, path: tuple[str, ...], message: str = "") -> str:
        """Where the value at ``path`` (or the values under it) came from, highest first.
        For a check over a whole section (``tiers``), the keys under it that ``message``
        names are the ones blamed."""
        if not path:
            return "settings"
        top = path[0]
        if top in self.overrides:
            value = self.overrides[top]
            if top in self.labels:
                shown = " ".join(map(str, value)) if isinstance(value, list) else value
                return f"{self.labels[top]} {shown}"
            return f"argument {top}={value!r}"
        env = [k for p, k in self.env.items() if _related(p, path)]
        if env:
            return ", ".join(f"{k}={os.environ[k]!r}" for k in sorted(env))
        marks = [(p, m) for p, m in self.yaml_marks.items() if _related(p, path)]
        if marks and self.yaml_file is not None:
            named = [m for p, m in marks if len(p) > len(path) and _names(message, p[-1])]
            exact = [m for p, m in marks if p == path[: len(p)]]
            line, col = min(named) if named else max(exact) if exact else min(m for _, m in marks)
            return f"{self.yaml_file}:{line}:{col}"
        return "default"

    def explain(self, exc: ValidationError) -> str:
        lines = []
        for err in exc.errors():
            path = tuple(str(p) for p in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            got = f", got {err['input']!r}" if "input" in err and err["type"] != "missing" else ""
            if err["type"] in ("value_error", "assertion_error"):
                got = ""  # the dataclass's message says what it got
            dotted = ".".join(path)
            field = "" if msg.startswith(f"{dotted}:") else f"{dotted}: "
            lines.append(f"{self.of(path, msg)}: {field}{msg}{got}")
        return "\n".join(lines)

    def explain_text(self, message: str) -> str:
        """A message that starts with its field path (``breakers.fault_window: ...``)."""
        head, sep, _ = message.partition(":")
        path = tuple(head.split(".")) if sep and " " not in head else ()
        return f"{self.of(path, message)}: {message}"


def _names(message: str, key: str) -> bool:
    """``message`` names the setting ``key`` as a word (promote_at, not promote_attempts)."""
    import re

    return re.search(rf"(?<![\w.]){re.escape(key)}(?!\w)", message) is not None


def _related(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """One path is a prefix of the other (a value under a field, or the field above one)."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _yaml_marks(path: Path) -> dict[tuple[str, ...], tuple[int, int]]:
    """(line, column), 1-based, of every mapping key in a YAML file, by key path. Also
    checks that the file parses and holds a mapping."""
    import yaml

    try:
        root = yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(f"{path}: the top level must be a mapping of settings")
    marks: dict[tuple[str, ...], tuple[int, int]] = {}

    def walk(node: yaml.MappingNode, prefix: tuple[str, ...]) -> None:
        for key, value in node.value:
            here = (*prefix, str(key.value))
            marks[here] = (key.start_mark.line + 1, key.start_mark.column + 1)
            if isinstance(value, yaml.MappingNode):
                walk(value, here)

    walk(root, ())
    return marks
