"""Arm a kill at a chosen step of a PDE or a training run (for ``tests/test_store_kinds.py``).

``arm(kind, kill_at, action)`` patches the run's step so that ``action()`` is called at step ``kill_at``:
in a child process ``action`` sends SIGKILL to itself (nothing of the run's own code runs after it); in the
test process it copies the run directory as it stands (exactly what a SIGKILL at that moment leaves on
disk: every write of the store is synchronous and atomic) and stops the run. ``python
tests/store_kill_helpers.py KIND CONFIG_JSON OUT KILL_AT`` is the child.
"""

from __future__ import annotations

import json
import os
import signal
import sys


def arm(kind: str, kill_at: int, action) -> None:
    """Patch the step of ``kind`` (``pde``: during step ``kill_at``; ``training``: after step ``kill_at``,
    before its checkpoint) to call ``action()``."""
    if kind == "pde":
        from attnflow.pde import DensitySolver

        real = DensitySolver.step

        def step(self):
            if self.step_index + 1 == kill_at:
                action()
            real(self)

        DensitySolver.step = step
    else:
        from attnflow.training.trainer import Trainer

        real_train = Trainer.train

        def train(self, n, on_step=None):
            def hook(tr):
                if tr.step_count == kill_at:
                    action()
                on_step(tr)

            real_train(self, n, hook)

        Trainer.train = train


def run(kind: str, config: dict, out: str):
    if kind == "pde":
        from attnflow.experiments.pde_runs import run_pde

        return run_pde(config, out)
    from attnflow.experiments.training_run import run_training

    return run_training(config, out)


if __name__ == "__main__":
    kind, config, out, kill_at = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    arm(kind, kill_at, lambda: os.kill(os.getpid(), signal.SIGKILL))
    run(kind, config, out)
