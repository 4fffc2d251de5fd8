"""The run store: one directory per run, written incrementally and resumable bit for bit.

Layout of a run directory (``docs/design.md``, "Run store")::

    config.yaml     the validated config, every default filled in
    meta.json       versions, git revision, device, seeds, start/end times, status, progress
    data.zarr       xarray Dataset (Zarr format 2, consolidated), appended along ``time`` while the run goes
    checkpoint.pt   torch.save({"sim": Simulator.state_dict(), "records": k, ...}), atomic

Write order. Records are buffered and appended to ``data.zarr`` at every checkpoint (every
``checkpoint_every`` steps, a multiple of ``record.every``) and at least every ``flush_every_s``
seconds; at a checkpoint the data are written *first*, then ``checkpoint.pt`` (tmp file +
``os.replace``), so a checkpoint never claims records that are not on disk.

Safety (``docs/reliability.md``). The process that writes a run directory holds its lock
(:class:`~attnflow.experiments.locking.DirectoryLock`) from the first check to the last write: a second
process is refused. A directory attnflow creates carries a marker file (``.attnflow``); attnflow clears or
deletes only the run files of a marked directory and refuses a directory that holds run files it did not
create. A checkpoint is validated (types, counts, steps, the store's lengths) before the store is changed,
and a run is marked ``done`` only after its store has been reopened and verified (:func:`verify_run`).

Resume. A killed run (even SIGKILL) loses at most the steps after its last checkpoint. On resume the
Zarr arrays are truncated to the ``records`` count of the checkpoint: every array with a ``time``
dimension is resized (``zarr.Array.resize``; idempotent, so a crash during the truncation is
repaired by the next resume), the consolidated metadata is rewritten, and the last stored ``step``
is checked against the checkpoint. The simulator state (tokens, heads, time, per-path RNG states,
ledger sums) is restored, so the continued run is identical, array for array and bit for bit, to an
uninterrupted one.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
import traceback
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
import xarray as xr
import zarr

from .._version import __version__
from ..simulation import Simulator, integrate, records_to_dataset, run_attrs
from ..simulation.driver import RunInterrupted
from .builder import ESTIMATORS, build, estimator, paths_computed
from .errors import ConfigError
from .files import (
    CorruptFileError,
    UnsafePathError,
    atomic_write_text,
    disk_usage,
    inside,
    read_json,
    utc_now,
)
from .locking import DirectoryLock
from .progress import ProgressBar
from .resources import check_resources, particle_cost
from .rundir import (
    CorruptRunError,
    ForeignDirectoryError,
    RunConfigMismatchError,
    claim_run_dir,
    clear_run_files,
    load_checkpoint,
    resume_hint,
    save_checkpoint,
    sigterm_as_interrupt,
    stored_config_diff,
)
from .schema import ExperimentConfig, config_diff, dump_config, flatten_config, load_config

__all__ = [
    "CHECKPOINT_FILE",
    "CONFIG_FILE",
    "DATA_DIR",
    "META_FILE",
    "RUN_FILES",
    "CorruptRunError",
    "ForeignDirectoryError",
    "check_store",
    "RunConfigMismatchError",
    "expected_steps",
    "open_run",
    "read_meta",
    "run_experiment",
    "run_info",
    "verify_run",
]

CONFIG_FILE = "config.yaml"
META_FILE = "meta.json"
DATA_DIR = "data.zarr"
CHECKPOINT_FILE = "checkpoint.pt"
#: The files of a run directory: the only ones attnflow clears or deletes in it.
RUN_FILES = (DATA_DIR, CHECKPOINT_FILE, META_FILE, CONFIG_FILE)
_LIBRARIES = ("torch", "numpy", "xarray", "zarr", "numba", "dask", "pydantic")
#: Zarr format 2 with consolidated metadata (``.zmetadata``): read by every Zarr implementation and by
#: plain ``xr.open_zarr`` without warnings (format 3 has no consolidated metadata in its spec yet).
ZARR_FORMAT = 2
#: upper bound on the size of one Zarr chunk along time (bytes)
_CHUNK_BYTES = 16 * 2**20


# -- small helpers ---------------------------------------------------------------------------------
def _write_meta(out: Path, meta: dict) -> None:
    atomic_write_text(out / META_FILE, json.dumps(meta, indent=2, default=str) + "\n")


def read_meta(out_dir: str | Path) -> dict:
    """The ``meta.json`` of a run directory ({} if absent).

    Raises
    ------
    CorruptFileError
        ``meta.json`` is not a JSON object (or not a regular file of sane size).
    UnsafePathError
        ``meta.json`` is a symlink that leaves the directory (nothing outside it is read).
    """
    p = Path(out_dir) / META_FILE
    if not (p.exists() or p.is_symlink()):
        return {}
    inside(out_dir, p, what="run file")
    if not p.exists():
        return {}  # a dangling link inside the directory
    meta = read_json(p, "the run file", "resume the run (run_experiment(config, out_dir)) to rewrite it")
    if not isinstance(meta, dict):
        raise CorruptFileError(
            f"the run file {p} is corrupt (a JSON {type(meta).__name__}, not an object); resume the run "
            "(run_experiment(config, out_dir)) to rewrite it"
        )
    return meta


def _read_meta_or_empty(out: Path) -> dict:
    """``meta.json`` or {} when it is corrupt (it is informative only: the checkpoint and the store rule)."""
    try:
        return read_meta(out)
    except CorruptFileError:
        return {}


@functools.lru_cache(maxsize=1)
def _git_revision() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        res = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None


def _environment(cfg: ExperimentConfig) -> dict:
    libs = {}
    for name in _LIBRARIES:
        try:
            libs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            libs[name] = None
    device = {"name": cfg.device}
    if cfg.device.startswith("cuda"):
        try:
            device["gpu"] = torch.cuda.get_device_name(torch.device(cfg.device))
        except Exception as exc:  # noqa: BLE001 - best effort description only
            device["gpu"] = f"unavailable: {exc}"
    return {
        "attnflow_version": __version__,
        "git_revision": _git_revision(),
        "libraries": libs,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "device": device,
    }


def _time_dims(arr) -> tuple[str, ...] | None:
    names = getattr(arr.metadata, "dimension_names", None)
    if names is None:
        names = arr.attrs.get("_ARRAY_DIMENSIONS")
    return tuple(names) if names is not None else None


def check_store(store: str | Path) -> Path:
    """Check that a run's ``data.zarr`` holds only folders and regular files, before anything reads it.

    attnflow writes no link into a store; a received store whose chunk or ``.zarray`` is a symbolic link
    (to a private file, or out of the run directory) would be read through it, and a FIFO in place of a
    chunk would hang the read. Every entry is examined with ``lstat`` (links are not followed).

    Raises
    ------
    UnsafePathError
        The store itself or an entry in it is a symbolic link, or an entry is neither a folder nor a
        regular file; one line naming the entry, where it leads and the fix.
    """
    store = Path(store)
    fix = "attnflow reads nothing through a link in a run's store: remove it, or rerun with --no-resume"
    if store.is_symlink():
        raise UnsafePathError(f"{store} is a symbolic link (to {os.readlink(store)[:200]}); {fix}")
    if not store.is_dir():
        return store
    pending = [store]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for e in entries:
                if e.is_symlink():
                    target = os.readlink(e.path)[:200]
                    raise UnsafePathError(
                        f"{e.path[:300]} in the run's store is a symbolic link (to {target}); {fix}"
                    )
                if e.is_dir(follow_symlinks=False):
                    pending.append(Path(e.path))
                elif not e.is_file(follow_symlinks=False):
                    raise UnsafePathError(
                        f"{e.path[:300]} in the run's store is not a regular file (a FIFO, a socket or a "
                        f"device); {fix}"
                    )
    return store


def _time_arrays(store: Path, mode: str = "r") -> dict:
    """Name -> (array, axis of ``time``) of every array of the store with a ``time`` dimension (the store
    checked first: :func:`check_store`)."""
    check_store(store)
    group = zarr.open_group(store, mode=mode, use_consolidated=False)
    out = {}
    for name, arr in group.arrays():
        dims = _time_dims(arr)
        if dims and "time" in dims:
            out[name] = (arr, dims.index("time"))
    return out


def _check_store_covers(store: Path, n_records: int, last_step: int) -> None:
    """The store holds at least ``n_records`` records and record ``n_records - 1`` is ``last_step``
    (read only: nothing is changed before this passes)."""
    fix = "the store is damaged; rerun with resume=False to start afresh"
    check_store(store)  # a link or a FIFO is refused as such (UnsafePathError), not as damage
    try:
        arrays = _time_arrays(store)
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


def _truncate_store(store: Path, n_records: int, last_step: int) -> None:
    """Cut every array with a ``time`` dimension to ``n_records`` entries (idempotent).

    :func:`_check_store_covers` runs first, so a checkpoint that does not match the store changes nothing.
    """
    _check_store_covers(store, n_records, last_step)
    for arr, ax in _time_arrays(store, mode="r+").values():
        if arr.shape[ax] > n_records:
            shape = list(arr.shape)
            shape[ax] = n_records
            arr.resize(tuple(shape))
    zarr.consolidate_metadata(store)


def expected_steps(n_steps: int, every: int) -> np.ndarray:
    """The steps a finished run records: 0, every, 2 every, ... and ``n_steps`` (the final state)."""
    steps = np.arange(0, n_steps + 1, every, dtype=np.int64)
    return steps if steps[-1] == n_steps else np.append(steps, np.int64(n_steps))


def verify_run(out_dir: str | Path) -> None:
    """Check that a run directory holds a whole finished run: reopen its store and compare it with its config.

    Every array with a ``time`` dimension has one entry per recorded step, the ``step`` array is exactly
    the steps the config records (:func:`expected_steps`), and the consolidated metadata that
    ``xr.open_zarr`` reads agree.

    Raises
    ------
    CorruptRunError
        With what is wrong and the fix.
    """
    out = Path(out_dir)
    store = out / DATA_DIR
    fix = "rerun with resume=False to start afresh"
    try:
        cfg = load_config(out / CONFIG_FILE)
    except ConfigError as exc:
        raise CorruptRunError(f"{out / CONFIG_FILE} cannot be read ({exc}); {fix}") from None
    want = expected_steps(cfg.integrator.n_steps, cfg.record.every)
    check_store(store)  # a link or a FIFO in the store is refused, not read (UnsafePathError)
    try:
        arrays = _time_arrays(store)
        lengths = {name: arr.shape[ax] for name, (arr, ax) in arrays.items()}
        steps = np.asarray(arrays["step"][0][:]) if "step" in arrays else None
        with xr.open_zarr(store) as ds:
            consolidated = ds.sizes.get("time")
    except Exception as exc:  # noqa: BLE001 - any unreadable piece of the store means the same
        raise CorruptRunError(f"{store} cannot be read ({type(exc).__name__}: {exc}); {fix}") from None
    if steps is None:
        raise CorruptRunError(f"{store} has no 'step' array; {fix}")
    uneven = {k: v for k, v in lengths.items() if v != len(want)}
    if uneven:
        raise CorruptRunError(
            f"{store} is inconsistent: the config records {len(want)} states but the arrays hold "
            f"{dict(list(uneven.items())[:6])} records; {fix}"
        )
    if not np.array_equal(steps, want):
        raise CorruptRunError(f"{store} records the wrong steps (not those of its config.yaml); {fix}")
    if consolidated != len(want):
        raise CorruptRunError(
            f"{store}: its consolidated metadata say {consolidated} records, the arrays {len(want)}; {fix}"
        )


def _load_checkpoint(out: Path, sim, n_steps: int) -> dict:
    """Read and validate ``checkpoint.pt`` and restore ``sim`` from it; the store is checked, not changed."""
    path = out / CHECKPOINT_FILE
    fix = "rerun with resume=False to start afresh"
    state = load_checkpoint(path, fix)  # weights_only=True: a crafted pickle is refused, never run
    ok = (
        isinstance(state, dict)
        and state.get("format") == 1
        and isinstance(state.get("sim"), dict)
        and type(state.get("records")) is int
        and type(state.get("last_record_step")) is int
    )
    if not ok:
        raise CorruptRunError(f"{path} is not a checkpoint of this attnflow version (format 1); {fix}")
    records, last = state["records"], state["last_record_step"]
    try:
        sim.load_state_dict(state["sim"])
    except Exception as exc:  # noqa: BLE001 - a crafted or foreign state: missing keys, wrong types
        raise CorruptRunError(f"{path} does not fit this run ({type(exc).__name__}: {exc}); {fix}") from None
    if not (records >= 1 and 0 <= last <= sim.step_index <= n_steps):
        raise CorruptRunError(
            f"{path} is inconsistent: records={records}, last_record_step={last}, step={sim.step_index} "
            f"(need records >= 1 and 0 <= last_record_step <= step <= {n_steps}); {fix}"
        )
    _check_store_covers(out / DATA_DIR, records, last)
    return state


def _encoding(ds: xr.Dataset, records_per_chunk: int) -> dict:
    enc = {}
    for name, var in ds.variables.items():
        if "time" not in var.dims:
            continue
        per_record = max(var.dtype.itemsize * var.size // max(var.sizes["time"], 1), 1)
        tc = max(1, min(records_per_chunk, _CHUNK_BYTES // per_record))
        enc[name] = {"chunks": tuple(tc if d == "time" else var.sizes[d] for d in var.dims)}
    return enc


def _clear_run(out: Path) -> None:
    """Delete the run files (only those) of a directory that carries attnflow's marker."""
    clear_run_files(out, RUN_FILES)


