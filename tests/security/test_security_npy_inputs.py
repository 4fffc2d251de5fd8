"""The input arrays a config names (``tokens.path``, ``heads.path`` of a particle run; ``density.path``,
``heads.path`` of a PDE run) are read by one helper, ``files.read_npy``: regular files only, the ``.npy``
header (shape, dtype) checked before any data is read (issue 29, "the same kind of reader will try inputs
not listed here").

Base commit (``np.load`` at builder.py:161,175 and pde_runs.py:284,304): a FIFO hangs the build, a header
that claims a huge shape over a few bytes ends in a bare ``MemoryError`` (numpy allocates the claimed
array first), ``/dev/zero`` and an object array are refused with numpy's pickle message, which names
neither the rule nor the fix.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format
from security_helpers import TINY_PDE, TINY_RUN, cfg

from attnflow.experiments import files
from attnflow.experiments.builder import build
from attnflow.experiments.errors import MAX_MESSAGE_CHARS, ConfigError
from attnflow.experiments.files import InputFileError, read_npy
from attnflow.experiments.pde_runs import build_pde


class _Alarm(Exception):
    pass


def _refused(fn, seconds: int = 5) -> str:
    """``fn()`` must raise ConfigError within ``seconds`` (a hang fails the test instead of the suite);
    the message is one line under the message cap."""

    def ring(signum, frame):
        raise _Alarm(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    t0 = time.monotonic()
    try:
        with pytest.raises(ConfigError) as info:
            fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    msg = str(info.value)
    # 2 s: the refusals read at most a header; the bound is generous for a loaded shared machine
    assert time.monotonic() - t0 < 2.0 and len(msg) < MAX_MESSAGE_CHARS and "\n" not in msg, msg[:300]
    return msg


def _particle(path: Path, key: str):
    c = cfg(TINY_RUN)
    if key == "tokens.path":
        c["tokens"] = {"init": "file", "path": str(path)}
    else:
        c["heads"] = {"init": "file", "H": 2, "path": str(path)}
    return lambda: build(c)


def _pde(path: Path, key: str):
    c = cfg(TINY_PDE)
    if key == "density.path":
        c["density"] = {"init": "particles", "path": str(path), "kappa": 6.0}
    else:
        c["heads"] = {"init": "file", "H": 2, "scale": 1.0, "path": str(path)}
    return lambda: build_pde(c)


#: the four reads of an input array: (builder, config key)
READS = [(_particle, "tokens.path"), (_particle, "heads.path"), (_pde, "density.path"), (_pde, "heads.path")]
IDS = ["particle-tokens", "particle-heads", "pde-density", "pde-heads"]


def _huge_header(path: Path, shape: tuple[int, ...]) -> None:
    """A valid .npy header claiming ``shape`` (float64) followed by 16 bytes of data."""
    with open(path, "wb") as fh:
        npy_format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": shape})
        fh.write(b"\0" * 16)


@pytest.mark.parametrize(("make", "key"), READS, ids=IDS)
def test_a_fifo_input_does_not_hang(make, key, tmp_path):
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    msg = _refused(make(fifo, key))
    assert key in msg and "not a regular file" in msg


@pytest.mark.parametrize(("make", "key"), READS, ids=IDS)
def test_dev_zero_input_is_refused_unread(make, key):
    msg = _refused(make(Path("/dev/zero"), key))
    assert "not a regular file" in msg


@pytest.mark.parametrize(("make", "key"), READS, ids=IDS)
def test_a_header_claiming_a_huge_shape_allocates_nothing(make, key, tmp_path):
    f = tmp_path / "huge.npy"
    _huge_header(f, (2**20, 2**20, 3))  # 2.6e16 bytes claimed, 16 stored
    msg = _refused(make(f, key))
    assert "shape (1048576, 1048576, 3)" in msg and "GiB" in msg and "allow_large: true" in msg


@pytest.mark.parametrize(("make", "key"), READS, ids=IDS)
def test_an_object_array_is_refused_by_name(make, key, tmp_path):
    f = tmp_path / "obj.npy"
    with open(f, "wb") as fh:  # the header only: the refusal must come before the (pickled) data
        npy_format.write_array_header_1_0(fh, {"descr": "|O", "fortran_order": False, "shape": (2, 3)})
        fh.write(b"\x80\x04N.")
    msg = _refused(make(f, key))
    assert "object dtype" in msg and key in msg


def test_a_truncated_array_names_the_missing_bytes(tmp_path):
    f = tmp_path / "t.npy"
    _huge_header(f, (8, 3))  # 192 bytes claimed, 16 stored
    with pytest.raises(InputFileError, match=r"truncated: its header says shape \(8, 3\) .*192 bytes.* 16"):
        read_npy(f)


def test_the_cap_is_checked_before_reading_and_lifted_by_allow_large(tmp_path, monkeypatch):
    f = tmp_path / "tokens.npy"
    x = np.random.default_rng(0).normal(size=(8, 3))
    np.save(f, x / np.linalg.norm(x, axis=1, keepdims=True))
    monkeypatch.setattr(files, "MAX_NPY_BYTES", 100)  # the file's 192 bytes of data exceed it
    with pytest.raises(InputFileError, match=r"192 bytes .*more than the 100 bytes an input array may have"):
        read_npy(f, files.MAX_NPY_BYTES, what="tokens.path")
    np.testing.assert_array_equal(read_npy(f, None), np.load(f))  # no cap: the array itself


def test_not_an_npy_file_is_refused(tmp_path):
    f = tmp_path / "a.npz"
    np.savez(f, x=np.zeros(3))
    with pytest.raises(InputFileError, match=r"is not a \.npy array .*numpy\.save"):
        read_npy(f, what="tokens.path")
    with pytest.raises(InputFileError, match=r"cannot read the tokens.path .*No such file"):
        read_npy(tmp_path / "missing.npy", what="tokens.path")


def test_a_good_input_builds_the_same_run(tmp_path):
    """The helper reads what np.load reads: a run from a file equals a run from the same array."""
    f = tmp_path / "tokens.npy"
    x = np.random.default_rng(1).normal(size=(8, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(f, x)
    spec = _particle(f, "tokens.path")()
    np.testing.assert_array_equal(spec.x0[0].numpy(), x)
