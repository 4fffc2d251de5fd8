"""Observables that fit their ecosystem (issue 31): clustering measures take what ``simulate`` returns
(xarray Dataset / DataArray, NumPy, torch) and return labelled results over time; a time to one cluster for
particle runs; the transport distances against POT's own conventions (emd2 = squared cost; the spherical
sliced distance on circles of circumference 1)."""

from __future__ import annotations

import math

import numpy as np
import ot
import pytest
import torch
import xarray as xr

from attnflow.observables import (
    cluster_count,
    gram_effective_rank,
    mean_pairwise_inner_product,
    mean_token_norm,
    min_pairwise_inner_product,
    sliced_wasserstein_sphere,
    sliced_wasserstein_sphere_radians,
    time_to_one_cluster,
    wasserstein2,
    wasserstein2_distance,
    wasserstein2_squared,
)
from attnflow.observables.transport import _stiefel_projections


def _cloud(P, n, d, seed):
    g = np.random.default_rng(seed)
    x = g.normal(size=(P, n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _run(P=2, T=4, n=6, d=3, seed=0):
    """A run-shaped Dataset: the clouds contract towards one point as time goes on."""
    x = _cloud(P, n, d, seed)
    pole = np.zeros(d)
    pole[0] = 1.0
    frames = []
    for k in range(T):
        y = (1 - k / (T - 1)) * x + (k / (T - 1)) * pole
        frames.append(y / np.linalg.norm(y, axis=-1, keepdims=True))
    pos = np.stack(frames, 1)  # (P, T, n, d)
    times = [0.0, 0.5, 1.0, 1.5][:T]
    return xr.Dataset(
        {"positions": (("path", "time", "token", "dim"), pos)},
        coords={"path": np.arange(P), "time": times, "step": ("time", np.arange(T) * 50)},
    )


@pytest.mark.parametrize(
    "fn", [mean_pairwise_inner_product, mean_token_norm, min_pairwise_inner_product, gram_effective_rank]
)
def test_measures_take_a_run_and_label_it_over_time(fn):
    ds = _run()
    out = fn(ds)
    assert isinstance(out, xr.DataArray) and out.dims == ("path", "time")
    assert out.time.values.tolist() == ds.time.values.tolist() and "step" in out.coords
    # each entry equals the torch function on that cloud (an independent per-time loop)
    for p in range(2):
        for k, t in enumerate(ds.time.values):
            ref = fn(torch.as_tensor(ds.positions.values[p, k])).item()
            assert out.sel(path=p, time=t).item() == pytest.approx(ref, rel=1e-12, abs=1e-12)
    # the DataArray and a NumPy array give the same numbers
    assert np.allclose(fn(ds.positions).values, out.values)
    np_out = fn(ds.positions.values[:, 0])
    assert torch.allclose(np_out, torch.as_tensor(out.values[:, 0]))


def test_cluster_count_over_time_and_time_to_one_cluster():
    ds = _run()
    counts = cluster_count(ds, 0.3)
    assert counts.dims == ("path", "time") and counts.isel(time=-1).values.tolist() == [1, 1]
    first = time_to_one_cluster(ds, 0.3)
    # independent reference: scan the counts of each path for the first 1
    ref = [float(ds.time.values[np.argmax(counts.values[p] == 1)]) for p in range(2)]
    assert first.values.tolist() == ref and first.dims == ("path",)
    # never one cluster within the run: NaN
    assert np.isnan(time_to_one_cluster(ds.isel(time=[0]), 1e-6).values).all()


def test_refusals_name_the_rule():
    ds = _run()
    with pytest.raises(ValueError, match="without a 'positions' variable"):
        mean_token_norm(ds.rename({"positions": "x"}))
    with pytest.raises(ValueError, match=r"dims \(..., 'token', 'dim'\)"):
        mean_token_norm(ds.positions.transpose("path", "time", "dim", "token"))
    with pytest.raises(ValueError, match="must have a 'time' dim"):
        time_to_one_cluster(ds.positions.isel(time=0), 0.3)


def test_wasserstein_conventions_against_pot():
    x = torch.as_tensor(_cloud(1, 7, 3, 1)[0])
    y = torch.as_tensor(_cloud(1, 5, 3, 2)[0])
    # POT's emd2 with the squared chordal cost, computed here from scratch
    M = ot.dist(x.numpy(), y.numpy())  # squared Euclidean distances
    pot = ot.emd2(np.full(7, 1 / 7), np.full(5, 1 / 5), M)
    assert wasserstein2_squared(x, y, cost="chordal").item() == pytest.approx(pot, rel=1e-10)
    assert wasserstein2_distance(x, y, cost="chordal").item() == pytest.approx(math.sqrt(pot), rel=1e-10)
    assert wasserstein2(x, y, cost="chordal").item() == pytest.approx(math.sqrt(pot), rel=1e-10)


def test_sliced_sphere_convention_against_pot():
    x = torch.as_tensor(_cloud(1, 20, 3, 3)[0])
    y = torch.as_tensor(_cloud(1, 20, 3, 4)[0])
    frames = _stiefel_projections(3, 50, 0, x).numpy()
    pot = ot.sliced_wasserstein_sphere(x.numpy(), y.numpy(), n_projections=50, projections=frames, p=2)
    ours = sliced_wasserstein_sphere_radians(x, y, n_projections=50, seed=0).item()
    assert ours == pytest.approx(2 * math.pi * pot, rel=1e-12)  # radians = 2 pi x POT's unit
    assert sliced_wasserstein_sphere(x, y, n_projections=50, seed=0).item() == ours
