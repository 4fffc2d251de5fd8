"""The run store: one run-directory format and one set of rules for particle, PDE and training runs.

Every kind of run is a thin user of this module (``docs/architecture.md``, "One store, three run kinds"):
:mod:`attnflow.experiments.store` (particle runs), :mod:`attnflow.experiments.pde_runs` (density runs of
the Transformer PDE) and :mod:`attnflow.experiments.training_run` (training runs). A run directory holds

    .attnflow        the marker: attnflow created it and may clear its run files
    .attnflow.lock   the lock (:class:`attnflow.experiments.locking.DirectoryLock`)
    config.yaml      the validated config (every default filled in)
    meta.json        status (running / done / interrupted / failed / diverged), step, times, errors
    checkpoint.pt    the state to resume from: tensors, numbers, strings only, replaced atomically
    data.zarr        labelled records (xarray, Zarr format 2, consolidated): particle and PDE runs

plus the files of its kind (a training run's ``history.json``, ``summary.json``, ``*.npz``, ``figures/``).

One rule each (``docs/reliability.md``, "Threat model"):

* :func:`run_session`: create the directory, hold its lock, turn SIGTERM into Ctrl-C
  (:func:`sigterm_as_interrupt`) and claim it (:func:`claim_run_dir`): resume a run of the same config,
  refuse one of another config (:class:`RunConfigMismatchError`, the keys from :func:`stored_config_diff`),
  refuse run files attnflow did not create (:class:`ForeignDirectoryError`), else clear them and start;
* :func:`read_meta` / :func:`write_meta` / :func:`update_meta` / :func:`failure_fields`: ``meta.json``,
  read bounded and never through a link that leaves the directory;
* :func:`save_checkpoint` / :func:`restore_checkpoint`: a checkpoint is written atomically and read with
  ``torch.load(weights_only=True)`` (a crafted pickle is refused unread), only when it is a regular file
  (not a link) no larger than the run's own size bound, and only of the format its kind writes;
* :func:`write_zarr`, :func:`check_store`, :func:`check_store_dims`, :func:`truncate_store`,
  :func:`open_store`: the labelled Zarr store, written in one format, read only when it holds folders and
  regular files (no link, no FIFO) and, where the config fixes its sizes, only when the sizes its metadata
  declare are those (refused before any array is allocated);
* :func:`resume_hint`: what ``info`` tells the user about an interrupted run.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import stat
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr
import zarr

from .errors import ConfigError
from .files import (
    MARKER_FILE,
    MAX_JSON_BYTES,
    NPY_HEADER_BYTES,  # the cap on an .npy header (files.read_npy_header)
    CorruptFileError,
    UnsafePathError,
    atomic_write_bytes,
    atomic_write_text,
    has_marker,
    inside,
    read_bounded,
    read_json,
    read_npy_header,
    utc_now,
    write_marker,
)
from .locking import DirectoryLock

__all__ = [
    "CHECKPOINT_FILE",
    "MAX_NPZ_BYTES",
    "CONFIG_FILE",
    "DATA_DIR",
    "META_FILE",
    "RUN_FILES",
    "ZARR_FORMAT",
    "CorruptRunError",
    "ForeignDirectoryError",
    "RunConfigMismatchError",
    "check_store",
    "check_store_covers",
    "checkpoint_bound",
    "check_store_dims",
    "claim_run_dir",
    "clear_run_files",
    "expected_steps",
    "failure_fields",
    "load_checkpoint",
    "one_line",
    "open_store",
    "read_meta",
    "read_meta_or_empty",
    "read_npz",
    "restore_checkpoint",
    "resume_hint",
    "run_session",
    "save_checkpoint",
    "sigterm_as_interrupt",
    "stopped_by_user",
    "stored_config_diff",
    "time_arrays",
    "truncate_store",
    "update_meta",
    "write_meta",
    "write_zarr",
]

CONFIG_FILE = "config.yaml"
META_FILE = "meta.json"
DATA_DIR = "data.zarr"
CHECKPOINT_FILE = "checkpoint.pt"
#: The files every run directory may hold (a kind adds its own): the only ones attnflow clears in it.
RUN_FILES = (DATA_DIR, CHECKPOINT_FILE, META_FILE, CONFIG_FILE)
#: Zarr format 2 with consolidated metadata (``.zmetadata``): read by every Zarr implementation and by
#: plain ``xr.open_zarr`` without warnings (format 3 has no consolidated metadata in its spec yet).
ZARR_FORMAT = 2
#: Upper bound on the size of one Zarr chunk along time (bytes).
CHUNK_BYTES = 16 * 2**20
#: Headroom of the checkpoint size bound over a run's memory estimate: the estimates are within a factor
#: of about 2 of what a run allocates (``pde/resources.py``, ``experiments/resources.py``) and a
#: checkpoint holds a part of that state; the fixed part covers torch's zip records of a tiny run.
CHECKPOINT_MARGIN = 4.0
CHECKPOINT_MIN_BYTES = 16 * 2**20


class RunConfigMismatchError(ValueError):
    """The run directory holds a run of a different config; it cannot be resumed."""


class CorruptRunError(CorruptFileError):
    """A run directory's checkpoint or store is truncated, inconsistent or not what it claims."""


