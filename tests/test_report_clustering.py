"""``attnflow report`` plots a clustering measure (issue 31), also for a run recorded without the ledger
(whose page had no curve at all): the mean pairwise inner product over time, mean and band over paths,
equal to the measure computed here from the stored positions with NumPy alone."""

from __future__ import annotations

import json
import re

import numpy as np
import zarr
from experiments_helpers import tiny_with

from attnflow.experiments.store import run_experiment
from attnflow.report import write_report


def test_clustering_curve_with_the_ledger_off(tmp_path):
    out = tmp_path / "run"
    run_experiment(tiny_with(record__ledger=False), out)
    text = write_report(out).read_text()
    assert 'id="clustering"' in text and 'id="ledger"' not in text
    figs = json.loads(
        re.search(r'<script type="application/json" id="af-figures">(.*?)</script>', text, re.S)[1]
    )
    fig = figs["fig-clustering"]
    mean_trace = next(
        tr for tr in fig["data"] if tr.get("mode") == "lines" and "mean" in str(tr.get("name", ""))
    )
    # independent reference: the positions read with zarr, the mean inner product over distinct pairs by NumPy
    x = np.asarray(zarr.open_group(out / "data.zarr", mode="r")["positions"][...])  # (P, T, n, d)
    n = x.shape[2]
    gram = np.einsum("ptid,ptjd->ptij", x, x)
    rho = (gram.sum(axis=(-1, -2)) - np.trace(gram, axis1=-2, axis2=-1)) / (n * (n - 1))
    assert np.allclose(mean_trace["y"], rho.mean(axis=0), rtol=1e-5, atol=1e-9)  # the page keeps 6 digits