# -- the run ---------------------------------------------------------------------------------------
class _Writer:
    """The run store's sink for :func:`attnflow.simulation.integrate`: buffers records, appends them to the
    Zarr store and writes the checkpoints."""

    def __init__(
        self,
        out: Path,
        sim,
        spec,
        checkpoint_steps: int,
        attrs: dict,
        meta: dict,
        flush_every_s: float,
        checkpoint_every_s: float | None = None,
    ):
        self.out, self.sim, self.spec, self.attrs, self.meta = out, sim, spec, attrs, meta
        self.checkpoint_steps = checkpoint_steps
        self.store = out / DATA_DIR
        self.flush_every_s = flush_every_s
        self.buffer: list = []
        self.written = 0
        self.last_step = -1
        self.checkpointed_step = -1
        self.checkpoint_every_s = checkpoint_every_s
        self._last_flush = self._last_checkpoint = time.monotonic()

    @property
    def last_recorded_step(self) -> int | None:
        """Step of the last record, buffered or written (None before the first)."""
        if self.buffer:
            return self.buffer[-1].step
        return self.last_step if self.last_step >= 0 else None

    def on_record(self, rec) -> None:
        self.buffer.append(rec)
        now = time.monotonic()
        by_time = (
            self.checkpoint_every_s is not None and now - self._last_checkpoint >= self.checkpoint_every_s
        )
        if rec.step % self.checkpoint_steps == 0 or by_time:
            self.checkpoint()
        elif time.monotonic() - self._last_flush >= self.flush_every_s:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self.buffer:
            return
        ds = records_to_dataset(self.buffer, self.sim, self.attrs, positions=self.spec.positions)
        if self.written == 0:
            per_ckpt = self.checkpoint_steps // self.spec.record_every
            ds.to_zarr(
                self.store,
                mode="w",
                encoding=_encoding(ds, per_ckpt),
                consolidated=True,
                zarr_format=ZARR_FORMAT,
            )
        else:
            ds.to_zarr(self.store, append_dim="time", consolidated=True)
        self.written += len(self.buffer)
        self.last_step = self.buffer[-1].step
        self.buffer.clear()

    def checkpoint(self) -> None:
        self.flush()  # data first: the checkpoint never claims records that are not on disk
        state = {
            "format": 1,
            "sim": self.sim.state_dict(),
            "records": self.written,
            "last_record_step": self.last_step,
        }
        # fsynced before it replaces the previous one; a unique tmp name
        save_checkpoint(self.out / CHECKPOINT_FILE, state)
        self.checkpointed_step = self.sim.step_index
        self._last_checkpoint = time.monotonic()
        self.meta.update(step=self.sim.step_index, records=self.written, checkpoint_time=utc_now())
        _write_meta(self.out, self.meta)


