"""Training runs as experiments: a locked run directory, checkpoints, bit-for-bit resume, figures.

``run_training(config, out_dir)`` trains a :class:`~attnflow.training.TrainableFlow` with AdamW on the
config's task. The directory holds

* ``config.yaml``, ``meta.json`` (status ``running`` / ``done`` / ``diverged``, step, the flow's attributes,
  among them ``backend: torch`` and ``grad: true``), ``.attnflow`` (the marker) and the lock file;
* ``checkpoint.pt``: parameters, AdamW state, step and history (:meth:`Trainer.state_dict`), written
  atomically every ``train.checkpoint_every`` steps (data first, then ``os.replace``);
* ``history.json`` (losses and evaluations), and when done ``summary.json``, ``head_law.npz`` (every
  layer's heads at every recorded step), ``clouds.npz`` (test clouds before and after training, targets)
  and ``landscape.npz`` (the risk's first variation on a plane of parameter space, projected Euler only);
* ``figures/``: written by the figure function the caller injects (the CLI passes
  :func:`attnflow.plot.training.training_figures`; this layer never imports plot).

Rerunning on the same directory resumes from the checkpoint (a finished run is returned as is); a
different config is refused. A non-finite loss stops the run: ``meta.json`` says ``diverged`` with the
step and the last finite loss, the last checkpoint is kept, and :class:`NonFiniteLossError` is raised.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ..model.transformer import TransformerModel
from ..training.flow import TrainableFlow
from ..training.losses import logistic_loss, measure_loss
from ..training.meanfield import risk_landscape
from ..training.tasks import MeasureTask, TwoClassTask
from ..training.trainer import NonFiniteLossError, Trainer
from .files import atomic_write_text, inside, read_json
from .progress import ProgressBar
from .resources import check_resources, training_cost
from .rundir import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    META_FILE,
    CorruptRunError,
    checkpoint_bound,
    failure_fields,
    read_meta,
    restore_checkpoint,
    resume_hint,
    run_session,
    save_checkpoint,
    stored_config_diff,
    update_meta,
)
from .training_config import TrainingConfig, dump_training_config, load_training_config

__all__ = ["build_trainer", "read_training_run", "run_training"]

CHECKPOINT = CHECKPOINT_FILE
CONFIG = CONFIG_FILE
META = META_FILE
FORMAT = 1
#: The files and folders of a training run directory: the only ones attnflow clears in it.
TRAINING_RUN_FILES = (
    CONFIG,
    META,
    CHECKPOINT,
    "history.json",
    "summary.json",
    "head_law.npz",
    "clouds.npz",
    "landscape.npz",
    "figures",
)


def build_trainer(config: TrainingConfig | dict | str | Path) -> Trainer:
    """The trainer (flow, task, AdamW) a training config describes, at step 0."""
    cfg = load_training_config(config)
    m = cfg.model
    model = TransformerModel(
        direction=m.direction,
        attention=m.attention,
        beta=m.beta,
        geometry=m.geometry,
        causal=m.causal,
        layer_scaling=m.layer_scaling,
        sinkhorn_iters=m.sinkhorn_iters,
        backend=m.backend,
    )
    f = cfg.flow
    flow = TrainableFlow(
        model,
        d=f.d,
        layers=f.layers,
        heads=f.heads,
        t1=f.t1,
        steps_per_layer=f.steps_per_layer,
        param=f.param,
        head_dim=f.head_dim,
        integrator=f.integrator,
        init_scale=f.init_scale,
        seed=cfg.seed,
    )
    t = cfg.task
    if t.kind == "measure":
        task = MeasureTask.make(
            paths=t.paths,
            n=t.n,
            d=f.d,
            clusters=t.clusters,
            kappa=t.kappa,
            target_factor=t.target_factor,
            seed=cfg.seed,
        )
    else:
        task = TwoClassTask.make(paths=t.paths, n=t.n, d=f.d, angle=t.angle, spread=t.spread, seed=cfg.seed)
    tr = cfg.train
    return Trainer(
        flow,
        task,
        loss=t.loss,
        lr=tr.lr,
        weight_decay=tr.weight_decay,
        gradient=tr.gradient,
        adjoint_state=tr.adjoint_state,
        batch=tr.batch,
        seed=cfg.seed,
        record_every=tr.record_every,
    )


def _write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, allow_nan=True) + "\n")


def _save_checkpoint(out: Path, trainer: Trainer) -> None:
    save_checkpoint(out / CHECKPOINT, {"format": FORMAT, "trainer": trainer.state_dict()})
    _write_json(out / "history.json", {"losses": trainer.losses, "evals": trainer.evals})


def _load_checkpoint(out: Path, trainer: Trainer, max_bytes: int) -> None:
    """Restore ``trainer`` from ``checkpoint.pt`` (the store's one reader,
    :func:`~attnflow.experiments.rundir.restore_checkpoint`: tensors only, bounded, no link)."""
    restore_checkpoint(
        out / CHECKPOINT,
        fmt=FORMAT,
        restore=lambda state: trainer.load_state_dict(state["trainer"]),
        fix="delete the run directory (or choose another --out) to start afresh",
        max_bytes=max_bytes,
        what="training checkpoint",
    )


def _compare(cfg: TrainingConfig):
    """The differing keys of a stored training config and ``cfg`` (for
    :func:`~attnflow.experiments.rundir.stored_config_diff`)."""

    def compare(old: TrainingConfig) -> list:
        if old == cfg:
            return []
        a, b = old.model_dump(), cfg.model_dump()
        keys = [
            f"{s}.{k}"
            for s in a
            for k in (a[s] if isinstance(a[s], dict) else {})
            if a[s][k] != (b[s].get(k) if isinstance(b[s], dict) else None)
        ]
        keys += [s for s in a if not isinstance(a[s], dict) and a[s] != b[s]]
        return keys or ["task"]

    return compare


def _final_outputs(out: Path, trainer: Trainer, cfg: TrainingConfig, wall_s: float) -> dict:
    law = trainer.head_law()
    np.savez(out / "head_law.npz", steps=law["steps"].numpy(), D=law["D"].numpy(), V=law["V"].numpy())
    task, flow = trainer.task, trainer.flow
    show = min(4, task.x0_test.shape[0])
    x0 = task.x0_test[:show]
    with torch.no_grad():
        x_final = flow(x0)
        x_init = _flow_with_heads(flow, law["D"][0], law["V"][0], x0)
    clouds = {"x0": x0.numpy(), "x_init": x_init.numpy(), "x_final": x_final.numpy()}
    if task.kind == "measure":
        clouds["target"] = task.target_test[0].numpy()
    else:
        clouds["labels"] = task.labels_test[:show].numpy()
    np.savez(out / "clouds.npz", **clouds)
    landscape_note = None
    if flow.integrator.name == "euler" and flow.model.layer_scaling is None:
        y = task.target if task.kind == "measure" else task.labels

        def risk(xT):
            if task.kind == "measure":
                return measure_loss(trainer.loss_name, xT, y)
            return logistic_loss(trainer.logits(xT), y)

        sub = slice(0, min(8, task.x0.shape[0]))  # a few paths suffice for the picture
        y = y if task.kind == "measure" else y[sub]
        arrays = {}
        for layer in range(flow.layers):
            r = risk_landscape(flow, task.x0[sub], risk, layer)
            arrays[f"grid_{layer}"] = r["grid"].numpy()
            arrays[f"psi_{layer}"] = r["psi"].numpy()
            arrays[f"heads_{layer}"] = r["heads"].numpy()
            arrays[f"force_{layer}"] = r["force"].numpy()
        np.savez(out / "landscape.npz", directions=np.array(r["directions"]), **arrays)
    else:
        landscape_note = "no risk landscape: it is written for projected Euler without layer scaling"
    summary = {
        "name": cfg.name,
        "steps": trainer.step_count,
        "initial": trainer.evals[0],
        "final": trainer.evals[-1],
        "final_batch_loss": trainer.losses[-1] if trainer.losses else None,
        "wall_s_this_process": round(wall_s, 3),
        "attrs": {**flow.attrs(), "gradient": trainer.gradient, "adjoint_state": trainer.adjoint_state},
        "landscape": landscape_note,
    }
    _write_json(out / "summary.json", summary)
    return summary


def _flow_with_heads(flow: TrainableFlow, D: torch.Tensor, V: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
    """Final tokens of ``flow``'s steps run with recorded heads D, V of shape (L, H, d, d)."""
    x = x0
    m = flow.steps_per_layer
    for layer in range(flow.layers):
        for j in range(m):
            x = flow.step(x, D[layer], V[layer], layer * m + j)
    return x


