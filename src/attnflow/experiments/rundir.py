"""The run-directory rules every kind of run shares (particle runs, PDE density runs, training runs).

One store, one rule (``docs/reliability.md``, "Threat model"):

* :func:`claim_run_dir` decides what a run may do with its directory: resume a run of the same config,
  refuse one of another config (:class:`RunConfigMismatchError`), refuse a directory that holds run files
  attnflow did not create (:class:`ForeignDirectoryError`: no ``.attnflow`` marker), and otherwise clear
  only the run files of a marked directory and start afresh;
* :func:`save_checkpoint` / :func:`load_checkpoint`: a checkpoint holds tensors, numbers, strings and
  containers of them only; it is written atomically and read with ``torch.load(weights_only=True)``, so a
  crafted pickle in a received directory is refused (one line) and never executes;
* :func:`sigterm_as_interrupt`: SIGTERM stops a run the way Ctrl-C does, so its ``meta.json`` says
  ``interrupted`` (not ``running``) and the next run resumes from the last checkpoint;
* :func:`resume_hint`: what ``info`` tells the user about an interrupted run.

The directory lock is :class:`attnflow.experiments.locking.DirectoryLock`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from .errors import ConfigError
from .files import (
    MARKER_FILE,
    CorruptFileError,
    UnsafePathError,
    atomic_write_bytes,
    has_marker,
    write_marker,
)

__all__ = [
    "CorruptRunError",
    "ForeignDirectoryError",
    "RunConfigMismatchError",
    "claim_run_dir",
    "clear_run_files",
    "load_checkpoint",
    "one_line",
    "resume_hint",
    "save_checkpoint",
    "sigterm_as_interrupt",
    "stored_config_diff",
]


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


def load_checkpoint(path: Path, fix: str) -> Any:
    """The content of a checkpoint, read with ``torch.load(weights_only=True)`` (no code runs).

    Raises
    ------
    CorruptRunError
        One line: the file is not a regular file, is truncated, or holds anything but tensors and plain
        data (a pickle of other objects is refused by torch before any of it is built).
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CorruptRunError(f"{path} cannot be read ({exc.strerror or exc}); {fix}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CorruptRunError(f"{path} is not a regular file; {fix}")
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - truncated, foreign or crafted files all end here
        crafted = "weights_only" in str(exc) or "Unsupported global" in str(exc)
        kind = (
            "holds objects other than tensors (refused unread)" if crafted else "is truncated or unreadable"
        )
        raise CorruptRunError(
            f"{path.name} {kind} ({path}: {type(exc).__name__}: {one_line(exc, 160)}); {fix}"
        ) from None


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
