"""A received run's ``data.zarr`` is read only when it holds folders and regular files (issue 29, "the
same kind of reader will try inputs not listed here").

A chunk, a ``.zarray`` or ``.zmetadata`` replaced by a symbolic link to a file outside the run directory
(here a copy of the real chunk, so that the store still reads) is refused by every reader of a run
directory: ``info`` (``run_info``), ``plot``/``animate``/``report``/``pde-plot`` (``open_run``), the
"done" check (``verify_run``), and resume (the store's truncation); a FIFO in place of a chunk would hang
the read and is refused too. One ``UnsafePathError`` line naming the entry and the fix; the CLI prints one
``error:`` line and exits 1.

On the base commit each reader read the linked file as if it were the run's own (the private copy's
bytes came back as the run's data), and the FIFO hung ``open_run(...).load()``.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from security_helpers import TINY_RUN, cfg, set_status
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments.files import UnsafePathError
from attnflow.experiments.store import check_store, open_run, run_experiment, run_info, verify_run
from attnflow.report import write_report

runner = CliRunner()


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("links") / "run"
    c = cfg(TINY_RUN)
    c["record"] = {"every": 5, "positions": True}
    c["checkpoint_every"] = 5
    run_experiment(c, out)
    return out, c


def _chunk(store: Path) -> Path:
    """A chunk file of the ``energy`` array (format 2: ``energy/0.0``...)."""
    return next(p for p in sorted((store / "energy").iterdir()) if not p.name.startswith("."))


@pytest.fixture(params=["chunk", ".zarray", ".zmetadata"])
def linked_run(request, good_run, tmp_path):
    """A copy of the run whose store entry ``param`` is a symlink to a private copy outside the run."""
    src, c = good_run
    run = tmp_path / "run"
    shutil.copytree(src, run)
    store = run / "data.zarr"
    entry = {
        "chunk": _chunk(store),
        ".zarray": store / "energy" / ".zarray",
        ".zmetadata": store / ".zmetadata",
    }[request.param]
    private = tmp_path / "private" / entry.name
    private.parent.mkdir()
    shutil.copyfile(entry, private)
    entry.unlink()
    entry.symlink_to(private)
    return run, c, entry


MSG = r"data\.zarr.* in the run's store is a symbolic link \(to .*private.*\); attnflow reads nothing"


def _quiet(fn, *a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a)


def test_open_run_refuses_a_link_in_the_store(linked_run):
    run, _, _ = linked_run
    with pytest.raises(UnsafePathError, match=MSG):
        _quiet(open_run, run).load()


def test_verify_and_info_refuse_a_link_in_the_store(linked_run):
    run, _, _ = linked_run
    with pytest.raises(UnsafePathError, match=MSG):
        verify_run(run)
    with pytest.raises(UnsafePathError, match=MSG):
        run_info(run)


def test_resume_refuses_a_link_in_the_store(linked_run):
    run, c, entry = linked_run
    set_status(run, "interrupted")
    with pytest.raises(UnsafePathError, match=MSG):
        run_experiment(c, run)
    assert entry.is_symlink()  # nothing was rewritten through the link or around it


def test_report_refuses_a_link_in_the_store(linked_run):
    run, _, _ = linked_run
    with pytest.raises(UnsafePathError, match=MSG):
        write_report(run)
    assert not (run / "report.html").exists()


@pytest.mark.parametrize("command", ["info", "plot", "animate", "report"])
def test_the_commands_refuse_a_link_in_the_store_in_one_line(linked_run, command):
    run, _, _ = linked_run
    r = runner.invoke(app, [command, str(run)])
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code == 1, r.output
    assert len(lines) == 1 and lines[0].startswith("error:") and "symbolic link" in lines[0], r.output
    assert "Traceback" not in r.output


def test_a_fifo_in_place_of_a_chunk_is_refused(good_run, tmp_path):
    src, _ = good_run
    run = tmp_path / "run"
    shutil.copytree(src, run)
    chunk = _chunk(run / "data.zarr")
    chunk.unlink()
    os.mkfifo(chunk)
    with pytest.raises(UnsafePathError, match=r"is not a regular file \(a FIFO, a socket or a device\)"):
        _quiet(open_run, run)


def test_a_store_that_is_a_link_is_refused_and_a_clean_store_passes(good_run, tmp_path):
    src, _ = good_run
    run = tmp_path / "run"
    run.mkdir()
    (run / "data.zarr").symlink_to(src / "data.zarr")
    with pytest.raises(UnsafePathError, match=r"data\.zarr is a symbolic link"):
        _quiet(open_run, run)
    assert check_store(src / "data.zarr") == src / "data.zarr"
    ds = _quiet(open_run, src)
    assert np.isfinite(ds["energy"].values).all()
