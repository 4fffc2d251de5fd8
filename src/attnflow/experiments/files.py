"""Small file helpers of the experiments layer: durable atomic writes, confined paths, markers, JSON.

Everything attnflow creates, clears or deletes on disk goes through these helpers:

* :func:`atomic_write_text` writes through a tmp file of a unique name (two writers never share one);
* :func:`confined` checks that a path lies inside the directory it was given (no ``..``, no absolute
  names, no symlink out of it);
* :func:`write_marker` / :func:`has_marker` tag the directories attnflow creates, and
  :func:`remove_owned_tree` deletes only a confined directory that carries the marker;
* :func:`read_json` reads a JSON file or raises :class:`CorruptFileError` naming the file and the fix;
* :func:`write_output` / :func:`write_output_path` write what ``report``, ``plot`` and ``animate`` produce:
  into a new tmp file of the output's directory, then ``os.replace``, never through a symlink planted at
  the output's name (refused: :func:`check_output_target`), never outside ``root`` when one is given;
* :func:`inside` resolves a path read from a received directory and refuses one that leaves it;
* :func:`read_npy` reads an input array (``tokens.path``, ``heads.path``, ``density.path``): a regular
  ``.npy`` file, its header checked (no object dtype, a size under a cap) before any data is read.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "MARKER_FILE",
    "MAX_NPY_BYTES",
    "CorruptFileError",
    "InputFileError",
    "UnsafePathError",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_output_target",
    "confined",
    "inside",
    "disk_usage",
    "fsync_dir",
    "has_marker",
    "read_bounded",
    "read_json",
    "read_npy",
    "read_npy_header",
    "remove_owned_tree",
    "utc_now",
    "write_marker",
    "write_output",
    "write_output_path",
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


#: The largest JSON file attnflow reads from a directory (meta.json, tasks.json, summary.json...).
MAX_JSON_BYTES = 64 * 2**20


def read_json(path: str | Path, what: str, fix: str) -> Any:
    """The JSON content of ``path`` (a regular file of at most :data:`MAX_JSON_BYTES`).

    Raises
    ------
    CorruptFileError
        The file is not a regular file (a FIFO, a device), is larger than the cap, or is not UTF-8 JSON;
        the message names the file, the error and ``fix``.
    """
    path = Path(path)
    raw = read_bounded(path, MAX_JSON_BYTES, what, fix)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        detail = str(exc)[:200]
        raise CorruptFileError(f"{what} {path} is corrupt ({type(exc).__name__}: {detail}); {fix}") from None


def read_bounded(
    path: str | Path,
    limit: int,
    what: str,
    fix: str,
    error: type[Exception] = CorruptFileError,
    allowed: str = "allowed",
) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, read without following it into a FIFO or a
    device (``O_NONBLOCK`` open, then ``fstat``): ``/dev/zero``, a FIFO or a huge file fail at once.

    Raises
    ------
    error (default CorruptFileError)
        Not a regular file, larger than ``limit``, or unreadable; the message names ``what``, the path
        and ``fix`` (``allowed`` ends the size message, e.g. "a config may have").
    """
    path = Path(path)
    name = repr(str(path)[:200])
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {exc.strerror or exc}; {fix}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {name} is not a regular file (a FIFO, a device or a directory); {fix}")
        if st.st_size > limit:
            raise error(f"{what} {name} has {st.st_size} bytes, more than the {limit} {allowed}; {fix}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise error(f"{what} {name} has more than the {limit} bytes {allowed}; {fix}")
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {exc.strerror or exc}; {fix}") from None
    finally:
        os.close(fd)


def inside(root: str | Path, path: str | Path, *, what: str = "file") -> Path:
    """``path`` (as the caller would open it, e.g. ``root / name``), checked to resolve inside ``root``.

    For what attnflow *reads* from a received run or study directory: a name from ``summary.json``, a
    ``*.png`` that is a symlink, ``../`` or an absolute path are refused, so nothing outside the directory
    is read into a report.

    Raises
    ------
    UnsafePathError
        The path resolves (symlinks followed) outside ``root``.
    """
    root_resolved = Path(root).resolve()
    p = Path(path)
    resolved = p.resolve()
    if resolved != root_resolved and root_resolved not in resolved.parents:
        raise UnsafePathError(
            f"the {what} {str(path)[:200]!r} resolves to {str(resolved)[:200]}, outside {root_resolved}; "
            "attnflow reads nothing outside the directory it was given (remove the link or the path)"
        )
    return p


def check_output_target(
    path: str | Path, *, root: str | Path | None = None, what: str = "output file"
) -> Path:
    """Check that attnflow may write ``path``: not a symlink, not a directory or device, inside ``root``.

    Raises
    ------
    UnsafePathError
        ``path`` is a symbolic link (a write would land on its target), exists and is not a regular file,
        or (``root`` given) lies outside ``root``.
    FileNotFoundError
        The directory of ``path`` does not exist.
    """
    p = Path(path)
    if p.is_symlink():
        raise UnsafePathError(
            f"the {what} {p} is a symbolic link (to {os.readlink(p)[:200]}); attnflow does not write through "
            "a link: remove it or choose another output"
        )
    if p.exists() and not p.is_file():
        raise UnsafePathError(f"the {what} {p} exists and is not a regular file; choose another output")
    if root is not None:
        root_resolved = Path(root).resolve()
        parent = p.parent.resolve()
        if parent != root_resolved and root_resolved not in parent.parents:
            raise UnsafePathError(
                f"the {what} {p} lies outside {root_resolved}; attnflow writes only inside the directory "
                "it was given"
            )
    if not p.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write the {what} {p}: its directory {p.parent} does not exist; create it first or "
            "choose another output"
        )
    return p


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_output_path(
    path: str | Path, write_to, *, root: str | Path | None = None, what: str = "output file"
) -> Path:
    """Write an output file through ``write_to(tmp_path)`` (a library that wants a file name): the tmp
    file is new, in the output's directory, with the output's suffix; it replaces ``path`` atomically.

    The target is checked first (:func:`check_output_target`); the file gets the usual permissions
    (``0o666`` less the umask), not ``mkstemp``'s private ``0o600``.
    """
    p = check_output_target(path, root=root, what=what)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.stem}.", suffix=p.suffix or ".tmp", dir=p.parent)
    os.close(fd)
    try:
        write_to(Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())
        check_output_target(p, root=root, what=what)  # a link planted while we wrote is refused too
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(p.parent)
    return p


