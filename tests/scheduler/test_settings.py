"""Settings: one source of defaults (the dataclasses), and errors that name the source of
the bad value: the flag, the environment variable or the file and line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import TierConfig
from scheduler import ConfigError, RecordingConfig, Scheduler, SchedulerConfig, Settings
from scheduler.app._settings import RECORDING_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "configs" / "scheduler.yaml"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.upper().startswith("CURRICULUM_"):
            monkeypatch.delenv(key)


def test_simulate_and_the_library_run_on_the_same_defaults() -> None:
    """configs/scheduler.yaml, loaded as `curriculum simulate` loads it, gives exactly the
    SchedulerConfig that Scheduler(catalog) uses, and the recorder's own cadences."""
    settings = Settings.load(SHIPPED)
    assert settings.scheduler_config() == SchedulerConfig()
    assert settings.recording_config() == RecordingConfig()
    assert Settings().scheduler_config() == SchedulerConfig()
    from domains import Catalog
    from policies import policy_params

    plain = Scheduler(Catalog.synthetic(2, 2, 2))
    assert settings.policy == policy_params(plain.policy)["name"]


def test_every_dataclass_field_is_a_setting_with_its_default() -> None:
    """The mechanism, not today's values: each field of SchedulerConfig (and each of the
    recording cadences) is a setting whose default is the dataclass's own."""
    fields = Settings.model_fields
    defaults = SchedulerConfig()
    for f in dataclasses.fields(SchedulerConfig):
        assert f.name in fields, f.name
        assert fields[f.name].get_default(call_default_factory=True) == getattr(defaults, f.name)
    for name in RECORDING_SETTINGS:
        assert fields[name].get_default() == getattr(RecordingConfig(), name)


def test_a_changed_or_removed_dataclass_field_is_followed() -> None:
    """Re-defaulting or dropping a field needs no edit in the settings: the fields are read
    off the dataclass (as the lead's next change of SchedulerConfig/TierConfig will be)."""
    from pydantic import create_model
    from pydantic_settings import BaseSettings

    from scheduler.app._settings import _fields_of

    @dataclasses.dataclass(frozen=True)
    class Changed:
        ema_fast: float = 0.3
        tiers: TierConfig = dataclasses.field(default_factory=lambda: TierConfig(mastered_at=0.81))

    model: Any = create_model("M", __base__=BaseSettings, **_fields_of(Changed))
    loaded = model()
    assert loaded.ema_fast == 0.3 and loaded.tiers.mastered_at == 0.81
    assert set(model.model_fields) == {"ema_fast", "tiers"}  # nothing hand-copied remains


def _leaves(data: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(data, dict):
        return [leaf for k, v in data.items() for leaf in _leaves(v, (*prefix, str(k)))]
    return [(prefix, data)]


def test_the_shipped_yaml_holds_only_known_settings_that_differ_from_a_default() -> None:
    data = yaml.safe_load(SHIPPED.read_text()) or {}
    defaults = Settings().model_dump()
    for path, value in _leaves(data):
        here: Any = defaults
        for key in path:
            assert isinstance(here, dict) and key in here, f"unknown setting {'.'.join(path)}"
            here = here[key]
        assert here != value, f"{'.'.join(path)}: {value!r} only restates the default"


def test_from_settings_builds_the_scheduler_the_settings_describe() -> None:
    settings = Settings.load(SHIPPED, policy="uniform", seed=3, tiers={"mastered_at": 0.8})
    sched = Scheduler.from_settings(settings)
    assert sched.seed == 3 and sched.config.tiers.mastered_at == 0.8
    assert sched.catalog.n_families == 304  # settings.domains: configs/domains
    plain = Scheduler(sched.catalog, "uniform", seed=3, config=settings.scheduler_config())
    assert (plain.next_batch(64).arm == sched.next_batch(64).arm).all()


def _message(**kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        Settings.load(**kwargs)
    return str(info.value)


def test_a_bad_flag_is_blamed_on_the_flag() -> None:
    text = _message(config_file=SHIPPED, labels={"steps": "--steps"}, steps=-5)
    assert text.startswith("--steps -5: steps:"), text
    assert "scheduler.yaml" not in text


@pytest.mark.parametrize(
    ("var", "value", "field"),
    [
        ("CURRICULUM_STEPS", "abc", "steps"),
        ("CURRICULUM_TIERS__MASTERED_AT", "2", "tiers"),
        ("CURRICULUM_BREAKERS__FAULT_WINDOW", "0", "breakers.fault_window"),
        ("curriculum_ema_fast", "5", "ema_fast"),
    ],
)
def test_a_bad_environment_variable_is_blamed_on_the_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, field: str
) -> None:
    monkeypatch.setenv(var, value)
    text = _message(config_file=SHIPPED)
    assert text.startswith(f"{var}={value!r}: {field}"), text
    assert "scheduler.yaml" not in text


def test_a_bad_file_value_is_blamed_on_its_line(tmp_path: Path) -> None:
    config = tmp_path / "s.yaml"
    config.write_text(
        "steps: 10\ntiers:\n  practice_share: 0.1\n  mastered_at: 3\nbatch_size: -3\n"
    )
    text = _message(config_file=config)
    assert f"{config}:5:1: batch_size: " in text, text
    assert f"{config}:4:3: tiers: " in text, text


def test_an_unknown_nested_key_names_its_line(tmp_path: Path) -> None:
    config = tmp_path / "s.yaml"
    config.write_text("steps: 3\nskill:\n  target: 0.5\n  kk: 1\n")
    text = _message(config_file=config)
    assert f"{config}:4:3: skill.kk: " in text, text


def test_a_flag_wins_over_the_file_and_is_what_an_error_names(tmp_path: Path) -> None:
    config = tmp_path / "s.yaml"
    config.write_text("batch_size: 8\n")
    assert Settings.load(config, batch_size=16).batch_size == 16
    text = _message(config_file=config, labels={"batch_size": "--batch-size"}, batch_size=0)
    assert text.startswith("--batch-size 0: batch_size"), text
