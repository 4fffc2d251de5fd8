"""No code from data: a crafted pickle in a received run directory is refused, for every kind of run.

Each test runs a tiny run, marks it interrupted, plants a checkpoint whose unpickling would create a
marker file, and resumes: the resume must fail with one line naming the checkpoint, and the marker must
not exist (nothing was unpickled). On the base commit the PDE run executed the payload
(``torch.load(weights_only=False)``) and the particle run's refusal was a multi-line torch message.
"""

from __future__ import annotations

import pytest
from security_helpers import TINY_PDE, TINY_RUN, TINY_TRAINING, cfg, set_status, write_evil_checkpoints

from attnflow.experiments.files import CorruptFileError
from attnflow.experiments.pde_runs import run_pde
from attnflow.experiments.store import run_experiment
from attnflow.experiments.training_run import run_training


def _particle(out):
    run_experiment(cfg(TINY_RUN), out)


def _pde(out):
    run_pde(cfg(TINY_PDE), out)


def _training(out):
    run_training(cfg(TINY_TRAINING), out)


KINDS = {"particle": _particle, "pde": _pde, "training": _training}


@pytest.mark.parametrize("style", ["legacy", "zip"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_crafted_pickle_checkpoint_is_refused_and_runs_nothing(tmp_path, kind, style):
    out, marker = tmp_path / "run", tmp_path / "PWNED"
    KINDS[kind](out)
    set_status(out, "interrupted")
    write_evil_checkpoints(out / "checkpoint.pt", marker, style)
    with pytest.raises(CorruptFileError) as info:
        KINDS[kind](out)
    msg = str(info.value)
    assert not marker.exists(), "the checkpoint's pickle was executed"
    assert "\n" not in msg and len(msg) < 2000, msg  # one line
    assert "checkpoint.pt" in msg and ("start afresh" in msg)
    assert "holds objects other than tensors" in msg or "does not fit" in msg or "not a" in msg


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_checkpoint_written_loads_with_weights_only(tmp_path, kind, monkeypatch):
    """Whatever a run writes as its checkpoint loads with ``weights_only=True`` (tensors only)."""
    import torch

    from attnflow.experiments import rundir

    saved = []
    real = rundir.save_checkpoint

    def spy(path, state):
        real(path, state)
        saved.append(path)
        torch.load(path, weights_only=True)  # raises if anything but tensors and plain data was written

    monkeypatch.setattr(rundir, "save_checkpoint", spy)
    for mod in ("store", "pde_runs", "training_run"):
        monkeypatch.setattr(f"attnflow.experiments.{mod}.save_checkpoint", spy)
    KINDS[kind](tmp_path / "run")
    assert saved, "no checkpoint was written"
