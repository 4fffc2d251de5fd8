"""Issue 13, study 5 (``layer_scaling``): the weight budget M_theta(t) against closed forms, the quick study.

References: for frozen heads the budget has closed forms, without scaling M = mean|D|_F^2 t, with the
layer scaling c = 1/((t0 + t) sqrt H): M = mean|D|_F^2 (1/t0 - 1/(t0 + t)) / H (trapezoid error O(dt^2)).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from attnflow import TransformerModel
from attnflow.analysis.theorems import draw_heads, weight_budget
from attnflow.studies import StudyConfigError, get_study
from attnflow.studies.render import markdown, table_from_json


def test_weight_budget_of_frozen_heads_is_linear_in_depth():
    D = draw_heads("symmetric_gaussian", 1, 5, 3, seed=0)[0]
    t = np.linspace(0, 4, 41)
    b = weight_budget(np.broadcast_to(D, (41, 5, 3, 3)), t)
    ms = np.mean(np.sum(D**2, axis=(1, 2)))
    assert_allclose(b["M"], ms * t, rtol=1e-12, atol=1e-12)
    lam = np.linalg.norm(D, ord=2, axis=(1, 2))
    assert_allclose(b["R"][-1], 4 * np.mean((lam + lam**2) * np.exp(2 * lam)), rtol=1e-12)


def test_weight_budget_under_layer_scaling_saturates_in_closed_form():
    H, t0 = 4, 0.5
    D = draw_heads("ou_stationary", 1, H, 3, seed=1)[0]
    t = np.linspace(0, 10, 2001)
    model = TransformerModel(direction="ascent", layer_scaling=t0)
    b = weight_budget(np.broadcast_to(D, (t.size, H, 3, 3)), t, lambda s: model.head_scale(s, H))
    ms = np.mean(np.sum(D**2, axis=(1, 2)))
    exact = ms * (1 / t0 - 1 / (t0 + t)) / H
    assert_allclose(b["M"], exact, rtol=2e-4)  # trapezoid, dt = 5e-3, curvature 1/(t0+t)^4 at t0 = 0.5
    assert b["M"][-1] < ms / (t0 * H)  # bounded in depth


def test_weight_budget_refuses_bad_shapes():
    with pytest.raises(ValueError, match="K = len"):
        weight_budget(np.zeros((3, 2, 2, 2)), [0.0, 1.0])


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"H": [1, 2]}, "H: List should have at least 3 items"),
        ({"H": [1, 2, 2]}, "head counts must be distinct"),
        ({"t0": 0.0}, "t0: must be greater than 0; got 0.0"),
        ({"directions": []}, "directions: List should have at least 1 item"),
        ({"t1": 1.0, "dt": 0.3}, "whole number of steps"),
        ({"t1": 0.2, "dt": 0.05, "record_every": 2}, "at least 4 records"),
    ],
)
def test_layer_scaling_refuses_bad_parameters(params, match):
    with pytest.raises(StudyConfigError, match=match):
        get_study("layer_scaling").config(params, quick=True)


def test_layer_scaling_quick_study(quick_study):
    out, s = quick_study("layer_scaling")  # the session's quick run (tests/conftest.py)
    plain, scaled = s["variants"]["ascent_plain"], s["variants"]["ascent_scaled"]
    for H in ("1", "2", "4"):
        # same seed, same heads: the scaled budget is the plain one weighted by c^2 <= 1/H
        assert scaled["per_H"][H]["M_T"]["mean"] < plain["per_H"][H]["M_T"]["mean"] / int(H) + 1e-12
        assert scaled["per_H"][H]["depth_exponent"]["mean"] < plain["per_H"][H]["depth_exponent"]["mean"]
        assert len(plain["per_H"][H]["sensitivity_mean_counts"]) == 30
    assert scaled["fit_M_T_vs_H"]["b"] < -0.5 < plain["fit_M_T_vs_H"]["b"]
    assert not math.isnan(plain["per_H"]["1"]["mean_inner_product_T"]["mean"])
    # table.md is the one renderer's Markdown of the Table specs kept in tables.json
    specs = json.loads((out / "tables.json").read_text())["tables"]
    assert [t["id"] for t in specs] == ["per_H", "fit_in_H", "verdicts"]
    assert markdown([table_from_json(t) for t in specs]) == (out / "table.md").read_text()
    assert specs[0]["rows"][0]["M_T"] == plain["per_H"]["1"]["M_T"]["mean"]
