"""Secrets out of text: passwords in URLs and ``key=value`` secrets, masked as ``***``.

One helper for every line that can reach a terminal, a log record, an event or an
exception message: the CLI's own lines, the store's and the tracker's errors, and (through
:class:`RedactingFilter`) every log record the CLI shows.
"""

from __future__ import annotations

import logging
import re

REDACTED = "***"

# scheme://user:password@ anywhere in a text. The password runs to the last '@' of the
# token, so an unencoded '@' or '/' in it is still masked (a path holding '@' may be masked
# with it: showing too little is the safe side); "host:8080/" is a port, not a password.
_URL_PASSWORD = re.compile(
    r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):(?!\d+(?:[/\s'\"]|$))"
    r"(?P<pw>[^\s'\"]*)@"
)
# password=... in a query string or a libpq keyword DSN ("host=db password=pw").
_KV_SECRET = re.compile(
    r"(?i)\b(?P<k>password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key)"
    r"=(?P<v>[^&\s;,'\"]+)"
)


def mask_secrets(text: str) -> str:
    """Mask passwords inside URLs and key=value secrets in a free-form string."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{REDACTED}@", text)
    return _KV_SECRET.sub(lambda m: f"{m['k']}={REDACTED}", text)


def mask_url(url: str) -> str:
    """A URL fit to show: its password (and secret query values) replaced by ``***``."""
    return mask_secrets(url)


class RedactingFilter(logging.Filter):
    """Masks secrets in every record it sees (install it on a handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave the record for logging to report
            return True
        masked = mask_secrets(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_text is None:
            record.exc_text = mask_secrets(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        return True
