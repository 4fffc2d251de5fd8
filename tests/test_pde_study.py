"""The quick variant of the ``pde_particles`` study (issue 16), with its figures."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnflow.studies import StudyConfigError, get_study


def test_quick_pde_particles_study(quick_study):
    out, s = quick_study("pde_particles")  # the session's quick run, with figures (tests/conftest.py)
    summary = json.loads((out / "summary.json").read_text())
    assert s["s1"]["fits"]["l2_T"]["n"] == [100, 300, 1000]
    for key in ("s1", "s2"):
        m = summary[key]
        # the PDE is resolved far below the sampling error of the particles
        assert m["pde_error_sup_vs_refined"] < 1e-4
        assert abs(m["mass_drift"]) < 1e-12 and abs(m["ledger_residual"]) < 1e-6
        # distances shrink with n (three sizes: a loose band around the n^-1/2 of i.i.d. sampling)
        rate = m["fits"]["l2_T"]["rate"]
        assert 0.2 < rate < 1.0, rate
    for r in summary["closed_forms"]["growth_rates"]:
        assert r["rel_error"] < 1e-6, r
    assert 3.5 < summary["ledger_order"]["order"] < 4.5
    assert np.all(np.array([b["roundtrip_error"] for b in summary["sht_ducc0"]]) < 1e-12)
    for f in ("fig_rate.png", "fig_density_s1.png", "fig_density_map.png"):
        assert (out / f).is_file()
    assert (out / "density.mp4").is_file() or (out / "density.gif").is_file()


def test_study_refuses_bad_parameters():
    st = get_study("pde_particles")
    with pytest.raises(StudyConfigError, match="s1_weights"):
        st.config({"s1_weights": "ou"})
    with pytest.raises(
        StudyConfigError, match="s1_n and s1_replicates must have the same length: got 4 and 3"
    ):
        st.config({"s1_n": [100, 200, 300, 400], "s1_replicates": [1, 1, 1]}, quick=True)
