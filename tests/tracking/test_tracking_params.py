"""flatten_params, secret masking, metric names, package versions."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from mlflow.utils.validation import _validate_metric_name
from pydantic import BaseModel, SecretStr

from scheduler.tracking import flatten_params, mask_secrets, package_versions, sanitize_name


class Mode(enum.Enum):
    FAST = "fast"


@dataclass
class Quota:
    min_share: float = 0.1


class DbSettings(BaseModel):
    url: str = "postgresql://sched:hunter2@db.internal:5432/curriculum"
    password: SecretStr = SecretStr("hunter2")
    pool_size: int = 5


def test_nested_settings_flatten_to_dotted_keys() -> None:
    flat = flatten_params(
        {
            "policy": {"name": "learning_progress", "fast": 0.1, "tiers": [0, 1, 2]},
            "seed": np.int64(7),
            "mode": Mode.FAST,
            "quota": Quota(),
            "out": Path("/tmp/x"),
            "empty": {},
        }
    )
    assert flat == {
        "policy.name": "learning_progress",
        "policy.fast": "0.1",
        "policy.tiers": "[0, 1, 2]",
        "seed": "7",
        "mode": "fast",
        "quota.min_share": "0.1",
        "out": "/tmp/x",
        "empty": "{}",
    }


def test_prefix_is_prepended() -> None:
    assert flatten_params({"a": {"b": 1}}, prefix="settings") == {"settings.a.b": "1"}


def test_secrets_never_appear_in_any_value() -> None:
    flat = flatten_params(
        {
            "db": DbSettings(),
            "store": {"dsn": "host=db user=sched password=hunter2 dbname=c"},
            "hf_token": "hunter2",
            "apiKey": "hunter2",
            "credentials": {"secret": {"nested": "hunter2"}},
            "replicas": [{"url": "postgresql://u:hunter2@h/db"}, {"password": "hunter2"}],
            "links": ["https://u:hunter2@example.com/x"],
            "max_tokens": 512,
            "tokenizer": "gpt2",
        }
    )
    assert not [k for k, v in flat.items() if "hunter2" in v], flat
    assert flat["db.url"] == "postgresql://sched:***@db.internal:5432/curriculum"
    assert flat["db.password"] == "***"
    assert flat["hf_token"] == "***"
    assert flat["apiKey"] == "***"
    assert flat["credentials.secret.nested"] == "***"
    assert flat["replicas.1.password"] == "***"
    # Ordinary hyperparameters that merely contain a secret word stay visible.
    assert flat["max_tokens"] == "512"
    assert flat["tokenizer"] == "gpt2"
    assert flat["db.pool_size"] == "5"


def test_mask_secrets_in_urls_and_keyword_dsns() -> None:
    assert mask_secrets("postgresql+psycopg://a:b@h:5/d?sslmode=require") == (
        "postgresql+psycopg://a:***@h:5/d?sslmode=require"
    )
    assert (
        mask_secrets("postgresql://h/d?user=a&password=b") == "postgresql://h/d?user=a&password=***"
    )
    assert mask_secrets("sqlite:///mlflow.db") == "sqlite:///mlflow.db"


def test_long_values_and_keys_fit_mlflow_limits() -> None:
    flat = flatten_params({"x" * 400: "v" * 10_000, "y" * 400: 1})
    assert len(flat) == 2  # long keys stay distinct after cutting
    assert all(len(k) <= 250 for k in flat)
    assert all(len(v) <= 6000 for v in flat.values())


@given(st.text(max_size=300))
def test_sanitized_names_are_accepted_by_mlflow(raw: str) -> None:
    name = sanitize_name(raw)
    _validate_metric_name(name)  # raises MlflowException if MLflow would refuse it
    assert len(name) <= 250


def test_sanitize_keeps_slash_groups() -> None:
    assert sanitize_name("probe/coding/family.a") == "probe/coding/family.a"
    assert sanitize_name("probe//coding/:x/") == "probe/coding/_x"
    assert sanitize_name("../up") == "__/up"


def test_package_versions_name_the_core_stack() -> None:
    versions = package_versions()
    for pkg in ("python", "numpy", "scipy", "torch", "mlflow", "sqlmodel"):
        assert versions[pkg][0].isdigit(), (pkg, versions)