def run_experiment(
    config: ExperimentConfig | dict | str | Path,
    out_dir: str | Path,
    *,
    resume: bool = True,
    progress: bool = False,
    flush_every_s: float = 5.0,
    checkpoint_every_s: float | None = 60.0,
) -> xr.Dataset:
    """Run an experiment into a run directory, resuming it if it was interrupted.

    Parameters
    ----------
    config : ExperimentConfig, dict or path of a YAML file
    out_dir : path
        The run directory (created if needed).
    resume : bool
        If the directory holds a run of the same config, continue it from its last checkpoint
        (a finished run is returned as is). A different config raises
        :class:`RunConfigMismatchError` naming the differing keys. ``False`` deletes the run files
        in the directory (config.yaml, meta.json, data.zarr, checkpoint.pt) and starts afresh.
    progress : bool
        Draw a progress bar on stderr when it is a terminal, else write a progress line every 20 s
        (inside :func:`attnflow.experiments.progress.overall_progress` it also names the run's place
        and the overall time left).
    flush_every_s : float
        Also append buffered records to the store when this many seconds passed since the last
        write (so that ``attnflow info`` sees progress between checkpoints).
    checkpoint_every_s : float or None
        Also checkpoint at the first record after this many seconds of wall time since the last
        checkpoint (besides every ``checkpoint_every`` steps), so a kill loses at most about this
        long; None: by steps only. Where the checkpoints fall does not change the results.

    Returns
    -------
    xarray.Dataset
        :func:`open_run` of the directory (lazy, backed by Zarr).

    Raises
    ------
    RunConfigMismatchError
        ``resume=True`` and the directory holds another config.
    attnflow.NonFiniteStateError, ValueError
        From the core (the run's ``meta.json`` then says ``status: failed`` with the traceback).

    Notes
    -----
    Ctrl-C (SIGINT) finishes the step under way, checkpoints there and sets ``status: interrupted``
    with the error "interrupted at step k of N; rerun to resume"
    (:class:`attnflow.simulation.driver.RunInterrupted`, re-raised); rerunning resumes bit for bit.
    """
    cfg = load_config(config)
    check_resources(
        particle_cost(cfg), allow_large=cfg.allow_large, name=cfg.name, fix="tokens.n, heads.H or paths"
    )  # before anything is allocated or created
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if checkpoint_every_s is not None and not checkpoint_every_s > 0:
        raise ValueError(
            f"checkpoint_every_s must be > 0 seconds or None (by steps only): got {checkpoint_every_s!r}; "
            "give e.g. 60.0"
        )
    with DirectoryLock(out, "run directory"), sigterm_as_interrupt():
        return _run_locked(cfg, out, resume, progress, flush_every_s, checkpoint_every_s)


