"""Bounded reads of a run's ``.npz`` archives (issue 30): :func:`attnflow.experiments.rundir.read_npz` and
the training figures, which read a received run directory through it."""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npy_format

from attnflow.experiments.rundir import CorruptRunError, read_npz

FIX = "rerun it"


def _member(shape, descr="<f8", data=b"\0" * 16) -> bytes:
    """An .npy member whose header claims ``shape`` over ``data`` (a crafted file)."""
    buf = io.BytesIO()
    npy_format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue() + data


def _zip(path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, raw in members.items():
            zf.writestr(name, raw)


def test_read_npz_returns_the_arrays_of_numpy_savez(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {
        "D": rng.normal(size=(3, 2, 2)).astype(np.float32),
        "steps": np.arange(4),
        "names": np.array(["a", "bc"]),
    }
    np.savez(tmp_path / "a.npz", **arrays)
    got = read_npz(tmp_path / "a.npz", FIX)
    assert sorted(got) == sorted(arrays)
    for k, v in arrays.items():
        np.testing.assert_array_equal(got[k], v, strict=True)  # the same values and dtypes


def test_a_declared_huge_array_is_refused_before_it_is_allocated(tmp_path):
    _zip(tmp_path / "h.npz", {"x.npy": _member((10**6, 10**6))})  # 8 TB declared over 16 bytes
    with pytest.raises(
        CorruptRunError,
        match=r"'x\.npy' declares shape \(1000000, 1000000\) of float64 .*over 16 bytes of data .*rerun it",
    ):
        read_npz(tmp_path / "h.npz", FIX)


def test_an_archive_over_the_bound_is_refused_unread(tmp_path):
    np.savez_compressed(tmp_path / "z.npz", x=np.zeros(2**18))  # 2 MiB uncompressed, a few KiB on disk
    assert os.path.getsize(tmp_path / "z.npz") < 2**16
    with pytest.raises(
        CorruptRunError, match=r"declares 2097\d+ bytes of arrays, more than the 1048576 .*rerun it"
    ):
        read_npz(tmp_path / "z.npz", FIX, max_bytes=2**20)
    assert read_npz(tmp_path / "z.npz", FIX, max_bytes=2**22)["x"].shape == (2**18,)


def test_object_arrays_other_members_and_non_archives_are_refused(tmp_path):
    np.savez(tmp_path / "o.npz", x=np.array([{"a": 1}], dtype=object))  # a pickle inside
    with pytest.raises(
        CorruptRunError, match=r"'x\.npy' holds object values, not numbers or strings .*pickle"
    ):
        read_npz(tmp_path / "o.npz", FIX)
    _zip(tmp_path / "m.npz", {"x.npy": _member((2,)), "run.py": b"print(1)"})
    with pytest.raises(CorruptRunError, match=r"holds 'run\.py', not an \.npy array; rerun it"):
        read_npz(tmp_path / "m.npz", FIX)
    (tmp_path / "t.npz").write_bytes(b"not a zip")
    with pytest.raises(
        CorruptRunError, match=r"is not an \.npz archive of arrays \(BadZipFile: .*\); rerun it"
    ):
        read_npz(tmp_path / "t.npz", FIX)
    os.mkfifo(tmp_path / "f.npz")
    with pytest.raises(
        CorruptRunError, match=r"is not a regular file \(a FIFO, a device or a directory\); rerun"
    ):
        read_npz(tmp_path / "f.npz", FIX)
    with pytest.raises(CorruptRunError, match=r"cannot read .*gone\.npz.*: No such file"):
        read_npz(tmp_path / "gone.npz", FIX)


def test_training_figures_refuse_a_crafted_archive(tmp_path):
    from attnflow.experiments.files import UnsafePathError
    from attnflow.plot.training import training_figures

    evals = [
        {"step": 0, "train_loss": 1.0, "test_loss": 1.1},
        {"step": 1, "train_loss": 0.5, "test_loss": 0.6},
    ]
    (tmp_path / "history.json").write_text(json.dumps({"losses": [1.0, 0.5], "evals": evals}))
    _zip(tmp_path / "clouds.npz", {"x0.npy": _member((10**5, 10**5, 3))})
    with pytest.raises(
        CorruptRunError, match=r"clouds\.npz.*declares shape .*refused unread.*rerun the training"
    ):
        training_figures(tmp_path)
    assert not (tmp_path / "figures").exists()  # refused before the first figure was drawn
    os.remove(tmp_path / "clouds.npz")
    outside = tmp_path.parent / f"{tmp_path.name}_outside.npz"
    np.savez(outside, x=np.zeros(2))
    os.symlink(outside, tmp_path / "clouds.npz")  # a link out of the run directory is not followed
    with pytest.raises(UnsafePathError, match=r"clouds\.npz.* outside .*attnflow reads nothing outside"):
        training_figures(tmp_path)
