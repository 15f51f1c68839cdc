"""The one error of the tracking package: a tracking store that cannot be used as asked."""

from __future__ import annotations

from .._errors import ConfigError


class TrackingError(ConfigError):
    """A tracking URI, run id, server or argument that cannot be used; the message says why.

    ``busy`` marks a server that answered, but with a status a retry may fix (a 5xx while
    its database is locked, a 429): worth retrying, unlike a refused connection."""

    def __init__(self, message: str, *, busy: bool = False) -> None:
        super().__init__(message)
        self.busy = busy
