"""Nothing outside the directory: ``report``, ``plot`` and ``animate`` never write through a planted symlink
and never read a file that leads outside the directory they were given; the animation is the file asked
for; every kind of run refuses a directory holding run files that attnflow did not create.

On the base commit: the three writes went through the symlink onto the victim file, the report embedded
the three private files, ``x.txt`` became ``x.mp4`` and the PDE run deleted someone's ``data.zarr``.
"""

from __future__ import annotations

import base64
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from security_helpers import TINY_PDE, TINY_RUN, TINY_TRAINING, cfg

from attnflow.experiments.files import UnsafePathError
from attnflow.experiments.pde_runs import run_pde
from attnflow.experiments.store import open_run, run_experiment
from attnflow.experiments.training_run import run_training
from attnflow.plot.runs import animate_run, plot_run
from attnflow.report import write_report

SECRET = b"\x89PNG\r\n\x1a\n-- PRIVATE KEY of the victim 7f3a9c --"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sec") / "run"
    c = cfg(TINY_RUN)
    c["record"] = {"every": 5, "positions": True}
    run_experiment(c, out)
    return out


def _dataset(run_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return open_run(run_dir)


def _victim(tmp_path) -> Path:
    v = tmp_path / "victim.txt"
    v.write_bytes(b"precious")
    return v


def _plant(link: Path, target: Path) -> None:
    link.unlink(missing_ok=True)
    link.symlink_to(target)


# -- writes ----------------------------------------------------------------------------------------
def test_report_does_not_write_through_a_planted_symlink(run_dir, tmp_path):
    victim = _victim(tmp_path)
    _plant(run_dir / "report.html", victim)
    try:
        with pytest.raises(UnsafePathError, match=r"report .*report\.html is a symbolic link .*remove it"):
            write_report(run_dir)
    finally:
        (run_dir / "report.html").unlink()
    assert victim.read_bytes() == b"precious"
    page = write_report(run_dir)  # without the link: a new regular file
    assert page.is_file() and not page.is_symlink() and page.read_text().startswith("<!DOCTYPE html>")
    assert not list(run_dir.glob(".report*.html"))  # no tmp file left


def test_plot_does_not_write_through_a_planted_symlink(run_dir, tmp_path):
    victim = _victim(tmp_path)
    _plant(run_dir / "summary.png", victim)
    try:
        with pytest.raises(UnsafePathError, match=r"figure .*summary\.png is a symbolic link"):
            plot_run(_dataset(run_dir), run_dir / "summary.png")
    finally:
        (run_dir / "summary.png").unlink()
    assert victim.read_bytes() == b"precious"
    p = plot_run(_dataset(run_dir), run_dir / "summary.png")
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not p.is_symlink()


@pytest.mark.parametrize("name", ["tokens.mp4", "tokens.gif"])
def test_animate_does_not_write_through_a_planted_symlink(run_dir, tmp_path, name):
    victim = _victim(tmp_path)
    _plant(run_dir / name, victim)
    try:
        with pytest.raises(UnsafePathError, match=r"animation .* is a symbolic link"):
            animate_run(_dataset(run_dir), run_dir / name, max_frames=2, size_px=64)
    finally:
        (run_dir / name).unlink()
    assert victim.read_bytes() == b"precious"


def test_animate_writes_what_was_asked_or_refuses(run_dir):
    ds = _dataset(run_dir)
    with pytest.raises(
        ValueError, match=r"must end in \.mp4 or \.gif .*got '\.txt'; name it x\.mp4 or x\.gif"
    ):
        animate_run(ds, run_dir / "x.txt", max_frames=2, size_px=64)
    assert not (run_dir / "x.mp4").exists() and not (run_dir / "x.gif").exists()
    assert not (run_dir / "x.txt").exists()
    gif = animate_run(ds, run_dir / "a.gif", max_frames=2, size_px=64)
    assert gif == run_dir / "a.gif" and gif.read_bytes()[:3] == b"GIF"


def test_report_refuses_an_output_outside_the_directory_by_default_only(run_dir, tmp_path):
    elsewhere = tmp_path / "pages" / "r.html"
    elsewhere.parent.mkdir()
    assert write_report(run_dir, elsewhere) == elsewhere  # an explicit output is the user's choice


# -- reads -----------------------------------------------------------------------------------------
def _study(tmp_path, figures=None, runs=()):
    d = tmp_path / "study"
    d.mkdir()
    (d / "study.json").write_text(json.dumps({"study": "mine", "runs": list(runs), "config": {}}))
    (d / "summary.json").write_text(json.dumps({"status": "done", "figures": figures or {}}))
    return d


@pytest.mark.parametrize("how", ["absolute", "dotdot", "png_symlink"])
def test_report_does_not_embed_files_outside_the_directory(tmp_path, how):
    private = tmp_path / "private" / "key.png"
    private.parent.mkdir()
    private.write_bytes(SECRET)
    if how == "absolute":
        d = _study(tmp_path, {"f": str(private)})
    elif how == "dotdot":
        d = _study(tmp_path, {"f": "../private/key.png"})
    else:
        d = _study(tmp_path)
        (d / "fig.png").symlink_to(private)
    html = write_report(d).read_text()
    for needle in (
        base64.b64encode(SECRET).decode(),
        "PRIVATE KEY",
        base64.b64encode(SECRET[:30]).decode()[:30],
    ):
        assert needle not in html
    assert "leads outside the directory" in html


@pytest.mark.parametrize("name", ["config.yaml", "meta.json", "summary.json", "study.json", "table.md"])
def test_report_refuses_a_known_file_that_is_a_symlink_out(tmp_path, name):
    private = tmp_path / "secret.txt"
    private.write_text("PRIVATE")
    d = _study(tmp_path) if name in ("summary.json", "study.json", "table.md") else tmp_path / "run"
    d.mkdir(exist_ok=True)
    (d / name).unlink(missing_ok=True)
    (d / name).symlink_to(private)
    with pytest.raises(
        UnsafePathError, match=rf"{name}.*resolves to .*secret\.txt, outside .*reads nothing outside"
    ):
        write_report(d)


def test_report_refuses_a_fifo_in_place_of_a_file(tmp_path):
    import os

    d = _study(tmp_path)
    (d / "study.json").unlink()
    os.mkfifo(d / "study.json")
    with pytest.raises(UnsafePathError, match=r"study\.json is not a regular file"):
        write_report(d)


# -- one store, one rule ---------------------------------------------------------------------------
def _theirs(out: Path, name: str) -> dict:
    out.mkdir(parents=True)
    if name == "data.zarr":
        xr.Dataset({"v": ("t", np.arange(3.0))}).to_zarr(out / name)
    else:
        (out / name).write_bytes(b"someone's file")
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


RUNNERS = {
    "particle": lambda out, resume: run_experiment(cfg(TINY_RUN), out, resume=resume),
    "pde": lambda out, resume: run_pde(cfg(TINY_PDE), out, resume=resume),
    "training": lambda out, resume: run_training(cfg(TINY_TRAINING), out),
}


@pytest.mark.parametrize("resume", [True, False])
@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("particle", "data.zarr"),
        ("pde", "data.zarr"),
        ("pde", "checkpoint.pt"),
        ("training", "checkpoint.pt"),
    ],
)
def test_every_kind_refuses_a_directory_with_someone_elses_run_files(tmp_path, kind, name, resume):
    out = tmp_path / "theirs"
    before = _theirs(out, name)
    with pytest.raises(UnsafePathError, match=rf"holds {name} that attnflow did not create \(no \.attnflow"):
        RUNNERS[kind](out, resume)
    after = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if k != ".attnflow.lock"} == before
