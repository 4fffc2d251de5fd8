"""Computation runs: a named, importable, pure function of JSON-able parameters, stored like a run.

A *computation* is ``fn(**params)`` where ``fn`` is given by name (``"package.module:function"``) and
``params`` is JSON data. It is the unit of work of everything that is not a particle, PDE or training
run (a reduced-model solve, a real model's forward pass, a kernel evaluation): it runs in a run
directory of the one store, on the same executors (in this process, a local process pool, a Dask
cluster) and with the same resume rules.

Layout of a computation directory::

    .attnflow       attnflow's marker (the directory may be deleted by attnflow)
    task.json       {"kind": "compute", "fn": ..., "params": ...} (written before the call)
    meta.json       status (running / done / failed), times, attnflow version, sha256 of the results
    arrays.npz      the named arrays of the result (numeric dtypes only, read with allow_pickle=False)
    values.json     the other values of the result (numbers, strings, lists and dicts of them)

The result of ``fn`` is a mapping of names (plain identifiers) to values: a :class:`numpy.ndarray` (or
a torch tensor, converted) is stored in ``arrays.npz``; anything else must be JSON data and goes in
``values.json``. Floats round-trip exactly (npz stores the bits; JSON writes the shortest repr), so a
resumed study reads the same numbers as an uninterrupted one. Nothing is pickled, ever.

Resume. A directory whose ``meta.json`` says ``done``, whose ``task.json`` holds the same function and
parameters and whose result files match their recorded sha256 is finished and is not run again. A
killed computation (status ``running``) is run again from the start: computations hold no checkpoint,
so a study splits long work into several of them. A directory of another function or parameters is
refused (:class:`ComputeMismatchError`) unless ``resume=False``.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from .files import CorruptFileError, atomic_write_bytes, atomic_write_text, utc_now, write_marker
from .locking import DirectoryLock

__all__ = [
    "ARRAYS_FILE",
    "COMPUTE_FILES",
    "TASK_FILE",
    "VALUES_FILE",
    "ComputeMismatchError",
    "ComputeResultError",
    "compute_finished",
    "read_compute",
    "resolve_function",
    "run_compute",
    "task_spec",
]

TASK_FILE = "task.json"
ARRAYS_FILE = "arrays.npz"
VALUES_FILE = "values.json"
META_FILE = "meta.json"
#: the files of a computation directory (deleted by a rerun with resume=False)
COMPUTE_FILES = (TASK_FILE, ARRAYS_FILE, VALUES_FILE, META_FILE)

_FN_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_NAME_RE = re.compile(r"^[A-Za-z_][\w.-]*$")


class ComputeMismatchError(ValueError):
    """The directory holds a computation of another function or other parameters."""


class ComputeResultError(TypeError):
    """A computation returned something that cannot be stored (not a mapping, a pickled object, ...)."""


def _canonical(data: Any, what: str) -> str:
    try:
        return json.dumps(data, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise ComputeResultError(
            f"{what} must be JSON data (numbers, strings, bools, None, lists and dicts of them): {exc}; "
            "convert arrays with .tolist() or return them as arrays of the result"
        ) from None


def task_spec(fn: str, params: Mapping[str, Any] | None = None) -> dict:
    """The canonical spec ``{"kind": "compute", "fn", "params"}`` (validated: name form, JSON params).

    Raises
    ------
    ValueError
        ``fn`` is not of the form ``package.module:function``.
    ComputeResultError
        ``params`` is not JSON data.
    """
    if not isinstance(fn, str) or not _FN_RE.match(fn):
        raise ValueError(
            f"a computation's fn must name an importable function as 'package.module:function': got {fn!r}; "
            "e.g. 'attnflow.analysis.ntk:injectivity_curve'"
        )
    params = dict(params or {})
    bad = [k for k in params if not isinstance(k, str)]
    if bad:
        raise ValueError(f"the parameters of {fn} must have string keys: got {bad!r}")
    return {"kind": "compute", "fn": fn, "params": json.loads(_canonical(params, f"the parameters of {fn}"))}


def resolve_function(fn: str) -> Callable[..., Mapping[str, Any]]:
    """Import ``package.module:function`` (attributes may be dotted, e.g. ``module:Class.method``).

    Raises
    ------
    ValueError
        The name is malformed, the module cannot be imported or has no such callable.
    """
    task_spec(fn)
    module_name, _, attr = fn.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"cannot import the module {module_name!r} of the computation {fn!r} ({exc}); the module must "
            "be importable in every worker (installed, or on PYTHONPATH)"
        ) from None
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ValueError(f"the module {module_name!r} has no attribute {attr!r}: fix the name {fn!r}")
    if not callable(obj):
        raise ValueError(f"{fn!r} names a {type(obj).__name__}, not a function")
    return obj


def _split_result(result: Any, fn: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    if not isinstance(result, Mapping):
        raise ComputeResultError(
            f"the computation {fn} must return a mapping of names to arrays or JSON values: got "
            f"{type(result).__name__}; e.g. return {{'x': array, 'n': 3}}"
        )
    arrays: dict[str, np.ndarray] = {}
    values: dict[str, Any] = {}
    for key, val in result.items():
        if not isinstance(key, str) or not _NAME_RE.match(key):
            raise ComputeResultError(
                f"the result names of {fn} must be plain names (letters, digits, '_', '.', '-'): got {key!r}"
            )
        if hasattr(val, "detach") and hasattr(val, "cpu"):  # a torch tensor, without importing torch
            val = val.detach().cpu().numpy()
        if isinstance(val, np.ndarray):
            if val.dtype.kind not in "biufc":
                raise ComputeResultError(
                    f"the array {key!r} of {fn} has dtype {val.dtype}: only numeric and bool arrays are "
                    "stored (never pickled objects); convert it, e.g. to float64"
                )
            arrays[key] = np.ascontiguousarray(val)
        else:
            if isinstance(val, np.generic):
                val = val.item()
            _canonical(val, f"the value {key!r} of {fn}")
            values[key] = val
    return arrays, values


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CorruptFileError(
            f"{path} ({what}) is unreadable ({exc}); rerun the study to recompute it, or delete the directory"
        ) from None
    if not isinstance(data, dict):
        raise CorruptFileError(f"{path} ({what}) must hold a JSON object: got {type(data).__name__}")
    return data


def compute_finished(run_dir: str | Path, spec: Mapping[str, Any] | None = None) -> tuple[bool, str | None]:
    """(finished, why not) of a computation directory: ``done`` in meta.json, result files matching their
    sha256 and, if given, the same ``spec``. ``why`` is set only when it says ``done`` but fails a check."""
    out = Path(run_dir)
    meta_path = out / META_FILE
    if not meta_path.is_file():
        return False, None
    try:
        meta = _read_json(meta_path, "meta file")
    except CorruptFileError as exc:
        return False, str(exc)
    if meta.get("status") != "done":
        return False, None
    for name, key in ((ARRAYS_FILE, "sha256_arrays"), (VALUES_FILE, "sha256_values")):
        path = out / name
        if not path.is_file() or _sha(path.read_bytes()) != meta.get(key):
            return False, f"{name} does not match the sha256 recorded in meta.json"
    if spec is not None:
        try:
            old = _read_json(out / TASK_FILE, "task file")
        except CorruptFileError as exc:
            return False, str(exc)
        if _canonical(old, "task") != _canonical(dict(spec), "task"):
            return False, None
    return True, None


def run_compute(
    fn: str, params: Mapping[str, Any] | None, out_dir: str | Path, *, resume: bool = True
) -> Path:
    """Run the computation ``fn(**params)`` into ``out_dir`` (see the module docstring); returns ``out_dir``.

    Raises
    ------
    ComputeMismatchError
        ``resume`` and ``out_dir`` holds a computation of another function or parameters.
    ComputeResultError
        ``fn`` returned something that cannot be stored.
    """
    spec = task_spec(fn, params)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(out, "computation directory"):
        write_marker(out, "compute")
        task_path = out / TASK_FILE
        if resume and task_path.is_file():
            try:
                old = _read_json(task_path, "task file")
            except CorruptFileError:
                old = None  # a torn task file of a killed attempt: start afresh
            if old is not None and _canonical(old, "task") != _canonical(spec, "task"):
                raise ComputeMismatchError(
                    f"{out} holds the computation {old.get('fn')!r} with other parameters than "
                    f"{spec['fn']!r} {spec['params']}; choose another directory or pass resume=False"
                )
            if compute_finished(out, spec)[0]:
                return out
        for name in COMPUTE_FILES:
            (out / name).unlink(missing_ok=True)
        atomic_write_text(task_path, json.dumps(spec, indent=1, sort_keys=True) + "\n")
        meta = {
            "kind": "compute",
            "fn": fn,
            "status": "running",
            "started": utc_now(),
            "attnflow": __version__,
        }
        atomic_write_text(out / META_FILE, json.dumps(meta, indent=1) + "\n")
        t0 = time.perf_counter()
        try:
            arrays, values = _split_result(resolve_function(fn)(**spec["params"]), fn)
            npz = _npz_bytes(arrays)
            text = json.dumps(values, indent=1, sort_keys=True, allow_nan=True) + "\n"
            atomic_write_bytes(out / ARRAYS_FILE, lambda fh: fh.write(npz))
            atomic_write_text(out / VALUES_FILE, text)
        except BaseException as exc:
            meta.update(status="failed", error=f"{type(exc).__name__}: {exc}", ended=utc_now())
            atomic_write_text(out / META_FILE, json.dumps(meta, indent=1) + "\n")
            raise
        meta.update(
            status="done",
            ended=utc_now(),
            elapsed_s=round(time.perf_counter() - t0, 3),
            sha256_arrays=_sha(npz),
            sha256_values=_sha(text.encode("utf-8")),
            arrays={k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in arrays.items()},
        )
        atomic_write_text(out / META_FILE, json.dumps(meta, indent=1) + "\n")
    return out


def read_compute(run_dir: str | Path) -> dict[str, Any]:
    """The stored result of a finished computation: name -> numpy array or JSON value.

    Raises
    ------
    CorruptFileError
        The directory holds no finished computation, or its files do not match their sha256.
    """
    out = Path(run_dir)
    done, why = compute_finished(out)
    if not done:
        status = "missing"
        if (out / META_FILE).is_file():
            try:
                status = _read_json(out / META_FILE, "meta file").get("status", "unknown")
            except CorruptFileError:
                status = "corrupt"
        raise CorruptFileError(
            f"{out} holds no finished computation (status {status}{'; ' + why if why else ''}); rerun the "
            "study to compute it"
        )
    with np.load(out / ARRAYS_FILE, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    values = json.loads((out / VALUES_FILE).read_text())
    return {**values, **arrays}
