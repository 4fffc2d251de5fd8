"""Numbers that leave float64 are reported at the step they leave it, naming the quantity and why.

The issue's case: beta = 200, three Gaussian heads (|D| ~ 3), n = 700 tokens: the energy is inf and
Ghat^2 nan while the velocity is fine. On the base commit the warning (at record times only) named the
energy alone; now the first step's evaluation says which ledger quantities left float64 (energy, Ghat2,
...), the largest row log-sum-exp (> 709.78) and that the velocity is finite.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import attnflow as af
from attnflow.dynamics.assembly import FieldEval

LOG_FLOAT64_MAX = math.log(np.finfo(np.float64).max)  # 709.78

CASE = {
    "name": "overflow",
    "model": {"direction": "ascent", "beta": 200.0, "backend": "torch"},
    "weights": {"process": "constant"},
    "tokens": {"init": "uniform", "n": 700, "d": 3},
    "heads": {"init": "gaussian", "H": 3, "scale": 3.0},
    "integrator": {"dt": 1e-4, "t1": 3e-4},
    "record": {"every": 1},
    "paths": 1,
}


def test_the_issue_case_is_reported_at_its_first_step(tmp_path):
    from attnflow.experiments.store import run_experiment

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = run_experiment(CASE, tmp_path / "run")
    msgs = [str(w.message) for w in caught if "left float64" in str(w.message)]
    assert len(msgs) == 1, msgs  # once, at the step it happens
    msg = msgs[0]
    assert "at t = 0:" in msg  # the initial state is recorded (and checked) before the first step
    assert "energy" in msg and "Ghat2" in msg and "709.78 = log(max float64)" in msg
    assert "velocity (finite)" in msg
    lse = float(msg.split("is ")[1].split(" >")[0])
    assert lse > LOG_FLOAT64_MAX
    assert np.isinf(ds["energy"].values).all()
    assert np.isfinite(ds["positions"].values).all()


def test_ledger_overflow_says_nothing_for_a_finite_evaluation_and_names_each_quantity():
    from attnflow.dynamics.assembly import ledger_overflow

    fe = FieldEval(velocity=torch.zeros(1, 2, 3), lse=torch.tensor([[[1.0, 2.0]]], dtype=torch.float64))
    fe.energy, fe.G2, fe.Ghat2 = torch.ones(1), torch.ones(1), torch.ones(1)
    assert ledger_overflow(fe) is None
    fe.lse = torch.tensor([[[800.0, 2.0]]], dtype=torch.float64)
    fe.energy, fe.Ghat2 = torch.tensor([math.inf]), torch.tensor([math.nan])
    msg = ledger_overflow(fe)
    assert msg.startswith("energy, Ghat2 left the float64 range") and "is 800 > 709.78" in msg
    fe.G2 = torch.tensor([math.inf])
    assert ledger_overflow(fe).startswith("energy, G2, Ghat2 left")


def test_the_step_check_names_the_step_between_records():
    from attnflow.simulation.ledger import EnergyLedger

    led = EnergyLedger(1, 1.0, 200.0, torch.device("cpu"))
    fe = FieldEval(velocity=torch.zeros(1, 2, 3), lse=torch.tensor([[[750.0, 2.0]]], dtype=torch.float64))
    fe.energy, fe.G2, fe.Ghat2 = torch.tensor([math.inf]), torch.ones(1), torch.tensor([math.nan])
    z = torch.zeros(1, dtype=torch.float64)
    with pytest.warns(
        RuntimeWarning, match=r"left float64 at t = 0.25 \(the evaluation of step 6\): energy, Ghat2"
    ):
        led.add_step(fe, (z, z), z, 0.05, t=0.25, step=5)


@pytest.mark.parametrize("beta", [1.0, 5.0])
def test_ordinary_runs_do_not_warn(beta):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any RuntimeWarning fails the test
        af.simulate(
            af.TransformerModel(direction="ascent", beta=beta),
            af.tokens.uniform(1, 20, 3, seed=0),
            af.heads.gaussian(1, 3, 3, seed=0),
            t1=0.01,
            dt=0.005,
        )
