"""Issue 26 part 1, "drawn in the report": ``attnflow report`` on a probe directory draws one figure per
measure (the trained model beside its random-initialisation nulls), a per-layer table and the probe's own
PNG figures. The numbers on the page are checked against ``summary.json`` read here with ``json``; the
bootstrap band against a ``probe.zarr`` written here with xarray (committed probes keep no Zarr store)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnflow.report import NotReportableError, collect, detect_kind, write_report

PROBES = Path(__file__).resolve().parents[1] / "docs" / "studies" / "probe"


def _page_figures(page: Path) -> dict:
    text = page.read_text()
    m = re.search(r'<script type="application/json" id="af-figures">(.*?)</script>', text, re.S)
    return json.loads(m.group(1))


@pytest.mark.parametrize("name", ["minilm", "minilm-l3", "smollm2"])
def test_every_committed_probe_is_reported(name, tmp_path):
    d = PROBES / name
    summary = json.loads((d / "summary.json").read_text())
    assert detect_kind(d) == "probe"
    page = write_report(d, tmp_path / "p.html", plotly="shared")
    figs = _page_figures(page)
    per_layer = summary["per_layer"]
    nulls = [m for m in per_layer if m.startswith("random-")]
    for measure in ("cos_hidden", "erank_gram", "sink_special"):
        fig = figs[f"fig-probe-{measure.replace('_', '-')}"]
        trained = next(t for t in fig["data"] if t["name"] == "trained")
        np.testing.assert_allclose(trained["y"], per_layer["trained"][measure], rtol=1e-6)
        dashed = [t for t in fig["data"] if t.get("legendgroup") == "null"]
        assert len(dashed) == len(nulls) >= 2
        for t, m in zip(dashed, nulls, strict=True):
            np.testing.assert_allclose(t["y"], per_layer[m][measure], rtol=1e-6)
    assert {"fig-probe-lip-attention", "fig-probe-jac-block"} <= set(figs)
    text = page.read_text()
    # the table: the trained value at depth 0 with the mean of the nulls in brackets
    v0 = per_layer["trained"]["cos_hidden"][0]
    null0 = np.mean([per_layer[m]["cos_hidden"][0] for m in nulls])
    assert f"<td>{v0:.3g} <span class='note'>({null0:.3g})</span></td>" in text
    # the probe's PNG figures are inlined, one per file summary.json names
    assert text.count('src="data:image/png;base64,') == len(summary["figures"])
    assert "no probe.zarr here" in text


def test_the_band_comes_from_probe_zarr(tmp_path):
    d = tmp_path / "probe"
    shutil.copytree(PROBES / "minilm-l3", d, ignore=shutil.ignore_patterns("*.png"))
    summary = json.loads((d / "summary.json").read_text())
    mean = np.asarray(summary["per_layer"]["trained"]["cos_hidden"])
    models = list(summary["per_layer"])
    lo, hi = mean - 0.01, mean + 0.02
    ds = xr.Dataset(
        {
            "cos_hidden_lo": (("model", "layer"), np.stack([lo] * len(models))),
            "cos_hidden_hi": (("model", "layer"), np.stack([hi] * len(models))),
        },
        coords={"model": models, "layer": np.arange(mean.size)},
    )
    ds.to_zarr(d / "probe.zarr", zarr_format=2, consolidated=True)
    page = collect(d)
    band = next(t for t in page.figures["fig-probe-cos-hidden"]["data"] if t.get("fill") == "toself")
    n = mean.size
    np.testing.assert_allclose(band["y"][:n], hi, rtol=1e-6)
    np.testing.assert_allclose(band["y"][n:], lo[::-1], rtol=1e-6)
    assert not any("no probe.zarr" in note for note in page.notes)
    assert all(
        t.get("fill") != "toself" for t in page.figures["fig-probe-erank-gram"]["data"]
    )  # no band stored


def test_a_probe_summary_without_a_table_is_refused(tmp_path):
    d = tmp_path / "probe"
    d.mkdir()
    (d / "probe.zarr").mkdir()
    (d / "summary.json").write_text(json.dumps({"model": "x", "architecture": {}, "per_layer": {}}))
    with pytest.raises(
        NotReportableError, match=r"summary\.json has no per_layer table; rerun `attnflow probe`"
    ):
        collect(d)
    (d / "summary.json").write_text("{" * 10)
    with pytest.raises(NotReportableError, match=r"probe summary .* is not valid JSON"):
        collect(d)
    (d / "summary.json").unlink()
    with pytest.raises(NotReportableError, match=r"holds no summary\.json; a probe directory is what"):
        collect(d)


# -- the summary writer (issue 26: every probe directory, and docs/studies/probe itself, has summary.json)
def _tiny_probe_dataset(seed: int = 0) -> xr.Dataset:
    """What summary_table reads from probe.zarr, on 2 models, 3 depths, 2 blocks, 2 lengths."""
    rng = np.random.default_rng(seed)
    models, L = ["trained", "random-0"], 2
    layer = {k: (("model", "layer"), rng.random((2, L + 1))) for k in
             ("cos_hidden_mean", "cos_sphere_mean", "cos_sphere_content_mean", "aniso_hidden_mean",
              "erank_sv_mean", "erank_gram_mean")}  # fmt: skip
    heads = ("attn_entropy", "sink_special", "sink_first", "sink_special_valuenorm", "ds_distance")
    block = {f"{k}_layer_mean": (("model", "block"), rng.random((2, L))) for k in heads}
    jac = {k: (("model", "length", "sequence", "block"), 1 + rng.random((2, 2, 1, L)))
           for k in ("lip_attention", "jac_block")}  # fmt: skip
    coords = {"model": models, "layer": np.arange(L + 1), "block": np.arange(L), "length": [8, 32]}
    return xr.Dataset({**layer, **block, **jac}, coords=coords)


def test_regenerate_summary_recomputes_the_table_and_refuses_other_arrays():
    from attnflow.analysis.probe import regenerate_summary, summary_table

    ds = _tiny_probe_dataset()
    stored = json.loads(json.dumps({"model": "x", "per_layer": summary_table(ds)}))
    r = regenerate_summary(stored, ds)
    assert (
        r["model"] == "x" and r["versions"]["numpy"] == np.__version__ and "not re-run" in r["versions_note"]
    )
    assert r["per_layer"]["trained"]["cos_hidden"] == [
        round(float(v), 4) for v in ds.cos_hidden_mean[0].values
    ]
    with pytest.raises(ValueError, match=r"recomputed from probe\.zarr differs from summary\.json's"):
        regenerate_summary(stored, _tiny_probe_dataset(seed=1))


def test_the_committed_probe_index_is_the_probes_summaries():
    from attnflow.analysis.probe import INDEX_MEASURES, probe_index

    index = json.loads((PROBES / "summary.json").read_text())
    subs = {
        p.name: json.loads((p / "summary.json").read_text()) for p in sorted(PROBES.iterdir()) if p.is_dir()
    }
    assert set(subs) == {"minilm", "minilm-l3", "smollm2"} and all("versions" in s for s in subs.values())
    fresh = probe_index(subs)
    assert fresh["probes"] == index["probes"] and index["versions"]["attnflow"]
    assert fresh["verdicts"] == index["verdicts"]  # one description record per probed model
    assert [r["class"] for r in index["verdicts"]] == ["description"] * 3
    # the index's null column is the mean over the random initialisations, recomputed here
    s = subs["minilm"]["per_layer"]
    for key in INDEX_MEASURES:
        nulls = np.mean([s[m][key] for m in s if m.startswith("random-")], axis=0)
        np.testing.assert_allclose(
            index["probes"]["minilm"]["per_layer"][key]["random_init_mean"], nulls, atol=5e-5
        )
