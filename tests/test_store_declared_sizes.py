"""Particle runs: a received store's declared sizes are checked against the config before anything is
read (issue 30: the one rule of PDE and training runs, ``attnflow.experiments.rundir.check_store_dims``)."""

from __future__ import annotations

import json

import pytest
from experiments_helpers import TINY

from attnflow.experiments import run_experiment
from attnflow.experiments.rundir import CorruptRunError, check_store_dims
from attnflow.experiments.schema import load_config
from attnflow.experiments.store import particle_store_sizes, verify_run


def _declare(out, array, axis, length):
    """Rewrite the shape an array's .zarray declares (a crafted store: the chunks stay as they are)."""
    meta = out / "data.zarr" / array / ".zarray"
    z = json.loads(meta.read_text())
    z["shape"][axis] = length
    meta.write_text(json.dumps(z))


def test_particle_store_sizes_are_the_written_sizes(tmp_path):
    out = tmp_path / "run"
    ds = run_experiment(TINY, out)
    sizes = particle_store_sizes(load_config(out / "config.yaml"))
    assert sizes == {"time": 5, "path": 2, "token": 8, "dim": 3, "head": 2, "row": 3, "col": 3}
    assert {k: v for k, v in ds.sizes.items()} == {k: sizes[k] for k in ds.sizes}
    check_store_dims(out / "data.zarr", sizes, "fix")  # the store a run writes passes its own check


def test_a_finished_run_declaring_other_sizes_is_refused_before_reading(tmp_path):
    out = tmp_path / "run"
    run_experiment(TINY, out)
    _declare(out, "positions", 2, 10**9)  # a billion tokens declared over the chunks of eight
    with pytest.raises(
        CorruptRunError, match=r"'positions' declares token = 1000000000, but the config gives 8 "
    ):
        run_experiment(TINY, out)  # the run is "done": verified before it is returned
    with pytest.raises(CorruptRunError, match=r"declares token = 1000000000, .*refused before reading it"):
        verify_run(out)  # the sizes from the config alone


def test_a_resumed_run_declaring_more_records_is_refused_before_the_checkpoint_is_used(tmp_path):
    out = tmp_path / "run"
    run_experiment(TINY, out)
    meta = json.loads((out / "meta.json").read_text())
    (out / "meta.json").write_text(json.dumps({**meta, "status": "interrupted"}))  # resumed, not trusted
    _declare(out, "energy", 1, 10**8)
    with pytest.raises(
        CorruptRunError,
        match=r"'energy' declares time = 100000000, but the config gives at most 5 .*resume=False",
    ):
        run_experiment(TINY, out)
    # shorter along time passes the size rule (a run being written); here the checkpoint claims 5 records,
    # so the next rule (the store covers the checkpoint) refuses it
    _declare(out, "energy", 1, 3)
    with pytest.raises(CorruptRunError, match=r"holds 3 records in 'energy' but the checkpoint covers 5"):
        run_experiment(TINY, out)
