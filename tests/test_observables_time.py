"""Exact time coordinates (issue 31): a run's times are the decimals t0 + k dt, so ``ds.sel(time=9.2)`` finds
the step (0.2 stored 920 * 0.01 = 9.200000000000001)."""

from __future__ import annotations

import numpy as np
import pytest

import attnflow as af
from attnflow.integrators.base import grid_times


def test_grid_times_are_the_decimals():
    steps = np.arange(0, 2001)
    raw = 0.0 + steps * 0.01  # the clock as the simulator computes it
    assert (raw != np.round(raw, 2)).any()  # premise: floats miss decimals (9.200000000000001)
    exact = grid_times(raw, steps, 0.0, 0.01)
    assert [float(f"{k / 100:.2f}") for k in steps] == exact.tolist()
    # t0 and dt with their own decimals; a time off the grid (adaptive steps) is kept as it is
    assert grid_times([0.5 + 3 * 0.1, 0.123456789], [3, 7], 0.5, 0.1).tolist() == [0.8, 0.123456789]


def test_simulate_time_coordinate_selects_by_decimal():
    model = af.TransformerModel(direction="descent", attention="softmax", beta=1.0, weights=af.Constant())
    x0 = af.tokens.uniform(paths=1, n=4, d=3, seed=0)
    D0 = af.heads.identity(paths=1, heads=1, d=3)
    ds = af.simulate(model, x0, D0, t1=9.4, dt=0.01, seed=0, record_every=10, ledger=False)
    assert ds.sel(time=9.2).step.item() == 920
    assert ds.time.values.tolist() == [round(k * 0.1, 1) for k in range(95)]
    with pytest.raises(KeyError):
        ds.sel(time=9.205)
