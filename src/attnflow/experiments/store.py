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

import torch
import xarray as xr
import zarr

from .._version import __version__
from ..simulation import Simulator, integrate, records_to_dataset, run_attrs
from .builder import build
from .files import atomic_write_text, disk_usage, fsync_dir, utc_now
from .progress import ProgressBar
from .schema import ExperimentConfig, config_diff, dump_config, flatten_config, load_config

__all__ = [
    "CHECKPOINT_FILE",
    "CONFIG_FILE",
    "DATA_DIR",
    "META_FILE",
    "RunConfigMismatchError",
    "open_run",
    "read_meta",
    "run_experiment",
    "run_info",
]

CONFIG_FILE = "config.yaml"
META_FILE = "meta.json"
DATA_DIR = "data.zarr"
CHECKPOINT_FILE = "checkpoint.pt"
_LIBRARIES = ("torch", "numpy", "xarray", "zarr", "numba", "dask", "pydantic")
#: Zarr format 2 with consolidated metadata (``.zmetadata``): read by every Zarr implementation and by
#: plain ``xr.open_zarr`` without warnings (format 3 has no consolidated metadata in its spec yet).
ZARR_FORMAT = 2
#: upper bound on the size of one Zarr chunk along time (bytes)
_CHUNK_BYTES = 16 * 2**20


class RunConfigMismatchError(ValueError):
    """The run directory holds a run of a different config; it cannot be resumed."""


# -- small helpers ---------------------------------------------------------------------------------
def _write_meta(out: Path, meta: dict) -> None:
    atomic_write_text(out / META_FILE, json.dumps(meta, indent=2, default=str) + "\n")


def read_meta(out_dir: str | Path) -> dict:
    """The ``meta.json`` of a run directory ({} if absent)."""
    p = Path(out_dir) / META_FILE
    return json.loads(p.read_text()) if p.is_file() else {}


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


def _truncate_store(store: Path, n_records: int, last_step: int) -> None:
    """Cut every array with a ``time`` dimension to ``n_records`` entries (idempotent)."""
    group = zarr.open_group(store, mode="r+", use_consolidated=False)
    for _name, arr in group.arrays():
        dims = _time_dims(arr)
        if not dims or "time" not in dims:
            continue
        ax = dims.index("time")
        if arr.shape[ax] < n_records:
            raise RuntimeError(
                f"{store} holds {arr.shape[ax]} records in {_name!r} but the checkpoint covers {n_records}: "
                "the store is damaged; rerun with resume=False"
            )
        if arr.shape[ax] > n_records:
            shape = list(arr.shape)
            shape[ax] = n_records
            arr.resize(tuple(shape))
    zarr.consolidate_metadata(store)
    steps = zarr.open_array(store, path="step", mode="r")
    if int(steps[n_records - 1]) != last_step:
        raise RuntimeError(
            f"{store}: record {n_records - 1} has step {int(steps[n_records - 1])} but the checkpoint says "
            f"{last_step}; rerun with resume=False"
        )


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
    for name in (DATA_DIR, CHECKPOINT_FILE, META_FILE, CONFIG_FILE):
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


# -- the run ---------------------------------------------------------------------------------------
class _Writer:
    """The run store's sink for :func:`attnflow.simulation.integrate`: buffers records, appends them to the
    Zarr store and writes the checkpoints."""

    def __init__(
        self, out: Path, sim, spec, checkpoint_steps: int, attrs: dict, meta: dict, flush_every_s: float
    ):
        self.out, self.sim, self.spec, self.attrs, self.meta = out, sim, spec, attrs, meta
        self.checkpoint_steps = checkpoint_steps
        self.store = out / DATA_DIR
        self.flush_every_s = flush_every_s
        self.buffer: list = []
        self.written = 0
        self.last_step = -1
        self.checkpointed_step = -1
        self._last_flush = time.monotonic()

    @property
    def last_recorded_step(self) -> int | None:
        """Step of the last record, buffered or written (None before the first)."""
        if self.buffer:
            return self.buffer[-1].step
        return self.last_step if self.last_step >= 0 else None

    def on_record(self, rec) -> None:
        self.buffer.append(rec)
        if rec.step % self.checkpoint_steps == 0:
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
        tmp = self.out / (CHECKPOINT_FILE + ".tmp")
        with open(tmp, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())  # the checkpoint is on disk before it replaces the previous one
        os.replace(tmp, self.out / CHECKPOINT_FILE)
        fsync_dir(self.out)
        self.checkpointed_step = self.sim.step_index
        self.meta.update(step=self.sim.step_index, records=self.written, checkpoint_time=utc_now())
        _write_meta(self.out, self.meta)