class ForeignDirectoryError(UnsafePathError, RunConfigMismatchError):
    """The directory holds run files that attnflow did not create (no marker): nothing is overwritten."""


def one_line(text: str, limit: int = 300) -> str:
    """The first line of ``text``, cut to ``limit`` characters (messages built from a foreign file)."""
    first = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


# -- the directory -------------------------------------------------------------------------------------
def clear_run_files(out: Path, run_files: Iterable[str]) -> None:
    """Delete the run files (only those) of a directory that carries attnflow's marker.

    Raises
    ------
    UnsafePathError
        The directory carries no marker (a last guard: :func:`claim_run_dir` refuses first).
    """
    if not has_marker(out):
        raise UnsafePathError(f"{out} was not created by attnflow (no {MARKER_FILE}); nothing is deleted")
    for name in run_files:
        p = out / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()


def claim_run_dir(
    out: Path,
    *,
    kind: str,
    run_files: Iterable[str],
    config_file: str,
    config_diff: Callable[[Path], list],
    checkpoint_file: str,
    resume: bool = True,
) -> bool:
    """Decide what a run may do with ``out`` (held locked by the caller); returns whether it resumes.

    Parameters
    ----------
    out : Path
        The run directory (exists, locked).
    kind : str
        ``run``, ``PDE run`` or ``training run``: how messages and the marker call it.
    run_files : names
        The files and folders this kind of run writes: the only ones it clears.
    config_file : str
        The name of the stored config.
    config_diff : callable
        ``config_diff(stored_config_path)`` -> the differing keys between the stored config and the new one
        ([] when equal), each a dotted key or a ``(key, old, new)`` triple; raises
        :class:`RunConfigMismatchError` when the stored config is unreadable.
    checkpoint_file : str
        The checkpoint's name: a run of the same config resumes when it is there.
    resume : bool
        Resume a run of the same config; ``False`` clears the run files of a marked directory.

    Raises
    ------
    RunConfigMismatchError
        ``resume`` and the directory holds a run of another config.
    ForeignDirectoryError
        The directory holds run files and no ``.attnflow`` marker, and is not a legacy run of this very
        config being resumed: nothing is overwritten or deleted.
    """
    run_files = tuple(run_files)
    cfg_path = out / config_file
    present = [n for n in run_files if (out / n).exists() or (out / n).is_symlink()]
    same = False
    if resume and cfg_path.is_file() and not cfg_path.is_symlink():
        diff = config_diff(cfg_path)
        if diff:
            keys = [d if isinstance(d, str) else d[0] for d in diff]
            detail = "; ".join(f"{d[0]}: {d[1]!r} -> {d[2]!r}" for d in diff[:8] if not isinstance(d, str))
            more = " ..." if len(diff) > 8 else ""
            raise RunConfigMismatchError(
                f"{out} holds a {kind} with a different config, so it cannot be resumed: differing keys "
                f"{', '.join(keys[:8])}{more}{f' ({detail}{more})' if detail else ''}; choose another "
                "out_dir or pass resume=False to overwrite it"
            )
        same = True
    if present and not has_marker(out) and not same:
        raise ForeignDirectoryError(
            f"{out} holds {', '.join(present)} that attnflow did not create (no {MARKER_FILE} marker "
            "file), so nothing there is overwritten or deleted; move them away or choose another out_dir"
        )
    write_marker(out, kind)  # ours from now on (an adopted legacy run of this config included)
    if same:
        return (out / checkpoint_file).is_file()
    if present:
        clear_run_files(out, run_files)
    return False