def _claim(out: Path, cfg: ExperimentConfig, resume: bool) -> tuple[bool, dict]:
    """Decide what to do with the directory's run files (:func:`~attnflow.experiments.rundir.claim_run_dir`,
    the rule every kind of run shares); returns (resumable, old meta).

    A directory without attnflow's marker that holds run files is refused, except a legacy run (written
    before the marker existed) of this very config when resuming, which is adopted.
    """

    def compare(old: ExperimentConfig) -> list:
        od, nd = flatten_config(old), flatten_config(cfg)
        return [(k, od.get(k), nd.get(k)) for k in config_diff(old, cfg)]

    resumable = claim_run_dir(
        out,
        kind="run",
        run_files=RUN_FILES,
        config_file=CONFIG_FILE,
        config_diff=stored_config_diff(load_config, compare, limit=None),
        checkpoint_file=CHECKPOINT_FILE,
        resume=resume,
    )
    same = resume and (out / CONFIG_FILE).is_file()
    return resumable, (_read_meta_or_empty(out) if same else {})


def _interrupted(exc: BaseException) -> bool:
    """Ctrl-C, also when it surfaced from compiled code as another error (numba's SystemError)."""
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _run_locked(
    cfg: ExperimentConfig,
    out: Path,
    resume: bool,
    progress: bool,
    flush_every_s: float,
    checkpoint_every_s: float | None = None,
) -> xr.Dataset:
    resumed, meta = _claim(out, cfg, resume)
    if resumed and meta.get("status") == "done" and (out / DATA_DIR).is_dir():
        verify_run(out)  # a "done" is trusted only once the store is verified
        return open_run(out)
    cfg_path = out / CONFIG_FILE
    if not cfg_path.is_file():
        atomic_write_text(cfg_path, dump_config(cfg))

    if not resumed:
        meta = {}
    meta = {
        "name": cfg.name,
        **_environment(cfg),
        "seeds": {
            "seed": cfg.seed,
            "streams": "attnflow.random.path_seed(seed, path, purpose), purposes tokens, heads, noise",
        },
        "init": cfg.init,
        "paths_requested": cfg.paths,
        "paths_computed": paths_computed(cfg),
        "estimator": ESTIMATORS[estimator(cfg)],
        "started": meta.get("started", utc_now()),
        "resumed": [*meta.get("resumed", []), utc_now()] if resumed else [],
        "ended": None,
        "status": "running",
        "pid": os.getpid(),
        "n_steps": cfg.integrator.n_steps,
        "step": meta.get("step", 0),
        "records": meta.get("records", 0),
    }
    _write_meta(out, meta)
    writer = None
    bar = None
    try:
        spec = build(cfg)
        sim = Simulator.from_spec(spec)
        n_steps = spec.n_steps
        attrs = {**run_attrs(sim, spec.t1, spec.record_every), "name": cfg.name, "config": dump_config(cfg)}
        writer = _Writer(out, sim, spec, cfg.checkpoint_steps, attrs, meta, flush_every_s, checkpoint_every_s)
        if resumed:
            state = _load_checkpoint(out, sim, n_steps)  # validated before the store is changed
            _truncate_store(out / DATA_DIR, state["records"], state["last_record_step"])
            writer.written, writer.last_step = state["records"], state["last_record_step"]
            # meta.json may count records of a failed attempt that the truncation just removed
            meta.update(step=sim.step_index, records=state["records"])
            _write_meta(out, meta)
        else:
            if (out / DATA_DIR).exists():
                shutil.rmtree(out / DATA_DIR)
        bar = ProgressBar(
            n_steps,
            f"{cfg.name} ({sim.P} paths, n={sim.n}, H={sim.H})",
            unit="steps",
            initial=sim.step_index,
            enabled=None if progress else False,
            log_every_s=20.0 if progress else None,  # not a terminal: a line every 20 s (a step may add)
            run=out.name,
        )
        # the driver records the initial state of a fresh run (which checkpoints it) and the final state
        integrate(
            sim,
            n_steps - sim.step_index,
            record_every=spec.record_every,
            sink=writer,
            with_heads=spec.record_heads,
            progress=bar,
            total_steps=n_steps,
        )
        if writer.checkpointed_step != sim.step_index or writer.buffer:
            writer.checkpoint()
        bar.close()
        verify_run(out)  # "done" is written only for a store that reopens whole
    except BaseException as exc:
        if bar is not None:
            bar.close()
        if isinstance(exc, RunInterrupted) and writer is not None:
            try:  # the state after a whole step: checkpoint it, the rerun goes on from there
                writer.checkpoint()
            except Exception:  # noqa: BLE001 - keep the interruption; the last checkpoint still holds
                pass
        elif writer is not None and writer.written and not isinstance(exc, CorruptFileError):
            try:
                writer.flush()  # what was recorded before the failure is valid data
                meta["records"] = writer.written
            except Exception:  # noqa: BLE001 - keep the original error
                pass
        stopped = _interrupted(exc)
        if isinstance(exc, RunInterrupted):
            error = str(exc)
        elif stopped:
            step = writer.checkpointed_step if writer is not None else meta.get("step", 0)
            error = (
                f"interrupted (Ctrl-C) during step {sim.step_index + 1 if writer is not None else '?'} of "
                f"{meta['n_steps']}; the last checkpoint is at step {step}; rerun to resume"
            )
        else:
            error = f"{type(exc).__name__}: {exc}"
        meta.update(
            status="interrupted" if stopped else "failed",
            ended=utc_now(),
            error=error,
            traceback=traceback.format_exc(),
        )
        _write_meta(out, meta)
        raise
    meta.update(status="done", ended=utc_now())
    meta.pop("error", None)
    meta.pop("traceback", None)
    _write_meta(out, meta)
    return open_run(out)


