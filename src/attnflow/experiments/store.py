"""Particle runs on the run store: one directory per run, written incrementally and resumable bit for bit.

The directory format, its lock and claim, ``meta.json``, the checkpoint reader and writer, the Zarr writer
and the checks of a received store are the run store's (:mod:`attnflow.experiments.rundir`, shared with
PDE and training runs); this module is the particle kind: what a particle run records and when. Layout
(``docs/design.md``, "Run store")::

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
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
import xarray as xr

from .._version import __version__
from ..simulation import Simulator, integrate, records_to_dataset, run_attrs
from ..simulation.driver import RunInterrupted
from .builder import ESTIMATORS, build, estimator, paths_computed
from .errors import ConfigError
from .files import CorruptFileError, atomic_write_text, disk_usage, utc_now
from .progress import ProgressBar
from .resources import check_resources, particle_cost
from .rundir import (  # the run store's names that users import from here (their one home: rundir.py)
    CHECKPOINT_FILE as CHECKPOINT_FILE,
    CONFIG_FILE as CONFIG_FILE,
    DATA_DIR as DATA_DIR,
    META_FILE as META_FILE,
    RUN_FILES as RUN_FILES,
    ZARR_FORMAT as ZARR_FORMAT,
    CorruptRunError as CorruptRunError,
    ForeignDirectoryError as ForeignDirectoryError,
    RunConfigMismatchError as RunConfigMismatchError,
    check_store as check_store,
    check_store_covers,
    check_store_dims,
    checkpoint_bound,
    expected_steps as expected_steps,
    failure_fields,
    open_store,
    read_meta as read_meta,
    read_meta_or_empty,
    restore_checkpoint,
    resume_hint,
    run_session,
    save_checkpoint,
    stored_config_diff,
    time_arrays,
    truncate_store,
    write_meta,
    write_zarr,
)
from .schema import ExperimentConfig, config_diff, dump_config, flatten_config, load_config

__all__ = ["open_run", "particle_store_sizes", "run_experiment", "run_info", "verify_run"]

#: Version of the particle checkpoint's layout: ``{"format", "sim", "records", "last_record_step"}``.
CHECKPOINT_FORMAT = 1
_LIBRARIES = ("torch", "numpy", "xarray", "zarr", "numba", "dask", "pydantic")


# -- small helpers ---------------------------------------------------------------------------------
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


def particle_store_sizes(cfg: ExperimentConfig, spec=None) -> dict[str, int | None]:
    """The length of every dimension a particle run's ``data.zarr`` has when whole (its declared sizes).

    Parameters
    ----------
    cfg : ExperimentConfig
    spec : SimulationSpec or None
        The run's built spec (exact token count and dimension); None: from the config alone, where the
        token count and dimension of tokens read from a file are not known (``None``: not checked).

    Returns
    -------
    dict
        ``time`` (the records of the whole run), ``path``, ``token``, ``dim``, ``head``, ``row``, ``col``.
    """
    T = len(expected_steps(cfg.integrator.n_steps, cfg.record.every))
    if spec is not None:
        P, n, d = (int(s) for s in spec.x0.shape)
        H = int(spec.heads.shape[-3])
    else:
        P, H = paths_computed(cfg), int(cfg.heads.H)
        n, d = getattr(cfg.tokens, "n", None), getattr(cfg.tokens, "d", None)
    return {"time": T, "path": P, "token": n, "dim": d, "head": H, "row": d, "col": d}


def _spec_or_none(cfg: ExperimentConfig):
    """The built spec of a finished run, or None when it cannot be built here (a token file not at hand)."""
    try:
        return build(cfg)
    except (ConfigError, OSError, ValueError):
        return None


def verify_run(out_dir: str | Path, sizes: dict[str, int | None] | None = None) -> None:
    """Check that a run directory holds a whole finished run: reopen its store and compare it with its config.

    Every array declares exactly the sizes of the config (``sizes``, default
    :func:`particle_store_sizes` of the config: checked before any array is read, so a received store that
    declares a huge array is refused unallocated), every array with a ``time`` dimension has one entry per
    recorded step, the ``step`` array is exactly the steps the config records (:func:`expected_steps`), and
    the consolidated metadata that ``xr.open_zarr`` reads agree.

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
    if store.is_dir():
        check_store_dims(store, particle_store_sizes(cfg) if sizes is None else sizes, fix)
    try:
        arrays = time_arrays(store)
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