def stored_config_diff(
    load: Callable[[Path], Any],
    compare: Callable[[Any], list],
    *,
    fix: str = "choose another out_dir or pass resume=False to overwrite it",
    limit: int | None = 300,
) -> Callable[[Path], list]:
    """The ``config_diff`` of :func:`claim_run_dir` for a kind of run: read the stored config, compare it.

    Parameters
    ----------
    load : callable
        ``load(path)`` -> the stored config; raises :class:`~attnflow.experiments.errors.ConfigError`
        when the file is not a valid config of this kind.
    compare : callable
        ``compare(old_config)`` -> the differing keys (see ``config_diff`` of :func:`claim_run_dir`).
    fix : str
        What the user can do when the stored config cannot be read.
    limit : int or None
        The reason is cut to its first line of at most ``limit`` characters (:func:`one_line`);
        ``None`` keeps the whole message.

    Returns
    -------
    callable
        ``diff(stored_config_path)``; a stored config that does not load raises
        :class:`RunConfigMismatchError` naming the file, the reason and ``fix``.
    """

    def diff(path: Path) -> list:
        try:
            old = load(path)
        except ConfigError as exc:
            reason = exc if limit is None else one_line(exc, limit)
            raise RunConfigMismatchError(
                f"{path} cannot be read, so the run cannot be resumed ({reason}); {fix}"
            ) from None
        return compare(old)

    return diff


