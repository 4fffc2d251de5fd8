# %% [markdown]
# # The energy ledger, and why the paper's G^2 fails for H > 1
#
# Along the flow the energy E changes by the dissipation. The paper's discrete identity (147) writes the
# dissipation with G^2 = (1/n) sum_i b(x_i) |v_i|^2, b the harmonic mean over heads of the mobilities
# m_h (eq. (36), Lemma 4.12). attnflow records the same ledger twice: with the paper's G^2 (residual
# `residual_paper`) and with the exact power of the chain rule, Ghat^2 (residual `residual_exact`;
# `docs/edi_audit.md`). A residual that is a discretisation error shrinks when dt is halved; a defect of
# the identity does not.
#
# With one head b = m_1 and the two coincide. With frozen heads and H = 10 we halve dt three times.

# %%
import numpy as np

import attnflow as af

model = af.TransformerModel(direction="descent", beta=1.0, backend="torch")  # frozen heads (the default)
x0 = af.tokens.uniform(2, 16, 3, seed=0)
rows = []
for H in (1, 10):
    D0 = af.heads.symmetric_gaussian(2, H, 3, seed=1)
    for dt in (0.02, 0.01, 0.005):
        ds = af.simulate(model, x0, D0, t1=0.5, dt=dt, record_every=int(round(0.5 / dt)), seed=0)
        last = ds.isel(time=-1)
        rows.append(
            (
                H,
                dt,
                float(np.abs(last.residual_exact).mean()),
                float(np.abs(last.residual_paper).mean()),
                float((ds.G2 - ds.Ghat2).isel(time=0).mean()),
            )
        )
print("  H     dt   mean|R_exact(T)|  mean|R_paper(T)|   G^2 - Ghat^2 at t=0")
for H, dt, re, rp, gap in rows:
    print(f"{H:3d}  {dt:5.3f}      {re:9.2e}         {rp:9.2e}          {gap:+.3e}")

# %% [markdown]
# For H = 1 both residuals halve with dt (first order: a discretisation error). For H = 10 the exact
# residual halves while the paper's stays put: G^2 and Ghat^2 differ at every time, so the paper's
# ledger is off by s * int (Ghat^2 - G^2) dt however small dt is. The reason (NOTES.md section 3): at
# frozen symmetric heads dE/dt = s Ghat^2 with Ghat^2 = (1/n) sum_i <v_i, (1/H) sum_h m_h(x_i) V^h_i>,
# the velocity paired with the per-head fields each weighted by its own mobility m_h, whereas the paper's
# G^2 = (1/n) sum_i b(x_i) |v_i|^2 weights the averaged field by one harmonic mean b of the m_h. The two
# coincide for H = 1 or identical heads, not in general.

# %%
r_exact = {H: [r[2] for r in rows if r[0] == H] for H in (1, 10)}
r_paper = {H: [r[3] for r in rows if r[0] == H] for H in (1, 10)}
for H in (1, 10):
    ratio_exact = np.round(np.array(r_exact[H][:-1]) / r_exact[H][1:], 2).tolist()
    ratio_paper = np.round(np.array(r_paper[H][:-1]) / r_paper[H][1:], 2).tolist()
    print(f"H = {H:2d}: R_exact ratio per halving {ratio_exact}, R_paper ratio {ratio_paper}")
assert all(1.7 < a / b < 2.3 for a, b in zip(r_exact[10][:-1], r_exact[10][1:], strict=True))  # first order
assert all(
    0.8 < a / b < 1.25 for a, b in zip(r_paper[10][:-1], r_paper[10][1:], strict=True)
)  # no convergence