def run_training(
    config: TrainingConfig | dict | str | Path,
    out_dir: str | Path,
    *,
    progress: bool = False,
    figures: Callable[[Path], list[str]] | None = None,
) -> dict:
    """Train into ``out_dir``, resuming an interrupted run of the same config; returns the summary.

    Parameters
    ----------
    config : TrainingConfig, dict or path of a YAML file
    out_dir : path
        Created if needed; locked while the run writes it.
    progress : bool
        Draw a progress bar on stderr (when it is a terminal).
    figures : callable or None
        ``figures(out_dir) -> [file names]``, called once the run is done (the CLI injects
        :func:`attnflow.plot.training.training_figures`).

    Raises
    ------
    NonFiniteLossError
        The loss became nan or inf (``meta.json``: ``status: diverged``, the step, the last finite loss).
    RunConfigMismatchError
        ``out_dir`` holds a run of another config.
    """
    cfg = load_training_config(config)
    check_resources(
        training_cost(cfg),
        allow_large=cfg.allow_large,
        name=cfg.name,
        fix="task.n, train.batch, flow.heads or flow.layers x flow.steps_per_layer",
    )  # before anything is allocated or created
    out = Path(out_dir)
    with run_session(
        out,
        kind="training run",
        run_files=TRAINING_RUN_FILES,
        config_diff=stored_config_diff(load_training_config, _compare(cfg), fix="choose another out_dir"),
        what="training run directory",
    ) as resumable:
        if not (out / CONFIG).is_file():
            atomic_write_text(out / CONFIG, dump_training_config(cfg))
        if resumable and read_meta(out).get("status") == "done" and (out / "summary.json").is_file():
            fix = "delete the run directory"
            return read_json(inside(out, out / "summary.json", what="summary"), "summary", fix)
        torch.set_num_threads(1)
        trainer = build_trainer(cfg)
        if resumable:
            _load_checkpoint(out, trainer, checkpoint_bound(training_cost(cfg).memory_bytes))
        attrs = {**trainer.flow.attrs(), "gradient": trainer.gradient, "adjoint_state": trainer.adjoint_state}
        update_meta(
            out,
            kind="training",
            name=cfg.name,
            status="running",
            error=None,
            step=trainer.step_count,
            steps=cfg.train.steps,
            attrs=attrs,
            pid=os.getpid(),
            host=socket.gethostname(),
        )
        every = cfg.train.checkpoint_every
        bar = ProgressBar(
            cfg.train.steps,
            cfg.name,
            unit="step",
            initial=trainer.step_count,
            enabled=None if progress else False,
        )
        t0 = time.perf_counter()

        def on_step(tr: Trainer) -> None:
            bar.update(1, extra=f"loss {tr.losses[-1]:.4g}")
            if tr.step_count % every == 0 or tr.step_count == cfg.train.steps:
                _save_checkpoint(out, tr)
                update_meta(out, step=tr.step_count)

        try:
            trainer.train(cfg.train.steps, on_step)
        except NonFiniteLossError as err:
            update_meta(
                out, status="diverged", step=err.step, last_finite_loss=err.last_finite_loss, error=str(err)
            )
            raise
        except (
            BaseException
        ) as exc:  # Ctrl-C, SIGTERM, a failed step: the last checkpoint stays, a rerun resumes
            update_meta(out, **failure_fields(exc))
            raise
        finally:
            bar.close()
        _save_checkpoint(out, trainer)
        try:
            summary = _final_outputs(out, trainer, cfg, time.perf_counter() - t0)
            if figures is not None:
                summary["figures"] = list(figures(out))
                _write_json(out / "summary.json", summary)
        except Exception as exc:
            update_meta(out, **failure_fields(exc, f"final outputs: {type(exc).__name__}: {exc}"))
            raise
        update_meta(out, status="done", step=trainer.step_count, error=None, traceback=None)
        return summary


def read_training_run(out_dir: str | Path) -> dict:
    """``meta.json``, ``history.json`` and (when done) ``summary.json`` of a training run directory; an
    interrupted or failed run also gets ``resume``, how to continue it.

    Raises
    ------
    CorruptFileError
        A file is missing, not a regular file of sane size, or not JSON of the right layout.
    UnsafePathError
        A file is a symlink leading outside the directory (nothing outside it is read).
    """
    out = Path(out_dir)
    fix = "rerun `attnflow train` on it to finish or rebuild it"
    if not (out / META).is_file() and not (out / META).is_symlink():
        raise CorruptRunError(f"{out} holds no {META}: it is not a training run directory; {fix}")
    res = {"meta": read_meta(out)}
    if res["meta"].get("status") in ("interrupted", "failed", "running"):
        res["resume"] = resume_hint("training", out)
    for name in ("history", "summary"):
        if (out / f"{name}.json").is_file():
            res[name] = read_json(inside(out, out / f"{name}.json", what=name), name, fix)
    return res