def open_run(out_dir: str | Path) -> xr.Dataset:
    """The Dataset of a run directory (lazy, Zarr-backed); ``xr.open_zarr(out_dir/'data.zarr')`` is the same.

    Warns when the run is not finished (its data then stop at the last write).

    Raises
    ------
    FileNotFoundError
        The directory holds no ``data.zarr``.
    UnsafePathError
        The store holds a symbolic link or a FIFO (:func:`check_store`).
    """
    out = Path(out_dir)
    store = check_store(out / DATA_DIR)
    if not store.is_dir():
        raise FileNotFoundError(
            f"{out} is not a run directory with data: {DATA_DIR} not found; create one with "
            "run_experiment(config, out_dir)"
        )
    status = _read_meta_or_empty(out).get("status", "unknown")
    if status != "done":
        warnings.warn(f"run {out} is not finished (status {status}); its data may stop early", stacklevel=2)
    return xr.open_zarr(store)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_info(out_dir: str | Path) -> dict:
    """Summary of a run directory: name, status, progress, sizes and a few config values.

    An interrupted run (stopped by Ctrl-C or SIGTERM, or whose process is gone) gets a ``resume`` entry
    saying how to continue it (:func:`~attnflow.experiments.rundir.resume_hint`).
    """
    out = Path(out_dir)
    meta = read_meta(out)
    check_store(out / DATA_DIR)  # its size is reported: nothing is read through a link in it
    status = meta.get("status", "missing")
    kind = meta.get("kind", "run")
    if status == "running" and meta.get("host") == socket.gethostname() and not _pid_alive(meta.get("pid")):
        status = "interrupted (process gone)"
    info = {
        "dir": str(out),
        "name": meta.get("name"),
        "status": status,
        "step": meta.get("step"),
        "n_steps": meta.get("n_steps", meta.get("steps")),
        "records": meta.get("records"),
        "started": meta.get("started"),
        "ended": meta.get("ended"),
        "error": meta.get("error"),
        "sizes": {
            name: disk_usage(out / name) for name in (DATA_DIR, CHECKPOINT_FILE) if (out / name).exists()
        },
    }
    if str(status).startswith(("interrupted", "failed")):
        info["resume"] = resume_hint(kind if isinstance(kind, str) else "run", out)
    if kind != "run":
        return info  # a PDE or training run: its config is not a particle config
    if (out / CONFIG_FILE).is_file():
        cfg = load_config(out / CONFIG_FILE)
        t, m = cfg.tokens, cfg.model
        info["config"] = {
            "model": f"{m.direction} {m.attention} beta={m.beta:g} {m.geometry}",
            "weights": cfg.weights.process,
            "tokens": f"{t.init} n={getattr(t, 'n', '?')} d={getattr(t, 'd', '?')}",
            "heads": f"{cfg.heads.init} H={cfg.heads.H}",
            "integrator": f"{cfg.integrator.method} dt={cfg.integrator.dt:g} t1={cfg.integrator.t1:g}",
            "paths": cfg.paths,
            "init": cfg.init,
            "paths_computed": paths_computed(cfg),
            "seed": cfg.seed,
            "precision": cfg.precision,
            "device": cfg.device,
        }
    return info
