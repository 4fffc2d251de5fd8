"""The quick variant of ``reproduce("massucco2026")`` (the study ``massucco2026``): output structure,
invariants of the numbers, reuse of the stored runs, the CLI alias."""

from __future__ import annotations

import json
import shutil

import pytest
import xarray as xr
from numpy.testing import assert_allclose
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments import read_meta
from attnflow.experiments.reproduce import available_reproductions, load_manifest, regime_configs
from attnflow.studies import markdown_tables, reproduce
from attnflow.studies.render import markdown, table_from_json

PNG = b"\x89PNG\r\n\x1a\n"
REGIMES = ("ou", "osc_per_head", "osc_shared")


@pytest.fixture(scope="module")
def quick(tmp_path_factory, quick_study):
    """A copy of the session's quick run of massucco2026 with its figures (tests/conftest.py; some tests
    here run the study again into the directory)."""
    cached, summary = quick_study("massucco2026")
    out = tmp_path_factory.mktemp("massucco2026") / "q"
    shutil.copytree(cached, out)
    return out, summary


def test_outputs_exist_and_figures_are_small_pngs(quick):
    out, summary = quick
    names = ["fig2_G2.png"] + [
        f"fig{i}_{w}_{k}.png" for i, w in ((1, "tokens"), (3, "ledger")) for k in REGIMES
    ]
    assert sorted(summary["figures"].values()) == sorted(names)
    for name in names:
        data = (out / name).read_bytes()
        assert data[:8] == PNG
        assert 10_000 < len(data) < 300_000, (name, len(data))
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["regimes"].keys() == summary["regimes"].keys()
    assert (out / "table.md").read_text() == markdown_tables(summary)
    # table.md is rendered from the Table specs of the analysis (issue 30), stored in tables.json
    specs = json.loads((out / "tables.json").read_text())["tables"]
    assert [t["id"] for t in specs] == ["fit", "per_H"]
    assert (out / "table.md").read_text() == markdown([table_from_json(t) for t in specs])
    for key in REGIMES:
        for h in (1, 10, 100):
            assert (out / "runs" / f"{key}_H{h}" / "data.zarr").is_dir()


def test_summary_keys(quick):
    _, s = quick
    assert s["quick"] is True and s["name"] == "massucco2026"
    assert {"window", "T", "regimes", "published"} <= s.keys() and s["run"]["figures"] == s["figures"]
    # the runner's record lives under "run" (issue 30), its wall time in run_log.json; both still read flat
    assert "versions" in s["run"] and s["wall_time_s"] > 0
    assert s["window"] == [0.5, 1.0]  # second half of T = 1
    assert set(s["regimes"]) == set(REGIMES)
    for reg in s["regimes"].values():
        assert reg["H"] == [1, 10, 100]
        for f in ("fit_G2", "fit_Ghat2"):
            assert {"a", "b", "a_ci", "b_ci", "r", "cov"} <= reg[f].keys()
            assert reg[f]["b_ci"][0] <= reg[f]["b"] <= reg[f]["b_ci"][1]
        for h in ("1", "10", "100"):
            row = reg["per_H"][h]
            # init: shared: OU runs 3 noise paths, a noiseless (oscillating) regime is computed once
            assert row["paths"] == (3 if reg["label"] == "OU" else 1) and row["seed"] == 0
            assert row["init"] == "shared" and row["paths_requested"] == 3
            for k in ("G2_mean", "G2_se", "Ghat2_mean", "Ghat2_se", "residual_paper_T", "residual_exact_T"):
                assert k in row
    assert s["published"]["osc_shared"]["b"] == 0.005


def test_g2_nonnegative_and_one_head_ghat2_is_g2(quick):
    out, s = quick
    for key in REGIMES:
        for h in (1, 10, 100):
            ds = xr.open_zarr(out / "runs" / f"{key}_H{h}" / "data.zarr")
            # G^2 >= 0 always; Ghat^2 (= -dE/dt at frozen weights) may change sign for H > 1
            assert (ds.G2.values >= 0).all()
            if h == 1:
                assert_allclose(ds.Ghat2.values, ds.G2.values, rtol=1e-10, atol=1e-14)
                row = s["regimes"][key]["per_H"]["1"]
                assert_allclose(row["Ghat2_mean"], row["G2_mean"], rtol=1e-10)
                assert_allclose(row["residual_paper_T"]["mean"], row["residual_exact_T"]["mean"], atol=1e-10)


def test_one_head_variants_coincide(quick):
    # with H = 1 the per-head phase is phi_0 = 0: both oscillating variants are the same run
    _, s = quick
    a, b = s["regimes"]["osc_per_head"]["per_H"]["1"], s["regimes"]["osc_shared"]["per_H"]["1"]
    assert_allclose(a["G2_per_path"], b["G2_per_path"], rtol=1e-12)


def _stamps(out):
    return {
        p.name: (read_meta(p)["started"], (p / "checkpoint.pt").stat().st_mtime_ns)
        for p in sorted((out / "runs").iterdir())
    }


