"""Small file helpers of the experiments layer: durable atomic writes, confined paths, markers, JSON.

Everything attnflow creates, clears or deletes on disk goes through these helpers:

* :func:`atomic_write_text` writes through a tmp file of a unique name (two writers never share one);
* :func:`confined` checks that a path lies inside the directory it was given (no ``..``, no absolute
  names, no symlink out of it);
* :func:`write_marker` / :func:`has_marker` tag the directories attnflow creates, and
  :func:`remove_owned_tree` deletes only a confined directory that carries the marker;
* :func:`read_json` reads a JSON file or raises :class:`CorruptFileError` naming the file and the fix.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "MARKER_FILE",
    "CorruptFileError",
    "UnsafePathError",
    "atomic_write_bytes",
    "atomic_write_text",
    "confined",
    "disk_usage",
    "fsync_dir",
    "has_marker",
    "read_json",
    "remove_owned_tree",
    "utc_now",
    "write_marker",
]

#: The file that marks a directory created by attnflow (a run or a sweep directory).
MARKER_FILE = ".attnflow"


class UnsafePathError(ValueError):
    """A path that attnflow would create, clear or delete lies outside its output directory, or a
    directory it would delete was not created by attnflow."""


class CorruptFileError(ValueError):
    """A file that attnflow wrote (meta.json, tasks.json, sweep.json, checkpoint.pt) cannot be read."""


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


def atomic_write_bytes(path: str | Path, write) -> None:
    """Write a file through ``write(fh)`` so that a crash leaves the old or the new content, never a torn one.

    The tmp file has a unique name in the same directory (``tempfile.mkstemp``: two processes never
    write into one tmp file); it is fsynced before ``os.replace`` (else a power loss may leave the
    renamed file empty), then the directory, so that the rename itself is durable. On any error the
    tmp file is removed and the old file is untouched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write a text file atomically (UTF-8): see :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, lambda fh: fh.write(text.encode("utf-8")))


def disk_usage(path: str | Path) -> int:
    """Bytes of a file, or of every file under a directory."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def confined(root: str | Path, name: str | Path, *, what: str = "directory") -> Path:
    """``root / name``, checked to lie strictly inside ``root`` (symlinks resolved).

    Raises
    ------
    UnsafePathError
        ``name`` is absolute, contains ``..``, or resolves (through a symlink) outside ``root``.
    """
    root_resolved = Path(root).resolve()
    text = str(name)
    parts = Path(text).parts
    if not text or Path(text).is_absolute() or ".." in parts or text in (".", ""):
        raise UnsafePathError(
            f"the {what} {text!r} must be a relative name inside {root_resolved} (no '..', not absolute); "
            "attnflow refuses to write or delete outside its output directory"
        )
    path = root_resolved / text
    resolved = path.resolve()
    if resolved == root_resolved or root_resolved not in resolved.parents:
        raise UnsafePathError(
            f"the {what} {text!r} resolves to {resolved}, outside {root_resolved}; attnflow refuses to write "
            "or delete outside its output directory (remove the symlink or choose another name)"
        )
    return path


def write_marker(directory: str | Path, kind: str) -> None:
    """Mark ``directory`` as created by attnflow (``kind``: ``run`` or ``sweep``); idempotent."""
    p = Path(directory) / MARKER_FILE
    if not p.is_file():
        mark = {"created_by": "attnflow", "kind": kind, "created": utc_now()}
        atomic_write_text(p, json.dumps(mark) + "\n")


def has_marker(directory: str | Path) -> bool:
    """Whether ``directory`` carries the marker of :func:`write_marker` (and is not a symlink)."""
    d = Path(directory)
    return not d.is_symlink() and (d / MARKER_FILE).is_file()


def remove_owned_tree(root: str | Path, name: str, *, what: str = "task directory") -> None:
    """Delete ``root / name`` if it is confined to ``root`` and carries attnflow's marker.

    Raises
    ------
    UnsafePathError
        The path escapes ``root`` (see :func:`confined`) or the directory has no marker: attnflow deletes
        only what it can prove it created.
    """
    path = confined(root, name, what=what)
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_dir() or not has_marker(path):
        raise UnsafePathError(
            f"{path} was not created by attnflow (no {MARKER_FILE} marker file), so it is not deleted; "
            "move or delete it yourself, or choose another output directory"
        )
    shutil.rmtree(path)


def read_json(path: str | Path, what: str, fix: str) -> Any:
    """The JSON content of ``path``.

    Raises
    ------
    CorruptFileError
        The file is not UTF-8 JSON; the message names the file, the error and ``fix``.
    """
    path = Path(path)
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CorruptFileError(f"{what} {path} is corrupt ({type(exc).__name__}: {exc}); {fix}") from None
