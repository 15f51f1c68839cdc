"""A store that is only read must already exist: SQLite would create an empty file."""

from __future__ import annotations

from pathlib import Path

from ._protocol import StoreError


def require_existing(url: str) -> None:
    """Raise StoreError when ``url`` names a SQLite file that is not there (other
    databases, and URLs open_store will refuse anyway, pass through)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return  # open_store names what is wrong with the URL
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or path in (None, "", ":memory:"):
        return
    if path.startswith("file:"):  # a URI filename (?uri=true)
        path = path.removeprefix("file:").split("?", 1)[0]
    if not Path(path).is_file():
        raise StoreError(
            f"cannot open the store: no SQLite file at {Path(path).resolve()}; run "
            "`curriculum simulate` first, or pass the run's --db"
        )