def run_experiment(
    config: ExperimentConfig | dict | str | Path,
    out_dir: str | Path,
    *,
    resume: bool = True,
    progress: bool = False,
    flush_every_s: float = 5.0,
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
        Draw a progress bar on stderr (only when stderr is a terminal).
    flush_every_s : float
        Also append buffered records to the store when this many seconds passed since the last
        write (so that ``attnflow info`` sees progress between checkpoints).

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
    """
    cfg = load_config(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / CONFIG_FILE
    meta: dict = {}
    resumed = False
    if cfg_path.is_file() and resume:
        old = load_config(cfg_path)
        diff = config_diff(old, cfg)
        if diff:
            od, nd = flatten_config(old), flatten_config(cfg)
            detail = "; ".join(f"{k}: {od.get(k)!r} -> {nd.get(k)!r}" for k in diff)
            raise RunConfigMismatchError(
                f"{out} holds a run with a different config, so it cannot be resumed: differing keys "
                f"{', '.join(diff)} ({detail}); choose another out_dir or pass resume=False to overwrite it"
            )
        meta = read_meta(out)
        if meta.get("status") == "done" and (out / DATA_DIR).is_dir():
            return open_run(out)
        resumed = (out / CHECKPOINT_FILE).is_file()
    elif cfg_path.is_file() or (out / DATA_DIR).exists():
        _clear_run(out)
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
        writer = _Writer(out, sim, spec, cfg.checkpoint_steps, attrs, meta, flush_every_s)
        if resumed:
            state = torch.load(out / CHECKPOINT_FILE, weights_only=True)
            sim.load_state_dict(state["sim"])
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
        )
        # the driver records the initial state of a fresh run (which checkpoints it) and the final state
        integrate(
            sim,
            n_steps - sim.step_index,
            record_every=spec.record_every,
            sink=writer,
            with_heads=spec.record_heads,
            progress=bar,
        )
        if writer.checkpointed_step != sim.step_index or writer.buffer:
            writer.checkpoint()
        bar.close()
    except BaseException as exc:
        if bar is not None:
            bar.close()
        if writer is not None and writer.written:
            try:
                writer.flush()  # what was recorded before the failure is valid data
                meta["records"] = writer.written
            except Exception:  # noqa: BLE001 - keep the original error
                pass
        meta.update(
            status="interrupted" if isinstance(exc, KeyboardInterrupt) else "failed",
            ended=utc_now(),
            error=f"{type(exc).__name__}: {exc}",
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
    """
    out = Path(out_dir)
    store = out / DATA_DIR
    if not store.is_dir():
        raise FileNotFoundError(
            f"{out} is not a run directory with data: {DATA_DIR} not found; create one with "
            "run_experiment(config, out_dir)"
        )
    status = read_meta(out).get("status", "unknown")
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
    """Summary of a run directory: name, status, progress, sizes and a few config values."""
    out = Path(out_dir)
    meta = read_meta(out)
    status = meta.get("status", "missing")
    if status == "running" and meta.get("host") == socket.gethostname() and not _pid_alive(meta.get("pid")):
        status = "interrupted (process gone; resume with run_experiment(config, out_dir))"
    info = {
        "dir": str(out),
        "name": meta.get("name"),
        "status": status,
        "step": meta.get("step"),
        "n_steps": meta.get("n_steps"),
        "records": meta.get("records"),
        "started": meta.get("started"),
        "ended": meta.get("ended"),
        "error": meta.get("error"),
        "sizes": {
            name: disk_usage(out / name) for name in (DATA_DIR, CHECKPOINT_FILE) if (out / name).exists()
        },
    }
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
            "seed": cfg.seed,
            "precision": cfg.precision,
            "device": cfg.device,
        }
    return info
