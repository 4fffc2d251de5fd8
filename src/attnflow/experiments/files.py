"""Small file helpers of the experiments layer: durable atomic writes, timestamps, directory sizes."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

__all__ = ["atomic_write_text", "disk_usage", "fsync_dir", "utc_now"]


def utc_now() -> str:
    """The current UTC time in ISO format, to the second (``2026-05-01T12:00:00+00:00``)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def fsync_dir(directory: str | Path) -> None:
    """Flush a directory entry (a rename) to disk; best effort (not every OS or filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write a file so that a crash leaves the old or the new content, never a torn one.

    The tmp file is fsynced before ``os.replace`` (else a power loss may leave the renamed file
    empty), then the directory, so that the rename itself is durable.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def disk_usage(path: str | Path) -> int:
    """Bytes of a file, or of every file under a directory."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
