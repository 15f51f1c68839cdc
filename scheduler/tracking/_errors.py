"""The one error of the tracking package: a tracking store that cannot be used as asked."""

from __future__ import annotations

from .._errors import ConfigError


class TrackingError(ConfigError):
    """A tracking URI, run id, server or argument that cannot be used; the message says why."""
