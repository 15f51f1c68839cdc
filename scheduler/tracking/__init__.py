"""Tracking: the Tracker interface, the MLflow tracker (batched, async, resilient), and the UI."""

from .._redact import mask_secrets, mask_url
from ._errors import TrackingError
from ._mlflow import MLflowTracker
from ._names import sanitize_name
from ._params import flatten_params, package_versions
from ._protocol import NullTracker, Tracker, TrackerStats
from ._ui import UIServer, free_port, start_ui_server

__all__ = [
    "MLflowTracker",
    "NullTracker",
    "Tracker",
    "TrackerStats",
    "TrackingError",
    "UIServer",
    "flatten_params",
    "free_port",
    "mask_secrets",
    "mask_url",
    "package_versions",
    "sanitize_name",
    "start_ui_server",
]
