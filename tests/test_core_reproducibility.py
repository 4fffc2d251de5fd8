"""Determinism and resumability (torchsde practice: bitwise equality for a fixed seed).

* same seed -> bitwise-identical datasets; different seeds -> different noise;
* per-path streams: a path's trajectory does not depend on how many paths run beside it, nor on
  how paths are split (``first_path``);
* ``Simulator.state_dict`` / ``load_state_dict`` (also through ``torch.save``) resumes bit for bit.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

import attnflow as af
from attnflow.simulation import SCALARS, Record

BITWISE = {"rtol": 0, "atol": 0}


def _model(backend: str = "torch", **kw) -> af.TransformerModel:
    return af.TransformerModel(direction="descent", weights=af.OrnsteinUhlenbeck(), backend=backend, **kw)


def _init(P: int = 3, seed: int = 0):
    return af.tokens.octahedral(P, 8, 3, seed=seed), af.heads.symmetric_gaussian(P, 2, 3, seed=seed)


def _assert_same(a, b) -> None:
    for k in ("positions", "heads", *SCALARS):
        if k in a:
            assert_allclose(a[k].values, b[k].values, **BITWISE, err_msg=k)


@pytest.mark.parametrize("backend", ["torch", "auto"])
@pytest.mark.parametrize("integrator", ["euler", "heun"])
def test_same_seed_is_bitwise_identical(integrator: str, backend: str) -> None:
    x0, D0 = _init()
    kw = {"t1": 0.2, "dt": 0.02, "integrator": integrator, "seed": 5, "record_heads": True}
    a = af.simulate(_model(backend), x0, D0, **kw)
    b = af.simulate(_model(backend), x0, D0, **kw)
    _assert_same(a, b)


def test_different_seeds_differ() -> None:
    x0, D0 = _init()
    a = af.simulate(_model(), x0, D0, t1=0.2, dt=0.02, seed=5, record_heads=True)
    b = af.simulate(_model(), x0, D0, t1=0.2, dt=0.02, seed=6, record_heads=True)
    assert_allclose(a.positions.values[:, 0], b.positions.values[:, 0], **BITWISE)  # same start
    assert np.abs(a.heads.values[:, -1] - b.heads.values[:, -1]).min() > 1e-6  # every entry differs
    assert np.abs(a.positions.values[:, -1] - b.positions.values[:, -1]).max() > 1e-4


def test_initial_generators_are_seeded_per_purpose_and_path() -> None:
    a, b = af.tokens.uniform(3, 5, 3, seed=1), af.tokens.uniform(3, 5, 3, seed=1)
    assert_allclose(a.numpy(), b.numpy(), **BITWISE)
    assert np.abs(a.numpy() - af.tokens.uniform(3, 5, 3, seed=2).numpy()).min() > 0
    # path p's initial state does not depend on the number of paths drawn
    assert_allclose(
        af.tokens.octahedral(5, 7, 3, seed=3)[:2].numpy(),
        af.tokens.octahedral(2, 7, 3, seed=3).numpy(),
        **BITWISE,
    )
    assert_allclose(
        af.heads.symmetric_gaussian(4, 2, 3, seed=3)[:1].numpy(),
        af.heads.symmetric_gaussian(1, 2, 3, seed=3).numpy(),
        **BITWISE,
    )
    assert_allclose(
        af.tokens.von_mises_fisher(3, 6, 3, seed=3)[:1].numpy(),
        af.tokens.von_mises_fisher(1, 6, 3, seed=3).numpy(),
        **BITWISE,
    )
    assert_allclose(
        np.linalg.norm(af.tokens.von_mises_fisher(3, 6, 4, seed=3).numpy(), axis=-1), 1.0, atol=1e-15
    )


@pytest.mark.parametrize("backend", ["torch", "auto"])
def test_path_trajectory_independent_of_number_of_paths(backend: str) -> None:
    x0, D0 = _init(P=4)
    kw = {"t1": 0.2, "dt": 0.02, "seed": 7, "record_heads": True}
    many = af.simulate(_model(backend), x0, D0, **kw)
    one = af.simulate(_model(backend), x0[:1], D0[:1], **kw)
    # Bitwise: path 0 sees the same noise stream and the same per-path arithmetic.
    for k in ("positions", "heads", *SCALARS):
        assert_allclose(one[k].values[0], many[k].values[0], **BITWISE, err_msg=k)
    # A batch split across workers keeps its streams: paths 2..3 run alone with first_path = 2.
    sim = af.Simulator(_model(backend), x0[2:], D0[2:], dt=0.02, seed=7, first_path=2)
    recs: list[Record] = []
    sim.run(10, on_record=recs.append, with_heads=True)
    assert_allclose(recs[-1].x.numpy(), many.positions.values[2:, -1], **BITWISE)
    assert_allclose(recs[-1].D.numpy(), many.heads.values[2:, -1], **BITWISE)
    for k in SCALARS:
        assert_allclose(recs[-1].scalars[k].numpy(), many[k].values[2:, -1], **BITWISE, err_msg=k)


@pytest.mark.parametrize("backend", ["torch", "auto"])
@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("through_file", [False, True])
def test_resume_from_state_dict_is_bitwise_identical(
    integrator: str, backend: str, through_file: bool
) -> None:
    x0, D0 = _init()
    model = _model(backend, layer_scaling=None)
    kw = {"dt": 0.02, "seed": 11, "integrator": integrator}

    ref = af.Simulator(model, x0, D0, **kw)
    ref_recs: list[Record] = [ref.record(with_heads=True)]
    ref.run(12, record_every=4, on_record=ref_recs.append, with_heads=True)

    first = af.Simulator(model, x0, D0, **kw)
    recs: list[Record] = [first.record(with_heads=True)]
    first.run(5, record_every=4, on_record=recs.append, with_heads=True)
    sd = first.state_dict()
    if through_file:
        buf = io.BytesIO()
        torch.save(sd, buf)
        buf.seek(0)
        sd = torch.load(buf, weights_only=False)
    del first
    # a fresh simulator (different initial state even) continues from the checkpoint
    x_other, D_other = _init(seed=1)
    second = af.Simulator(model, x_other, D_other, **kw)
    second.load_state_dict(sd)
    second.run(7, record_every=4, on_record=recs.append, with_heads=True)

    assert [r.step for r in recs] == [r.step for r in ref_recs] == [0, 4, 8, 12]
    for a, b in zip(recs, ref_recs, strict=True):
        assert a.time == b.time
        assert_allclose(a.x.numpy(), b.x.numpy(), **BITWISE)
        assert_allclose(a.D.numpy(), b.D.numpy(), **BITWISE)
        for k in SCALARS:
            assert_allclose(a.scalars[k].numpy(), b.scalars[k].numpy(), **BITWISE, err_msg=k)


def test_time_is_not_accumulated_by_repeated_addition() -> None:
    # t_k = t0 + k dt exactly (no drift of the clock over many steps).
    x0, D0 = _init(P=1)
    sim = af.Simulator(
        af.TransformerModel(direction="ascent", backend="torch"), x0, D0, dt=0.1, t0=0.3, ledger=False
    )
    sim.run(30)
    assert sim.t == 0.3 + 30 * 0.1
    assert sim.step_index == 30
