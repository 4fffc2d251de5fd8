"""Reproduction v2 (issue 11), the user-facing part: progress lines with the overall time left (also in a
log), ``attnflow plot`` titles (parameters, "unfinished"), the sweep overlay, ``attnflow animate`` (MP4 or
GIF), ``attnflow info`` on a study directory, and the robustness study's quick variant."""

from __future__ import annotations

import io
import json
import time

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments import run_experiment
from attnflow.experiments.progress import OverallProgress, ProgressBar, overall_progress
from attnflow.plot.reproduction import view_direction
from attnflow.plot.runs import animate_run, run_title
from attnflow.studies.massucco2026_robustness import RobustnessStudy, spread
from attnflow.studies.render import markdown, table_from_json

runner = CliRunner()


def _cfg(**over) -> dict:
    cfg = {
        "name": "tiny",
        "model": {"direction": "descent", "backend": "torch"},
        "weights": {"process": "ornstein_uhlenbeck", "sigma2": 0.5},
        "tokens": {"init": "octahedral", "n": 10, "d": 3},
        "heads": {"init": "symmetric_gaussian", "H": 2},
        "integrator": {"method": "euler", "dt": 0.05, "t1": 1.0},
        "record": {"every": 2},
        "paths": 2,
        "init": "shared",
    }
    cfg.update(over)
    return cfg


@pytest.fixture(scope="module")
def done_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "r"
    run_experiment(_cfg(), out)
    return out


# -- progress ---------------------------------------------------------------------------------------------
class _Log(io.StringIO):
    def isatty(self) -> bool:  # a log file, not a terminal
        return False


def test_progress_writes_whole_lines_to_a_log_with_the_overall_view(monkeypatch):
    log = _Log()
    clock = {"t": 1000.0}
    monkeypatch.setattr(time, "monotonic", lambda: clock["t"])
    with overall_progress({"a": 1.0, "b": 3.0}) as overall:
        overall.finish("a")  # 1 unit of work done in 10 s: the remaining 3 units take 30 s
        clock["t"] += 10.0
        bar = ProgressBar(100, "b (2 paths)", unit="steps", enabled=None, stream=log, log_every_s=30, run="b")
        bar.update(1)  # the first update writes a line at once
        clock["t"] += 5.0
        bar.update(1)  # within 30 s: nothing
        clock["t"] += 30.0
        bar.update(48)  # 30 s later: a line, b half done
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in log.getvalue()
    assert "[run 2/2 b, overall left" in lines[0]
    # at the last line: work done 1 + 1.5 in 45 s, left 1.5 units -> 27 s
    assert lines[1].endswith("[run 2/2 b, overall left 0:27]"), lines[1]
    assert "50/100 steps" in lines[1]


def test_overall_left_ignores_skipped_runs(monkeypatch):
    clock = {"t": 0.0}
    monkeypatch.setattr(time, "monotonic", lambda: clock["t"])
    ov = OverallProgress({"a": 5.0, "b": 1.0, "c": 1.0})
    ov.finish("a", skipped=True)  # complete before: not part of the rate
    clock["t"] = 2.0
    ov.finish("b")  # 1 unit in 2 s
    assert ov.left_s() == pytest.approx(2.0)
    assert np.isnan(OverallProgress({"x": 1.0}).left_s())