def test_resume_reuses_finished_runs(quick):
    out, s = quick
    stamps = _stamps(out)
    assert len(stamps) == 9
    again = reproduce("massucco2026", out, quick=True, progress=False)
    # reuse observed on the run directories: none restarted, none rewritten
    assert _stamps(out) == stamps
    assert all(r["skipped"] for r in again["runs"].values())
    for key in REGIMES:
        for h in ("1", "10", "100"):
            assert (
                again["regimes"][key]["per_H"][h]["G2_per_path"]
                == s["regimes"][key]["per_H"][h]["G2_per_path"]
            )


def test_cli_alias_and_study_show_on_the_same_directory(quick):
    out, s = quick
    stamps = _stamps(out)
    res = CliRunner().invoke(app, ["reproduce", "massucco2026", "--out", str(out), "--quick", "-q"])
    assert res.exit_code == 0, res.output
    assert _stamps(out) == stamps
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["run"]["study"] == "massucco2026" and on_disk["run"]["status"] == "done"
    assert on_disk["regimes"]["ou"]["fit_G2"] == s["regimes"]["ou"]["fit_G2"]
    figures = on_disk["run"]["figures"]  # the runner's record (issue 30)
    assert figures["fig2"] == "fig2_G2.png"
    assert figures["fig1_ou"] == "fig1_tokens_ou.png"
    assert figures["fig3_osc_shared"] == "fig3_ledger_osc_shared.png"
    res = CliRunner().invoke(app, ["study", "show", str(out)])
    assert res.exit_code == 0 and "status: done (9 done" in res.output
    assert markdown_tables(on_disk) in res.output


def test_window_is_a_parameter(quick):
    out, s = quick
    w = reproduce("massucco2026", out, quick=True, progress=False, window=(0.0, 1.0))
    assert w["window"] == [0.0, 1.0]
    r = w["regimes"]["ou"]["per_H"]["1"]
    assert r["G2_mean"] != s["regimes"]["ou"]["per_H"]["1"]["G2_mean"]
    with pytest.raises(ValueError, match="window must satisfy"):
        reproduce("massucco2026", out, quick=True, progress=False, window=(0.8, 0.2))


def test_manifests_and_unknown_name():
    names = available_reproductions()
    assert {"massucco2026", "massucco2026_s1", "massucco2026_d5"} <= set(names)
    with pytest.raises(ValueError, match="unknown reproduction"):
        load_manifest("no_such_paper")
    cfgs = regime_configs(load_manifest("massucco2026"))
    assert len(cfgs) == 9
    assert {c["weights"]["phases"] for k, _, c in cfgs if k.startswith("osc")} == {"per_head", "shared"}
    assert all(
        c["tokens"]["n"] == 300 and c["paths"] == 20 and c["integrator"]["t1"] == 20.0 for _, _, c in cfgs
    )


@pytest.mark.parametrize("name", ["massucco2026", "massucco2026_s1", "massucco2026_d5"])
def test_presets_validate_in_the_config_schema(name):
    load_config = pytest.importorskip("attnflow.experiments.config").load_config
    for _, _, cfg in regime_configs(load_manifest(name)):
        c = load_config(cfg)
        assert c.tokens.n == 300


def test_markdown_tables_list_every_regime_and_head_count(quick):
    _, summary = quick
    text = markdown_tables(summary)
    fit_rows = [ln for ln in text.splitlines() if ln.startswith("| ") and "95% CI" not in ln][: len(REGIMES)]
    assert len(fit_rows) == len(REGIMES)
    for reg in summary["regimes"].values():
        for H, row in reg["per_H"].items():
            assert f"| {reg['label']} | {H} | {row['paths']} | {row['G2_mean']:.3g}" in text
    assert "| 0.373 | 0.27, 0.54 | 0.005 | -0.06, 0.07 |" in text  # the published oscillating fit


def test_tables_say_why_a_regime_has_no_fit_and_show_no_spread_for_one_path():
    from attnflow.studies.massucco2026 import tables

    ms = {"mean": 0.5, "std": 0.25}
    row = {"paths": 1, "G2_mean": 0.125, "G2_se": float("nan"), "Ghat2_mean": 0.25, "Ghat2_se": float("nan")}
    row |= {"residual_paper_T": ms, "residual_exact_T": ms, "dE_T": ms}
    reg = {"label": "OU", "fit_G2": {"error": "a fit needs 3 head counts: got 1"}, "per_H": {"10": row}}
    fit, per_h = tables({"regimes": {"ou": reg}})
    assert "No fit (too few head counts): OU: a fit needs 3 head counts: got 1." in fit.note
    assert [fit.rows[0][k] for k in ("a", "b", "r", "pub_a")] == [None, None, None, None]
    text = markdown([fit, per_h])
    assert "| OU |  |  |  |  |  |" in text
    assert "| OU | 10 | 1 | 0.125 | 0.25 | 0.5 | 0.5 | 0.5 |" in text  # one path: no +- spread
    row["paths"], row["G2_se"] = 4, 0.0625
    assert "| OU | 10 | 4 | 0.125 +- 0.062 |" in markdown(tables({"regimes": {"ou": reg}}))