@contextlib.contextmanager
def run_session(
    out_dir: str | Path,
    *,
    kind: str,
    run_files: Iterable[str],
    config_diff: Callable[[Path], list],
    resume: bool = True,
    what: str = "run directory",
) -> Iterator[bool]:
    """Hold a run directory for one run: created, locked, SIGTERM as Ctrl-C, claimed; yields whether it
    resumes.

    The one entry of every kind of run: :func:`~attnflow.experiments.locking.DirectoryLock` (a second
    process is refused, naming the holder), :func:`sigterm_as_interrupt` and :func:`claim_run_dir` with the
    store's file names (:data:`CONFIG_FILE`, :data:`CHECKPOINT_FILE`).

    Parameters
    ----------
    out_dir : path
        The run directory (created if needed).
    kind : str
        ``run``, ``PDE run`` or ``training run`` (messages and the marker).
    run_files : names
        The files and folders this kind writes (:data:`RUN_FILES` and its own).
    config_diff : callable
        From :func:`stored_config_diff`.
    resume : bool
        Resume a run of the same config; ``False`` clears the run files of a marked directory.
    what : str
        How the lock's refusal calls the directory.

    Raises
    ------
    DirectoryLockedError, RunConfigMismatchError, ForeignDirectoryError
        See :class:`~attnflow.experiments.locking.DirectoryLock` and :func:`claim_run_dir`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(out, what), sigterm_as_interrupt():
        yield claim_run_dir(
            out,
            kind=kind,
            run_files=run_files,
            config_file=CONFIG_FILE,
            config_diff=config_diff,
            checkpoint_file=CHECKPOINT_FILE,
            resume=resume,
        )


# -- meta.json -----------------------------------------------------------------------------------------
def read_meta(out_dir: str | Path) -> dict:
    """The ``meta.json`` of a run directory of any kind ({} if absent).

    Raises
    ------
    CorruptFileError
        ``meta.json`` is not a JSON object (or not a regular file of sane size: a bounded read).
    UnsafePathError
        ``meta.json`` is a symlink that leaves the directory (nothing outside it is read).
    """
    p = Path(out_dir) / META_FILE
    if not (p.exists() or p.is_symlink()):
        return {}
    inside(out_dir, p, what="run file")
    if not p.exists():
        return {}  # a dangling link inside the directory
    fix = "resume the run (run_experiment(config, out_dir) on this directory, same config) to rewrite it"
    meta = read_json(p, "the run file", fix)
    if not isinstance(meta, dict):
        raise CorruptFileError(
            f"the run file {p} is corrupt (a JSON {type(meta).__name__}, not an object); {fix}"
        )
    return meta


def read_meta_or_empty(out_dir: str | Path) -> dict:
    """``meta.json`` or {} when it is corrupt (it is informative only: the checkpoint and the store rule)."""
    try:
        return read_meta(out_dir)
    except CorruptFileError:
        return {}


def write_meta(out_dir: str | Path, meta: dict) -> None:
    """Replace ``meta.json`` atomically (indented JSON; values JSON cannot hold are written as strings)."""
    atomic_write_text(Path(out_dir) / META_FILE, json.dumps(meta, indent=2, default=str) + "\n")


def update_meta(out_dir: str | Path, **fields) -> dict:
    """Merge ``fields`` (and ``updated``: now) into the stored ``meta.json`` (a corrupt one is replaced)
    and write it; returns the new content."""
    meta = read_meta_or_empty(out_dir)
    meta.update(fields, updated=utc_now())
    write_meta(out_dir, meta)
    return meta


def stopped_by_user(exc: BaseException | None) -> bool:
    """Ctrl-C or SIGTERM (:func:`sigterm_as_interrupt`), also when it surfaced from compiled code as another
    error (numba's SystemError) or as the particle driver's ``RunInterrupted``."""
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):  # the driver's RunInterrupted included
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def failure_fields(exc: BaseException, error: str | None = None) -> dict:
    """What ``meta.json`` says about a run stopped by ``exc`` (the one rule of every kind): ``status``
    ``interrupted`` (Ctrl-C, SIGTERM) or ``failed``, ``ended``, ``error`` (one line, or ``error``) and the
    ``traceback``."""
    return {
        "status": "interrupted" if stopped_by_user(exc) else "failed",
        "ended": utc_now(),
        "error": error if error is not None else f"{type(exc).__name__}: {one_line(exc, 500)}",
        "traceback": "".join(traceback.format_exception(exc))[-20000:],
    }


def checkpoint_bound(memory_bytes: float) -> int:
    """The largest checkpoint a run whose memory estimate is ``memory_bytes`` reads (see
    :data:`CHECKPOINT_MARGIN`): a checkpoint holds a part of the state the run keeps in memory."""
    return int(max(CHECKPOINT_MARGIN * float(memory_bytes), CHECKPOINT_MIN_BYTES))


# -- checkpoints ---------------------------------------------------------------------------------------
def save_checkpoint(path: Path, state: dict) -> None:
    """Write a checkpoint atomically (tmp file, fsync, ``os.replace``); ``state`` holds tensors only.

    Raises
    ------
    TypeError
        ``state`` holds an object that ``torch.load(weights_only=True)`` would refuse (a numpy array, a
        class instance): checked before anything is written, so a run never writes what it cannot resume.
    """
    _check_tensors_only(state, "checkpoint")
    atomic_write_bytes(path, lambda fh: torch.save(state, fh))


_PLAIN = (bool, int, float, complex, str, bytes, type(None), torch.Tensor, torch.dtype, torch.Size)


def _check_tensors_only(obj: Any, where: str) -> None:
    stack = [(obj, where)]
    while stack:
        o, w = stack.pop()
        if isinstance(o, dict):
            stack.extend((v, f"{w}[{k!r}]") for k, v in o.items())
            stack.extend((k, f"{w} key {k!r}") for k in o)
        elif isinstance(o, (list, tuple)) and type(o) in (list, tuple):
            stack.extend((v, f"{w}[{i}]") for i, v in enumerate(o))
        elif type(o) not in _PLAIN and not isinstance(o, torch.Tensor):
            raise TypeError(
                f"{w} is a {type(o).__name__}: a checkpoint holds tensors, numbers, strings and lists/dicts "
                "of them only (torch.load(weights_only=True) reads nothing else); convert it to a tensor"
            )


def load_checkpoint(path: Path, fix: str, max_bytes: int | None = None) -> Any:
    """The content of a checkpoint, read with ``torch.load(weights_only=True)`` (no code runs).

    The file is opened without following a link (``O_NOFOLLOW``) or blocking on a FIFO, and its size is
    checked before torch reads it; torch itself refuses a tensor whose declared size is not the size of
    its record, so nothing larger than the file is allocated.

    Parameters
    ----------
    path : Path
    fix : str
        What the user can do (ends every message).
    max_bytes : int or None
        The largest file read (:func:`checkpoint_bound` of the run's memory estimate); None: no bound.

    Raises
    ------
    UnsafePathError
        The checkpoint is a symbolic link (attnflow writes none; it is not followed).
    CorruptRunError
        One line: the file is not a regular file, is larger than ``max_bytes``, is truncated, or holds
        anything but tensors and plain data (a pickle of other objects is refused by torch before any of
        it is built).
    """
    path = Path(path)
    if path.is_symlink():
        raise UnsafePathError(
            f"{path} is a symbolic link (to {os.readlink(path)[:200]}); attnflow reads no checkpoint "
            f"through a link; {fix}"
        )
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise CorruptRunError(f"{path} cannot be read ({exc.strerror or exc}); {fix}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CorruptRunError(f"{path} is not a regular file; {fix}")
        if max_bytes is not None and st.st_size > max_bytes:
            raise CorruptRunError(
                f"{path} has {st.st_size} bytes, more than the {max_bytes} a checkpoint of this run can "
                f"hold (refused unread); {fix}"
            )
        try:
            return torch.load(fh, weights_only=True, map_location="cpu")
        except Exception as exc:  # noqa: BLE001 - truncated, foreign or crafted files all end here
            crafted = "weights_only" in str(exc) or "Unsupported global" in str(exc)
            kind = (
                "holds objects other than tensors (refused unread)"
                if crafted
                else "is truncated or unreadable"
            )
            raise CorruptRunError(
                f"{path.name} {kind} ({path}: {type(exc).__name__}: {one_line(exc, 160)}); {fix}"
            ) from None


def restore_checkpoint(
    path: Path,
    *,
    fmt: int,
    restore: Callable[[dict], Any],
    fix: str,
    max_bytes: int | None = None,
    what: str = "checkpoint",
) -> Any:
    """Read a checkpoint (:func:`load_checkpoint`), check its format and hand it to ``restore``.

    Parameters
    ----------
    path : Path
    fmt : int
        The ``format`` entry this kind writes.
    restore : callable
        ``restore(state) -> result``: validates the state and restores the run from it; any error it
        raises (a missing key, a wrong shape) becomes one :class:`CorruptRunError` line.
    fix, max_bytes
        See :func:`load_checkpoint`.
    what : str
        How the message calls it (``checkpoint``, ``PDE checkpoint``).

    Raises
    ------
    CorruptRunError
        Not a checkpoint of ``fmt``, or ``restore`` refused it.
    """
    state = load_checkpoint(path, fix, max_bytes)
    if not (isinstance(state, dict) and state.get("format") == fmt):
        raise CorruptRunError(f"{path} is not a {what} of this attnflow version (format {fmt}); {fix}")
    try:
        return restore(state)
    except CorruptRunError:
        raise
    except Exception as exc:  # noqa: BLE001 - a crafted or foreign state: missing keys, wrong types
        raise CorruptRunError(
            f"{path} does not fit this run ({type(exc).__name__}: {one_line(exc, 200)}); {fix}"
        ) from None


# -- the labelled Zarr store ---------------------------------------------------------------------------
_STORE_FIX = "attnflow reads nothing through a link in a run's store: remove it, or rerun with --no-resume"


#: The largest ``.npz`` archive of a run attnflow reads (the sum of its arrays' bytes): a training run's
#: head law (layers x recorded steps x H x d x d float32) at the largest configs stays far below it.
MAX_NPZ_BYTES = 2**30
_ZIP_RECORDS = 2**20  # the zip records of an archive beside its members' bytes (a few hundred bytes each)


def read_npz(path: str | Path, fix: str, max_bytes: int = MAX_NPZ_BYTES) -> dict[str, np.ndarray]:
    """The arrays of a run's ``.npz`` archive, read only after every member's declared size was checked.

    The file is read by :func:`~attnflow.experiments.files.read_bounded` (never into a FIFO or a device); each
    member must be an ``.npy`` array of numbers or fixed-width strings (no object dtype: no pickle,
    ``allow_pickle=False``) whose header's shape and dtype fit in the bytes the archive declares for it,
    and the archive's declared bytes together at most ``max_bytes``: a crafted archive that claims a huge
    array over a few bytes, or a compressed member that would inflate past the bound, is refused before
    anything is allocated.

    Parameters
    ----------
    path : str or Path
    fix : str
        What the user should do, ending every message.
    max_bytes : int
        The cap on the sum of the members' uncompressed bytes.

    Returns
    -------
    dict
        Member name (without ``.npy``) -> array.

    Raises
    ------
    CorruptRunError
        Not a regular file, not a zip archive of ``.npy`` arrays, a member of another dtype than numbers or
        strings, a header larger than its member, or more bytes than ``max_bytes``; one line naming the
        file, the rule, the value and ``fix``.
    """
    import io
    import zipfile

    from numpy.lib import format as npy_format

    name = repr(str(path)[:200])
    # the archive's bytes: a regular file (no FIFO, no device), at most the bound (an .npz on disk is no
    # larger than its arrays plus its zip records)
    raw = read_bounded(
        path,
        max_bytes + _ZIP_RECORDS,
        "the run file",
        fix,
        error=CorruptRunError,
        allowed="a run's .npz may have",
    )
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            infos = zf.infolist()
            total = sum(i.file_size for i in infos)
            if total > max_bytes:
                raise CorruptRunError(
                    f"{name} declares {total} bytes of arrays, more than the {max_bytes} a run's .npz "
                    f"may hold (refused unread); {fix}"
                )
            out = {}
            for info in infos:
                key = _npz_member_checked(zf, info, name, fix)
                with zf.open(info) as member:
                    out[key] = npy_format.read_array(
                        member, allow_pickle=False, max_header_size=NPY_HEADER_BYTES
                    )
            return out
    except CorruptRunError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, SyntaxError, EOFError) as exc:
        raise CorruptRunError(
            f"{name} is not an .npz archive of arrays ({type(exc).__name__}: {one_line(exc, 200)}); {fix}"
        ) from None


def _npz_member_checked(zf, info, name: str, fix: str) -> str:
    """Check one member of an ``.npz`` archive from its header alone (see :func:`read_npz`); its key."""
    member_name = repr(info.filename[:100])
    if not info.filename.endswith(".npy"):
        raise CorruptRunError(f"{name} holds {member_name}, not an .npy array; {fix}")
    with zf.open(info) as member:
        shape, _, dtype = read_npy_header(member)  # the header alone (the one reader of .npy headers)
        data_bytes = info.file_size - member.tell()
    if dtype.hasobject or dtype.kind not in "biufcUS":
        raise CorruptRunError(
            f"{name}: the array {member_name} holds {dtype} values, not numbers or strings (an object array "
            f"is a pickle, never read); {fix}"
        )
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if nbytes > data_bytes:
        raise CorruptRunError(
            f"{name}: the array {member_name} declares shape {shape} of {dtype} ({nbytes} bytes) over "
            f"{data_bytes} bytes of data (refused unread); {fix}"
        )
    return info.filename[: -len(".npy")]


def check_store(store: str | Path) -> Path:
    """Check that a run's ``data.zarr`` holds only folders and regular files, before anything reads it.

    attnflow writes no link into a store; a received store whose chunk or ``.zarray`` is a symbolic link
    (to a private file, or out of the run directory) would be read through it, and a FIFO in place of a
    chunk would hang the read. Every entry is examined with ``lstat`` (links are not followed), and a
    metadata file (``.zarray``, ``.zattrs``, ``.zgroup``, ``.zmetadata``) larger than
    :data:`~attnflow.experiments.files.MAX_JSON_BYTES` is refused before Zarr reads it.

    Raises
    ------
    UnsafePathError
        The store itself or an entry in it is a symbolic link, or an entry is neither a folder nor a
        regular file; one line naming the entry, where it leads and the fix.
    CorruptRunError
        A metadata file is larger than the bound.
    """
    store = Path(store)
    if store.is_symlink():
        raise UnsafePathError(f"{store} is a symbolic link (to {os.readlink(store)[:200]}); {_STORE_FIX}")
    if not store.is_dir():
        return store
    pending = [store]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for e in entries:
                if e.is_symlink():
                    target = os.readlink(e.path)[:200]
                    raise UnsafePathError(
                        f"{e.path[:300]} in the run's store is a symbolic link (to {target}); {_STORE_FIX}"
                    )
                if e.is_dir(follow_symlinks=False):
                    pending.append(Path(e.path))
                elif not e.is_file(follow_symlinks=False):
                    raise UnsafePathError(
                        f"{e.path[:300]} in the run's store is not a regular file (a FIFO, a socket or a "
                        f"device); {_STORE_FIX}"
                    )
                elif e.name.startswith(".z") and e.stat(follow_symlinks=False).st_size > MAX_JSON_BYTES:
                    raise CorruptRunError(
                        f"{e.path[:300]} in the run's store has {e.stat(follow_symlinks=False).st_size} "
                        f"bytes, more than the {MAX_JSON_BYTES} a metadata file may have (refused unread); "
                        "the store is damaged: rerun with resume=False"
                    )
    return store


def _dims(arr) -> tuple[str, ...] | None:
    names = getattr(arr.metadata, "dimension_names", None)
    if names is None:
        names = arr.attrs.get("_ARRAY_DIMENSIONS")
    return tuple(names) if names is not None else None


def time_arrays(store: Path, mode: str = "r") -> dict:
    """Name -> (array, axis of ``time``) of every array of the store with a ``time`` dimension (the store
    checked first: :func:`check_store`; only metadata are read)."""
    check_store(store)
    group = zarr.open_group(store, mode=mode, use_consolidated=False)
    out = {}
    for name, arr in group.arrays():
        dims = _dims(arr)
        if dims and "time" in dims:
            out[name] = (arr, dims.index("time"))
    return out


def check_store_dims(
    store: str | Path, sizes: dict[str, int | None], fix: str, growing: Iterable[str] = ()
) -> None:
    """Refuse a store whose metadata declare other sizes than its config fixes, before any data is read.

    Every array must carry dimension names, each of them a key of ``sizes``, with exactly that length: a
    received store that declares a huge array (an oversize ``shape`` in a ``.zarray`` over a few bytes of
    chunks) is refused here instead of being allocated by ``.load()``. A dimension in ``growing`` (``time``
    of a run being written or resumed) may be shorter than its size, never longer; a size ``None`` is not
    fixed by the config (the token count of a run whose tokens come from a file that is not at hand) and is
    not checked.

    Raises
    ------
    UnsafePathError
        A link or a FIFO in the store (:func:`check_store`).
    CorruptRunError
        An array without dimension names, with a dimension the run does not write, or of another length;
        the message names the array, the dimension, both lengths and ``fix``.
    """
    store = check_store(store)
    try:
        arrays = list(zarr.open_group(store, mode="r", use_consolidated=False).arrays())
    except Exception as exc:  # noqa: BLE001 - any unreadable piece of the store means the same
        raise CorruptRunError(
            f"{store} cannot be read ({type(exc).__name__}: {one_line(exc, 200)}); {fix}"
        ) from None
    for name, arr in arrays:
        dims = _dims(arr)
        if dims is None or len(dims) != len(arr.shape):
            raise CorruptRunError(f"{store}: the array {name!r} has no dimension names; {fix}")
        for dim, length in zip(dims, arr.shape, strict=True):
            if dim not in sizes:
                raise CorruptRunError(
                    f"{store}: the array {name!r} has a dimension {dim!r} this run does not write; {fix}"
                )
            want = sizes[dim]
            if want is None or (dim in growing and int(length) <= int(want)):
                continue
            if int(length) != int(want):
                gives = "gives at most" if dim in growing else "gives"
                raise CorruptRunError(
                    f"{store}: the array {name!r} declares {dim} = {int(length)}, but the config {gives} "
                    f"{int(want)} (refused before reading it); {fix}"
                )


def check_store_covers(store: Path, n_records: int, last_step: int) -> None:
    """The store holds at least ``n_records`` records and record ``n_records - 1`` is ``last_step``
    (read only: nothing is changed before this passes).

    Raises
    ------
    CorruptRunError
        Fewer records, no ``step`` array, another step, or an unreadable store.
    """
    fix = "the store is damaged; rerun with resume=False to start afresh"
    check_store(store)  # a link or a FIFO is refused as such (UnsafePathError), not as damage
    try:
        arrays = time_arrays(store)
        if "step" not in arrays:
            raise CorruptRunError(f"{store} has no 'step' array; {fix}")
        for name, (arr, ax) in arrays.items():
            if arr.shape[ax] < n_records:
                raise CorruptRunError(
                    f"{store} holds {arr.shape[ax]} records in {name!r} but the checkpoint covers "
                    f"{n_records}; {fix}"
                )
        step = int(arrays["step"][0][n_records - 1])
    except CorruptRunError:
        raise
    except Exception as exc:  # noqa: BLE001 - any unreadable piece of the store means the same
        raise CorruptRunError(f"{store} cannot be read ({type(exc).__name__}: {exc}); {fix}") from None
    if step != last_step:
        raise CorruptRunError(
            f"{store}: record {n_records - 1} has step {step} but the checkpoint says {last_step}; {fix}"
        )


def truncate_store(store: Path, n_records: int, last_step: int) -> None:
    """Cut every array with a ``time`` dimension to ``n_records`` entries (idempotent: a crash during the
    cut is repaired by the next resume) and rewrite the consolidated metadata.

    :func:`check_store_covers` runs first, so a checkpoint that does not match the store changes nothing.
    """
    check_store_covers(store, n_records, last_step)
    for arr, ax in time_arrays(store, mode="r+").values():
        if arr.shape[ax] > n_records:
            shape = list(arr.shape)
            shape[ax] = n_records
            arr.resize(tuple(shape))
    zarr.consolidate_metadata(store)


def _encoding(ds: xr.Dataset, records_per_chunk: int) -> dict:
    enc = {}
    for name, var in ds.variables.items():
        if "time" not in var.dims:
            continue
        per_record = max(var.dtype.itemsize * var.size // max(var.sizes["time"], 1), 1)
        tc = max(1, min(records_per_chunk, CHUNK_BYTES // per_record))
        enc[name] = {"chunks": tuple(tc if d == "time" else var.sizes[d] for d in var.dims)}
    return enc


def write_zarr(
    ds: xr.Dataset, store: str | Path, *, append: bool = False, records_per_chunk: int | None = None
) -> None:
    """Write (or append along ``time``) records to a run's store: Zarr format :data:`ZARR_FORMAT`,
    consolidated metadata, at most :data:`CHUNK_BYTES` per chunk along time.

    Parameters
    ----------
    ds : xarray.Dataset
    store : path
        ``DIR/data.zarr``.
    append : bool
        Append along ``time`` to an existing store (its encoding is kept).
    records_per_chunk : int or None
        Records per chunk along time of a new store (None: all of ``ds`` in one chunk, cut to the byte
        bound).
    """
    if append:
        ds.to_zarr(store, append_dim="time", consolidated=True)
        return
    per = records_per_chunk if records_per_chunk is not None else max(int(ds.sizes.get("time", 1)), 1)
    ds.to_zarr(store, mode="w", encoding=_encoding(ds, per), consolidated=True, zarr_format=ZARR_FORMAT)


def open_store(store: str | Path) -> xr.Dataset:
    """The lazy Dataset of a run's ``data.zarr``, checked first (:func:`check_store`: no link, no FIFO).

    Raises
    ------
    FileNotFoundError
        No store there.
    UnsafePathError
        See :func:`check_store`.
    """
    store = check_store(store)
    if not store.is_dir():
        raise FileNotFoundError(
            f"{store.parent} is not a run directory with data: {store.name} not found; create one with "
            "run_experiment(config, out_dir) (a PDE config: run_pde)"
        )
    return xr.open_zarr(store)


def expected_steps(n_steps: int, every: int) -> np.ndarray:
    """The steps a finished run records: 0, every, 2 every, ... and ``n_steps`` (the final state)."""
    steps = np.arange(0, n_steps + 1, every, dtype=np.int64)
    return steps if steps[-1] == n_steps else np.append(steps, np.int64(n_steps))


# -- signals -------------------------------------------------------------------------------------------
@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM acts as Ctrl-C: the current SIGINT handler is
    called (a particle run finishes its step and checkpoints; elsewhere :class:`KeyboardInterrupt`), so the
    run records ``interrupted`` instead of dying with ``running`` in its ``meta.json``. Not in a worker of
    a multiprocessing pool (sweeps): a pool that terminates its workers must see them go."""
    if (
        threading.current_thread() is not threading.main_thread()
        or multiprocessing.parent_process() is not None
    ):
        # a worker of a process pool (a sweep's task): its pool stops it with SIGTERM and must see it die
        yield
        return

    def handler(signum, frame):
        current = signal.getsignal(signal.SIGINT)
        if callable(current):
            current(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt("terminated (SIGTERM)")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def resume_hint(kind: str, out_dir: str | Path) -> str:
    """How to resume an interrupted run of ``kind`` (``run``, ``pde``, ``training``) in ``out_dir``."""
    out = str(out_dir)
    if kind == "training":
        cmd, api = f"attnflow train CONFIG --out {out}", "run_training(config, out_dir)"
    elif kind == "pde":
        cmd, api = f"attnflow run CONFIG --out {out}", "run_pde(config, out_dir)"
    else:
        cmd, api = f"attnflow run CONFIG --out {out}", "run_experiment(config, out_dir)"
    return (
        f"resume it with `{cmd}` ({api}) and the same config (its config.yaml): it continues from the last "
        "checkpoint"
    )
