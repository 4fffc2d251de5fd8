# %% [markdown]
# # Training a flow
#
# The heads of an attention flow can be trained. `TrainableFlow` holds L layers of H heads (constant within a
# layer, so Theta_t is piecewise constant in depth) and integrates the flow of arXiv 2605.18870 eq. (10) with
# the mean-field scaling 1/H on the PyTorch backend, which autograd differentiates. Here the flow learns to
# separate two classes of token sequences read out from a classification token, a small version of the
# sequence task of arXiv 2605.17660. The gradients come from the discrete adjoint (O(1) memory in depth),
# checked first against plain autograd.

# %%
import matplotlib.pyplot as plt
import torch

import attnflow as af
from attnflow.training.adjoint import adjoint_flow
from attnflow.training.flow import TrainableFlow
from attnflow.training.tasks import TwoClassTask
from attnflow.training.trainer import Trainer

torch.set_num_threads(1)
model = af.TransformerModel(direction="ascent", beta=2.0)
flow = TrainableFlow(model, d=3, layers=3, heads=2, t1=1.0, steps_per_layer=2, param="qkv", seed=0)
task = TwoClassTask.make(paths=24, n=6, d=3, seed=0)
print(f"{sum(p.numel() for p in flow.parameters())} trainable numbers; tokens {tuple(task.x0.shape)}")

# %% [markdown]
# The two gradient methods agree to round-off on a scalar of the final tokens.

# %%
w = torch.randn(task.x0.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
grads = {}
for method in ("autograd", "adjoint"):
    flow.zero_grad()
    xT = flow(task.x0) if method == "autograd" else adjoint_flow(flow, task.x0)
    (w * xT).sum().backward()
    grads[method] = torch.cat([p.grad.flatten() for p in flow.parameters()])
gap = (grads["adjoint"] - grads["autograd"]).norm() / grads["autograd"].norm()
print(f"relative gap adjoint vs autograd: {gap:.1e}")
assert gap < 1e-8

# %% [markdown]
# AdamW on the logistic loss of a linear readout of token 0. A seeded run gives the same curve every time.

# %%
trainer = Trainer(flow, task, loss="logistic", lr=0.05, gradient="adjoint", seed=0, record_every=10)
trainer.train(60)
first, last = trainer.evals[0], trainer.evals[-1]
print("step 0 :", {k: round(v, 5) for k, v in first.items()})
print("step 60:", {k: round(v, 5) for k, v in last.items()})

fig, ax = plt.subplots(figsize=(5, 3.2))
ax.semilogy(trainer.losses, label="training minibatch loss")
ax.set(xlabel="AdamW step", ylabel="logistic loss", title="two-class task, adjoint gradients")
ax.legend()
fig.tight_layout()

# %% [markdown]
# `attnflow train CONFIG --out DIR` runs the same training as an experiment: a validated YAML config, a run
# directory with checkpoints of the heads and the optimiser (rerun to resume, bit for bit), loss curves, token
# clouds, the head law per layer and the risk landscape. `attnflow train --example` prints a config; the
# guide is `docs/training.md`.