def _load_checkpoint(out: Path, sim, n_steps: int, max_bytes: int) -> dict:
    """Read and validate ``checkpoint.pt`` and restore ``sim`` from it (the store's one reader,
    :func:`~attnflow.experiments.rundir.restore_checkpoint`); the store is checked, not changed."""
    path = out / CHECKPOINT_FILE
    fix = "rerun with resume=False to start afresh"

    def restore(state: dict) -> dict:
        records, last = state.get("records"), state.get("last_record_step")
        if not (isinstance(state.get("sim"), dict) and type(records) is int and type(last) is int):
            raise CorruptRunError(f"{path} is not a checkpoint of this attnflow version (format 1); {fix}")
        sim.load_state_dict(state["sim"])
        if not (records >= 1 and 0 <= last <= sim.step_index <= n_steps):
            raise CorruptRunError(
                f"{path} is inconsistent: records={records}, last_record_step={last}, step={sim.step_index} "
                f"(need records >= 1 and 0 <= last_record_step <= step <= {n_steps}); {fix}"
            )
        return state

    state = restore_checkpoint(path, fmt=CHECKPOINT_FORMAT, restore=restore, fix=fix, max_bytes=max_bytes)
    check_store_covers(out / DATA_DIR, state["records"], state["last_record_step"])
    return state


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
        per_ckpt = self.checkpoint_steps // self.spec.record_every
        write_zarr(ds, self.store, append=self.written > 0, records_per_chunk=per_ckpt)
        self.written += len(self.buffer)
        self.last_step = self.buffer[-1].step
        self.buffer.clear()

    def checkpoint(self) -> None:
        self.flush()  # data first: the checkpoint never claims records that are not on disk
        state = {
            "format": CHECKPOINT_FORMAT,
            "sim": self.sim.state_dict(),
            "records": self.written,
            "last_record_step": self.last_step,
        }
        # fsynced before it replaces the previous one; a unique tmp name
        save_checkpoint(self.out / CHECKPOINT_FILE, state)
        self.checkpointed_step = self.sim.step_index
        self._last_checkpoint = time.monotonic()
        self.meta.update(step=self.sim.step_index, records=self.written, checkpoint_time=utc_now())
        write_meta(self.out, self.meta)


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
    if checkpoint_every_s is not None and not checkpoint_every_s > 0:
        raise ValueError(
            f"checkpoint_every_s must be > 0 seconds or None (by steps only): got {checkpoint_every_s!r}; "
            "give e.g. 60.0"
        )

    def compare(old: ExperimentConfig) -> list:
        od, nd = flatten_config(old), flatten_config(cfg)
        return [(k, od.get(k), nd.get(k)) for k in config_diff(old, cfg)]

    # a directory without attnflow's marker that holds run files is refused, except a legacy run (written
    # before the marker existed) of this very config when resuming, which is adopted
    with run_session(
        out_dir,
        kind="run",
        run_files=RUN_FILES,
        config_diff=stored_config_diff(load_config, compare, limit=None),
        resume=resume,
    ) as resumed:
        out = Path(out_dir)
        meta = read_meta_or_empty(out) if resume and (out / CONFIG_FILE).is_file() else {}
        return _run_locked(cfg, out, resumed, meta, progress, flush_every_s, checkpoint_every_s)


def _run_locked(
    cfg: ExperimentConfig,
    out: Path,
    resumed: bool,
    meta: dict,
    progress: bool,
    flush_every_s: float,
    checkpoint_every_s: float | None = None,
) -> xr.Dataset:
    if resumed and meta.get("status") == "done" and (out / DATA_DIR).is_dir():
        # a "done" is trusted only once the store is verified (its declared sizes first)
        verify_run(out, particle_store_sizes(cfg, _spec_or_none(cfg)))
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
    write_meta(out, meta)
    writer = None
    bar = None
    try:
        spec = build(cfg)
        sim = Simulator.from_spec(spec)
        n_steps = spec.n_steps
        attrs = {**run_attrs(sim, spec.t1, spec.record_every), "name": cfg.name, "config": dump_config(cfg)}
        writer = _Writer(out, sim, spec, cfg.checkpoint_steps, attrs, meta, flush_every_s, checkpoint_every_s)
        sizes = particle_store_sizes(cfg, spec)
        if resumed:
            if (out / DATA_DIR).exists():  # the sizes the store declares, before a record of it is read
                check_store_dims(out / DATA_DIR, sizes, "rerun with resume=False to start afresh", ("time",))
            bound = checkpoint_bound(particle_cost(cfg).memory_bytes)
            state = _load_checkpoint(out, sim, n_steps, bound)  # validated before the store is changed
            truncate_store(out / DATA_DIR, state["records"], state["last_record_step"])
            writer.written, writer.last_step = state["records"], state["last_record_step"]
            # meta.json may count records of a failed attempt that the truncation just removed
            meta.update(step=sim.step_index, records=state["records"])
            write_meta(out, meta)
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
        verify_run(out, sizes)  # "done" is written only for a store that reopens whole
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
        error = None
        if isinstance(exc, RunInterrupted):
            error = str(exc)
        elif failure_fields(exc)["status"] == "interrupted":
            step = writer.checkpointed_step if writer is not None else meta.get("step", 0)
            error = (
                f"interrupted (Ctrl-C) during step {sim.step_index + 1 if writer is not None else '?'} of "
                f"{meta['n_steps']}; the last checkpoint is at step {step}; rerun to resume"
            )
        else:
            error = f"{type(exc).__name__}: {exc}"  # the whole message (a config error has several lines)
        meta.update(failure_fields(exc, error))
        write_meta(out, meta)
        raise
    meta.update(status="done", ended=utc_now())
    meta.pop("error", None)
    meta.pop("traceback", None)
    write_meta(out, meta)
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
    ds = open_store(out / DATA_DIR)
    status = read_meta_or_empty(out).get("status", "unknown")
    if status != "done":
        warnings.warn(f"run {out} is not finished (status {status}); its data may stop early", stacklevel=2)
    return ds


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
