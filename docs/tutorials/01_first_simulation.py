# %% [markdown]
# # A first simulation
#
# Tokens on the sphere S^2 moved by multi-head self-attention whose heads follow an Ornstein-Uhlenbeck
# process, as in Sec. 6 of arXiv 2605.18870. We build the model, draw initial tokens and heads, integrate
# with the projected Euler scheme, and look at what came back: an `xarray.Dataset` with the token
# positions and the energy ledger. Settings are small so that the page builds in seconds.

# %%
import matplotlib.pyplot as plt
import numpy as np

import attnflow as af

model = af.TransformerModel(
    direction="descent",  # x' = -v: the sign the authors' code runs (ascent: x' = +v)
    beta=1.0,
    weights=af.OrnsteinUhlenbeck(sigma2=1.0),  # dD = (I - D) dt + sqrt(2 sigma^2) dW, symmetrised noise
    backend="torch",  # the PyTorch path: no JIT compilation for these small runs
)
x0 = af.tokens.octahedral(2, 60, 3, noise=0.05, seed=0)  # 2 paths, 60 tokens on S^2
D0 = af.heads.symmetric_gaussian(2, 4, 3, seed=1)  # 4 heads per path, D = Z + Z^T
print(model.describe())
print("tokens", tuple(x0.shape), "heads", tuple(D0.shape))

# %% [markdown]
# `simulate` integrates to `t1` with step `dt` and records every `record_every` steps;
# `progress=True` would draw a progress bar on stderr. The same `seed` gives the same run, bit for bit.

# %%
ds = af.simulate(model, x0, D0, t1=2.0, dt=0.01, record_every=10, seed=0)
print(ds)

# %% [markdown]
# The tokens stay on the sphere (the scheme retracts every step), and the energy and the dissipation
# G^2 are recorded per path and time.

# %%
norms = np.linalg.norm(ds.positions.values, axis=-1)
print(f"max | |x_i| - 1 | over the run: {np.abs(norms - 1).max():.2e}")
print("energy at t = 0 and t = 2:", ds.energy.isel(time=[0, -1]).values.round(4).tolist())

fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
for p in range(ds.sizes["path"]):
    axes[0].plot(ds.time, ds.energy.isel(path=p), label=f"path {p}")
    axes[1].plot(ds.time, ds.G2.isel(path=p), label=f"path {p}")
axes[0].set(xlabel="t", title="energy E(t)")
axes[1].set(xlabel="t", title="G^2(t)")
axes[0].legend()
fig.tight_layout()

# %% [markdown]
# The token cloud of path 0 at the start and at the end: attention gathers the tokens into clusters.

# %%
fig = plt.figure(figsize=(8, 4))
for k, ti in enumerate((0, -1)):
    ax = fig.add_subplot(1, 2, k + 1, projection="3d")
    x = ds.positions.isel(path=0, time=ti).values
    ax.scatter(x[:, 0], x[:, 1], x[:, 2], s=8, color="C3")
    ax.set_box_aspect((1, 1, 1))
    ax.set_title(f"t = {float(ds.time[ti]):g}")
fig.tight_layout()
