"""Where settings come from: defaults < YAML file < ``CURRICULUM_*`` environment < flags,
and which source to blame for a bad value. ``ManifestSettings`` holds the settings that
reading manifests needs, so ``curriculum validate`` loads them without the scheduler's
(``Settings`` extends it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from domains import MAX_FILE_BYTES, CurriculumError, SourcePolicy

from .._errors import ConfigError

DEFAULT_CONFIG = Path("configs/scheduler.yaml")
ENV_PREFIX = "CURRICULUM_"
NESTED = "__"

_S = TypeVar("_S", bound=BaseSettings)


class ManifestSettings(BaseSettings):
    """The settings that decide which files a manifest may read. The rest of a settings
    file is ignored here (``Settings`` reads and checks it all)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter=NESTED, extra="ignore"
    )

    # A manifest's JSONL `source:` must lie under the manifest's root unless this is true.
    manifest_sources_anywhere: bool = False
    manifest_max_bytes: int = Field(MAX_FILE_BYTES, ge=1)  # cap on every manifest/data file

    def source_policy(self) -> SourcePolicy:
        """Which files manifests may read, for ``load_catalog(..., sources=...)``."""
        return SourcePolicy(
            allow_outside_root=self.manifest_sources_anywhere, max_bytes=self.manifest_max_bytes
        )

    @classmethod
    def load_manifest_settings(cls, config_file: str | Path | None = None) -> ManifestSettings:
        """These settings from the file (default configs/scheduler.yaml if it exists) and
        the environment; a bad value is a ConfigError naming its source."""
        loaded, _ = load_from_sources(cls, config_file, None, {})
        return loaded


def load_from_sources(
    cls: type[_S],
    config_file: str | Path | None,
    labels: Mapping[str, str] | None,
    overrides: Mapping[str, Any],
) -> tuple[_S, _Sources]:
    """An instance of ``cls`` from ``overrides`` (labelled by ``labels``), the
    environment and the YAML file, and the record of which source gave what (to name it
    in a later check's error). Raises one ConfigError naming the source of every bad
    value."""
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
        loaded: _S = _FromSources(**given)
    except ValidationError as exc:
        raise ConfigError(where.explain(exc)) from None
    except (ValueError, CurriculumError) as exc:  # raised by a dataclass's own checks
        raise ConfigError(where.explain_text(str(exc))) from None
    return loaded, where


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
            tuple(key.lower()[len(prefix) :].split(NESTED)): key
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
