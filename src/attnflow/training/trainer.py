"""One training run of a :class:`~attnflow.training.flow.TrainableFlow` with ``torch.optim.AdamW``.

:class:`Trainer` owns the flow, the readout (two-class task), the optimiser and the history: the loss
of every step, evaluations (train and test loss, accuracy) and snapshots of the empirical head law
:math:`\\Theta_t` (every layer's heads) at the recorded steps. Its whole state is one
:meth:`Trainer.state_dict`, so that a run resumed from a checkpoint continues bit for bit (the minibatch
of step k depends only on the seed and k). A non-finite loss raises :class:`NonFiniteLossError` with
the step and the last finite loss, before the optimiser touches the parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..random import path_generator
from .adjoint import ADJOINT_STATES, adjoint_flow
from .flow import TrainableFlow
from .losses import CLASS_LOSSES, MEASURE_LOSSES, logistic_loss, measure_loss
from .tasks import MeasureTask, TwoClassTask

__all__ = ["GRADIENTS", "NonFiniteLossError", "Trainer"]

#: how the gradient is computed: plain autograd through every step, or the adjoint recursion
GRADIENTS = ("autograd", "adjoint")


class NonFiniteLossError(FloatingPointError):
    """The training loss became nan or inf; ``step`` and ``last_finite_loss`` say where."""

    def __init__(self, step: int, loss: float, last_finite_loss: float | None):
        self.step, self.loss, self.last_finite_loss = step, loss, last_finite_loss
        last = "none (the first step)" if last_finite_loss is None else f"{last_finite_loss:.6g}"
        super().__init__(
            f"the training loss is not finite at step {step} (loss = {loss}); last finite loss: {last}. "
            "The parameters were not updated and the last checkpoint is kept; lower the learning rate "
            "(train.lr) or beta, or use more steps per layer"
        )


class Trainer:
    """AdamW training of a flow on a task.

    Parameters
    ----------
    flow : TrainableFlow
    task : MeasureTask or TwoClassTask
    loss : str
        A measure loss (``ssw``, ``w2``, ``mmd``) for a :class:`MeasureTask`, ``logistic`` for a
        :class:`TwoClassTask`.
    lr : float
        Learning rate > 0.
    weight_decay : float
        AdamW's decoupled weight decay >= 0.
    gradient : {"autograd", "adjoint"}
    adjoint_state : {"recomputed", "stored"}
    batch : int or None
        Paths per step (None: all).
    seed : int
        Seed of the minibatch draws.
    record_every : int
        Evaluate and snapshot the heads every this many steps (and at step 0).
    """

    def __init__(
        self,
        flow: TrainableFlow,
        task: MeasureTask | TwoClassTask,
        *,
        loss: str,
        lr: float,
        weight_decay: float = 0.0,
        gradient: str = "autograd",
        adjoint_state: str = "recomputed",
        batch: int | None = None,
        seed: int = 0,
        record_every: int = 10,
    ):
        if task.kind == "measure" and loss not in MEASURE_LOSSES:
            raise ValueError(
                f"the measure task takes a measure loss: got loss={loss!r}; valid: "
                f"{', '.join(MEASURE_LOSSES)}"
            )
        if task.kind == "two_class" and loss not in CLASS_LOSSES:
            raise ValueError(
                f"the two-class task takes loss {' or '.join(map(repr, CLASS_LOSSES))}: got loss={loss!r}"
            )
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (math.isfinite(lr) and lr > 0):
            raise ValueError(f"lr (the learning rate) must be a finite number > 0: got {lr!r}; try 1e-2")
        if gradient not in GRADIENTS:
            raise ValueError(f"unknown gradient method {gradient!r}; valid: {', '.join(GRADIENTS)}")
        if adjoint_state not in ADJOINT_STATES:
            raise ValueError(f"unknown adjoint state {adjoint_state!r}; valid: {', '.join(ADJOINT_STATES)}")
        if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 1:
            raise ValueError(f"record_every must be an integer >= 1: got {record_every!r}")
        paths = task.x0.shape[0]
        if batch is not None and (
            isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= paths
        ):
            raise ValueError(
                f"batch must be None or an integer in [1, {paths}] (the task's paths): got {batch!r}"
            )
        self.flow, self.task, self.loss_name = flow, task, loss
        self.gradient, self.adjoint_state, self.batch, self.seed = gradient, adjoint_state, batch, seed
        self.record_every = record_every
        self.readout = None
        params = list(flow.parameters())
        if task.kind == "two_class":
            # zero readout: logits 0 at step 0, no draw from the global torch RNG
            self.readout = torch.nn.Linear(flow.d, 1, dtype=flow.dtype)
            with torch.no_grad():
                self.readout.weight.zero_()
                self.readout.bias.zero_()
            params += list(self.readout.parameters())
        self.optimizer = torch.optim.AdamW(params, lr=float(lr), weight_decay=float(weight_decay))
        self.step_count = 0
        self.losses: list[float] = []
        self.evals: list[dict] = []
        self.snapshots: list[tuple[int, torch.Tensor, torch.Tensor]] = []

    # -- the loss ------------------------------------------------------------------------------------
    def _final(self, x0: torch.Tensor) -> torch.Tensor:
        if self.gradient == "adjoint":
            return adjoint_flow(self.flow, x0, state=self.adjoint_state)
        return self.flow(x0)

    def logits(self, xT: torch.Tensor) -> torch.Tensor:
        """Readout of the classification token (token 0) of final states (shape [P, n, d]) -> [P]."""
        return self.readout(xT[:, 0]).squeeze(-1)

    def loss_of(self, x0: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The loss of inputs x0 against targets (measure) or labels (two-class), with its graph."""
        xT = self._final(x0)
        if self.task.kind == "measure":
            return measure_loss(self.loss_name, xT, y)
        return logistic_loss(self.logits(xT), y)

    def batch_indices(self, step: int) -> torch.Tensor:
        """The paths of step ``step``: a seeded permutation's first ``batch`` entries (all when None)."""
        paths = self.task.x0.shape[0]
        if self.batch is None or self.batch == paths:
            return torch.arange(paths)
        return torch.randperm(paths, generator=path_generator(self.seed, step, "misc"))[: self.batch]

    def _targets(self, test: bool = False) -> torch.Tensor:
        if self.task.kind == "measure":
            return self.task.target_test if test else self.task.target
        return self.task.labels_test if test else self.task.labels

    # -- steps ---------------------------------------------------------------------------------------
    def train_step(self) -> float:
        """One AdamW step; returns the minibatch loss before the update.

        Raises
        ------
        NonFiniteLossError
            When the loss (or its gradient) is nan or inf; the parameters are left unchanged.
        """
        if self.step_count % self.record_every == 0:
            self.record()
        idx = self.batch_indices(self.step_count)
        self.optimizer.zero_grad(set_to_none=True)
        y = self._targets()
        loss = self.loss_of(self.task.x0[idx], y if self.task.kind == "measure" else y[idx])
        value = float(loss.detach())
        last = self.losses[-1] if self.losses else None
        if not math.isfinite(value):
            raise NonFiniteLossError(self.step_count, value, last)
        loss.backward()
        grads = [
            p.grad for group in self.optimizer.param_groups for p in group["params"] if p.grad is not None
        ]
        if not all(bool(torch.isfinite(g).all()) for g in grads):
            raise NonFiniteLossError(self.step_count, float("nan"), last)
        self.optimizer.step()
        self.losses.append(value)
        self.step_count += 1
        return value

    def train(self, steps: int, on_step: Callable[[Trainer], None] | None = None) -> None:
        """Run until ``steps`` steps are done in all (a resumed trainer continues), then record."""
        while self.step_count < steps:
            self.train_step()
            if on_step is not None:
                on_step(self)
        if not self.evals or self.evals[-1]["step"] != self.step_count:
            self.record()

    # -- evaluation and the head law -------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> dict:
        """Full training and test loss (and accuracy for the two-class task) at the current parameters."""
        out = {"step": self.step_count}
        for split, test in (("train", False), ("test", True)):
            x0 = self.task.x0_test if test else self.task.x0
            y = self._targets(test)
            xT = self.flow(x0)
            if self.task.kind == "measure":
                out[f"{split}_loss"] = float(measure_loss(self.loss_name, xT, y))
            else:
                logits = self.logits(xT)
                out[f"{split}_loss"] = float(logistic_loss(logits, y))
                out[f"{split}_accuracy"] = float(((logits > 0).to(y.dtype) == y).to(torch.float64).mean())
        return out

    def record(self) -> None:
        """Append an evaluation and a snapshot of every layer's heads (the empirical head law)."""
        self.evals.append(self.evaluate())
        D, V = self.flow.all_heads()
        self.snapshots.append((self.step_count, D, V))

    # -- checkpoints -----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resumed run needs: parameters, optimiser state, step and history."""
        return {
            "flow": self.flow.state_dict(),
            "readout": None if self.readout is None else self.readout.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step_count,
            "losses": torch.tensor(self.losses, dtype=torch.float64),
            "evals": [dict(e) for e in self.evals],
            "snapshot_steps": [s for s, _, _ in self.snapshots],
            "snapshot_D": [D for _, D, _ in self.snapshots],
            "snapshot_V": [V for _, _, V in self.snapshots],
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output."""
        self.flow.load_state_dict(state["flow"])
        if self.readout is not None:
            self.readout.load_state_dict(state["readout"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step_count = int(state["step"])
        self.losses = [float(v) for v in state["losses"]]
        self.evals = [dict(e) for e in state["evals"]]
        self.snapshots = list(
            zip(state["snapshot_steps"], state["snapshot_D"], state["snapshot_V"], strict=True)
        )

    def head_law(self) -> dict:
        """The recorded head law: ``steps`` (S,), ``D`` and ``V`` (S, L, H, d, d) as tensors."""
        return {
            "steps": torch.tensor([s for s, _, _ in self.snapshots]),
            "D": torch.stack([D for _, D, _ in self.snapshots]),
            "V": torch.stack([V for _, _, V in self.snapshots]),
        }