def write_output(
    path: str | Path, write, *, root: str | Path | None = None, what: str = "output file"
) -> Path:
    """Write an output file through ``write(fh)`` (a binary file object): see :func:`write_output_path`."""

    def to_path(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())

    return write_output_path(path, to_path, root=root, what=what)


#: The largest input array (``.npy``) read without ``allow_large: true`` in the config (bytes of its data).
MAX_NPY_BYTES = 2**30
#: The largest ``.npy`` header read (numpy's own default).
NPY_HEADER_BYTES = 10_000


class InputFileError(ValueError):
    """An input array a config names (``tokens.path``, ``heads.path``, ``density.path``) cannot be read:
    not a regular file, not a ``.npy`` array, an object dtype, larger than the cap, or truncated."""


def read_npy_header(fh) -> tuple:
    """``(shape, fortran_order, dtype)`` from the header of the ``.npy`` stream ``fh`` (format 1.0 or 2.0,
    a header of at most 10 000 bytes), leaving ``fh`` at the first data byte; nothing else is read.

    Raises
    ------
    ValueError
        Not an ``.npy`` header of a format read here (the callers turn it into their error).
    """
    from numpy.lib import format as npy_format

    version = npy_format.read_magic(fh)
    if version == (1, 0):
        return npy_format.read_array_header_1_0(fh, NPY_HEADER_BYTES)
    if version == (2, 0):
        return npy_format.read_array_header_2_0(fh, NPY_HEADER_BYTES)
    raise ValueError(f"npy format version {version} is not read (1.0 and 2.0 are)")


def read_npy(path: str | Path, max_bytes: int | None = MAX_NPY_BYTES, *, what: str = "input array") -> Any:
    """The array of a ``.npy`` file, read only after its header has been checked.

    The file is opened without following it into a FIFO or a device (``O_NONBLOCK`` open, ``fstat``: a
    FIFO does not hang, ``/dev/zero`` is not read); the header (shape, dtype) is read with
    :mod:`numpy.lib.format` and the data only when the dtype holds no Python objects, the data's bytes
    (shape times item size) are at most ``max_bytes`` and the file holds them all (a header that claims a
    huge shape over a few bytes allocates nothing).

    Parameters
    ----------
    path : str or Path
    max_bytes : int or None
        The cap on the data's bytes (None: no cap but the file's own size, for ``allow_large: true``).
    what : str
        The config key, for the messages (``tokens.path``).

    Raises
    ------
    InputFileError
        Naming the rule, the value and the fix.
    """
    from numpy.lib import format as npy_format

    name = repr(str(path)[:200])
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        why = exc.strerror or exc
        raise InputFileError(f"cannot read the {what} {name}: {why}; give a .npy file") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(
                f"the {what} {name} is not a regular file (a FIFO, a device or a directory); give a .npy "
                "file written by numpy.save"
            )
        try:
            shape, fortran, dtype = read_npy_header(fh)
        except (ValueError, OSError, SyntaxError) as exc:
            raise InputFileError(
                f"the {what} {name} is not a .npy array ({str(exc)[:200]}); give a file written by "
                "numpy.save (an .npz archive or a pickle is not read)"
            ) from None
        if dtype.hasobject:
            raise InputFileError(
                f"the {what} {name} holds an object dtype ({dtype}); attnflow reads numbers only (an "
                "object array is a pickle): save a float array"
            )
        if dtype.kind not in "biufc":
            raise InputFileError(
                f"the {what} {name} holds {dtype} values (not numbers); attnflow reads numeric arrays "
                "only: save a float array"
            )
        count = 1
        for s in shape:
            count *= int(s)
        nbytes = count * dtype.itemsize
        if max_bytes is not None and nbytes > max_bytes:
            raise InputFileError(
                f"the {what} {name} holds shape {shape} of {dtype}: {nbytes} bytes (about "
                f"{nbytes / 2**30:.3g} GiB), more than the {max_bytes} bytes an input array may have; "
                "give a smaller array, or set allow_large: true in the config if you mean it"
            )
        left = st.st_size - fh.tell()
        if left < nbytes:
            raise InputFileError(
                f"the {what} {name} is truncated: its header says shape {shape} of {dtype} ({nbytes} "
                f"bytes) but it holds {left}; save the array again"
            )
        fh.seek(0)
        try:
            return npy_format.read_array(fh, allow_pickle=False, max_header_size=NPY_HEADER_BYTES)
        except (ValueError, OSError) as exc:
            raise InputFileError(f"cannot read the {what} {name} ({str(exc)[:200]}); save it again") from None