# -- plot, animate, info -------------------------------------------------------------------------------
def test_plot_title_names_parameters_and_an_unfinished_run(done_run):
    ds = xr.open_zarr(done_run / "data.zarr")
    title = run_title(ds, "tiny", "done")
    for text in ("H = 2", "beta = 1", "OU sigma^2 = 0.5", "descent", "init shared", "2 path(s)"):
        assert text in title
    assert "unfinished" not in title
    cut = ds.isel(time=slice(0, 4))  # records at t = 0, 0.1, 0.2, 0.3 of 1
    assert run_title(cut, "tiny", "interrupted").endswith("unfinished (t = 0.3 of 1)")
    res = runner.invoke(app, ["plot", str(done_run)])
    assert res.exit_code == 0, res.output
    assert (done_run / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_back_hemisphere_is_the_one_facing_away():
    v = view_direction(30.0, -60.0)
    assert np.linalg.norm(v) == pytest.approx(1.0)
    # matplotlib's default view (elev 30, azim -60) looks from +z above, from -y: (0, -1, 0) is in front
    assert v[2] == pytest.approx(0.5) and np.array([0, -1, 0]) @ v > 0 and np.array([0, 1, 0]) @ v < 0


def test_animate_gif_and_mp4(done_run, tmp_path):
    ds = xr.open_zarr(done_run / "data.zarr")
    gif = animate_run(ds, tmp_path / "a.gif", fmt="gif", max_frames=4, size_px=160)
    from PIL import Image

    with Image.open(gif) as im:
        assert im.n_frames == 4 and im.size == (160, 160)
    res = runner.invoke(app, ["animate", str(done_run), "--max-frames", "3", "--mean"])
    assert res.exit_code == 0, res.output
    written = res.output.strip().splitlines()[-1]
    data = open(written, "rb").read()
    if written.endswith(".mp4"):
        assert data[4:8] == b"ftyp" and len(data) > 1000
    else:
        assert data[:6] == b"GIF89a"
    with pytest.raises(ValueError, match=r"no token positions to animate.*record.positions: true"):
        animate_run(ds.drop_vars("positions"), tmp_path / "b")


@pytest.fixture(scope="module")
def robustness(quick_study):
    """The session's quick run of the robustness study (tests/conftest.py; the tests only read it)."""
    return quick_study("massucco2026_robustness")


def test_info_on_a_study_directory(robustness):
    out, _ = robustness
    res = runner.invoke(app, ["info", str(out)])
    assert res.exit_code == 0, res.output
    assert "study massucco2026_robustness" in res.output and "status: done" in res.output


# -- the robustness study (quick variant, CI) ----------------------------------------------------------------
def test_robustness_quick_variant(robustness):
    out, s = robustness
    assert s["status"] == "done"
    cfg = RobustnessStudy().config(quick=True)
    osc = s["regimes"]["osc_shared"]
    assert "computed once" in osc["estimator"] and "noise" in s["regimes"]["ou"]["estimator"]
    base = osc["cells"][s["base_cell"]]
    assert base["draws"] == cfg.draws and set(base["windows"]) == {"[T/2, T]", "t >= 0.2"}
    w = base["windows"]["[T/2, T]"]
    # each draw's fit is the fit of its G^2 values; the spread is that of the per-draw fits
    from attnflow.analysis.fits import fit_power_law

    for f in w["fits"]:
        ref = fit_power_law(cfg.H, f["G2"])
        assert f["a"] == pytest.approx(ref["a"], rel=1e-12) and f["b"] == pytest.approx(ref["b"], rel=1e-12)
    bs = [f["b"] for f in w["fits"]]
    assert w["b"]["min"] == min(bs) and w["b"]["max"] == max(bs)
    assert w["b"]["sd"] == pytest.approx(np.std(bs, ddof=1), rel=1e-12)
    chk = w["vs_published_b"]
    assert chk["published"] == 0.005 and chk["inside_min_max"] == (min(bs) <= 0.005 <= max(bs))
    # distinct draws: distinct shared starts, so distinct G^2
    assert len({tuple(f["G2"]) for f in w["fits"]}) == len(w["fits"])
    # the variant cell (dt = 5e-3) ran one draw of osc_shared only
    assert set(osc["cells"]) == {s["base_cell"], "n12_dt0p005"} and osc["cells"]["n12_dt0p005"]["draws"] == 1
    assert "ou" in s["regimes"] and set(s["regimes"]["ou"]["cells"]) == {s["base_cell"]}
    table = (out / "table.md").read_text()
    assert "| osc_shared | 12 | 0.01 | [T/2, T] | 2 |" in table
    # rendered from the Table specs of the analysis (issue 30): one table per fitted parameter
    specs = json.loads((out / "tables.json").read_text())["tables"]
    assert [t["id"] for t in specs] == ["a", "b", "r"]
    assert table == markdown([table_from_json(t) for t in specs])
    json.dumps(s)  # the summary is plain JSON


def test_spread_and_bad_parameters():
    sp = spread([1.0, 2.0, 3.0, float("nan")])
    assert sp["count"] == 3 and sp["mean"] == 2.0 and sp["sd"] == 1.0 and sp["min"] == 1.0
    from attnflow.studies import StudyConfigError

    with pytest.raises(StudyConfigError, match=r"record_dt must be a whole multiple of every dt"):
        RobustnessStudy().config({"record_dt": 0.015})
    with pytest.raises(StudyConfigError, match=r"window start must lie in \[0, T\)"):
        RobustnessStudy().config({"window_starts": [25.0]})
    with pytest.raises(StudyConfigError, match=r"cells must be distinct"):
        RobustnessStudy().config({"variants": [(200, 0.01)]})
