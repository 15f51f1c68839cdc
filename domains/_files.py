"""Reading manifest and variant files safely: inside the manifest root, regular, bounded.

A manifest is input from whoever wrote it. A ``source:`` of ``/etc/passwd`` or
``../../secrets.jsonl`` must not be read unless the settings allow it, ``/dev/zero`` or a
FIFO must not be read at all (one never ends, the other blocks), and a huge file must not
take the memory of the process. Every refusal is a message for a ``Problem``.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class SourcePolicy:
    """Which files a manifest may read: ``allow_outside_root`` lets a JSONL ``source:``
    point outside the manifest's root directory; ``max_bytes`` caps every file read."""

    allow_outside_root: bool = False
    max_bytes: int = MAX_FILE_BYTES

    def __post_init__(self) -> None:
        if self.max_bytes < 1:
            raise ValueError(f"max_bytes: must be at least 1, got {self.max_bytes}")


class FileRefused(Exception):
    """A file that is not read, with the reason as its message."""


def stat_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be opened at all (a loop, a dangling link, missing), or None."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop (the link points back to itself); fix or remove it"
        if os.path.islink(path):
            target = os.readlink(path)
            return f"dangling symbolic link (points to {target}, which does not exist)"
        if exc.errno == errno.ENOENT:
            return "no such file or directory"
        return f"cannot read: {exc.strerror or exc}"
    return None


def inside(path: Path, root: Path) -> bool:
    """True when ``path`` (symlinks resolved) lies under ``root`` (resolved)."""
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def read_bounded(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; FileRefused otherwise.

    Opened non-blocking, so a FIFO is refused instead of waiting for a writer; the size is
    taken from the open file and the read stops one byte past the cap whatever it says.
    """
    problem = stat_problem(path)
    if problem is not None:
        raise FileRefused(problem)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise FileRefused(f"cannot read: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise FileRefused(f"not a regular file ({_kind(info.st_mode)}); give a file")
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > max_bytes:
            raise FileRefused(_too_big(info.st_size, max_bytes))
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileRefused(_too_big(len(data), max_bytes))
    return data


def _too_big(size: int, max_bytes: int) -> str:
    return (
        f"file is {size:,} bytes, more than the limit of {max_bytes:,}; split it, or raise "
        "the limit (settings: manifest_max_bytes)"
    )


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def line_col(data: bytes | str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of a byte offset in bytes, or a character offset in text."""
    if isinstance(data, str):
        return data.count("\n", 0, offset) + 1, offset - (data.rfind("\n", 0, offset) + 1) + 1
    return data.count(b"\n", 0, offset) + 1, offset - (data.rfind(b"\n", 0, offset) + 1) + 1
