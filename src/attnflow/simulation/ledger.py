r"""The energy ledger of a run: the discrete energy-dissipation identity (147) of arXiv 2605.18870.

Accumulated with left Riemann sums along the steps (NOTES.md §3), so that at every recorded time

    R_paper = E_t - E_0 - int d_sE ds - s int G^2 ds - M_t - J_t     (eq. (147) with the paper's G^2)
    R_exact = E_t - E_0 - int d_sE ds - s int Ghat^2 ds - M_t - J_t  (exact chain rule)

where d_sE is the explicit time derivative through the weights (drift and Ito parts), M_t the
martingale of the weight noise and J_t the energy jumps E(x, D_after) - E(x, D_before) of
piecewise-constant (layered) weights at layer boundaries (zero for the continuous processes of the paper).
The terms themselves come from :mod:`attnflow.dynamics.assembly`; this object only sums them, owns their
names and the residual formulas, checks that they stay in float64 range, and can be checkpointed. One
step's update of the running sums is :func:`riemann_step` (plain arithmetic, valid on tensors and on
numbers inside numba): :meth:`EnergyLedger.add_step` calls it, and the compiled loop of
:mod:`attnflow.simulation.fused` compiles this very function (its one definition, issue 30).
"""

from __future__ import annotations

import warnings

import torch

from ..dynamics.assembly import FieldEval, ledger_overflow

__all__ = ["ACCUMULATORS", "SCALARS", "EnergyLedger", "riemann_step"]

#: the running sums of the ledger
ACCUMULATORS = ("int_dtE", "int_G2", "int_Ghat2", "martingale", "jumps")
#: the scalars recorded per path and time
SCALARS = (
    "energy",
    "G2",
    "Ghat2",
    "dtE_drift",
    "dtE_ito",
    "int_dtE",
    "int_G2",
    "int_Ghat2",
    "martingale",
    "jumps",
    "residual_paper",
    "residual_exact",
)


def riemann_step(int_dtE, int_G2, int_Ghat2, martingale, drift_rate, ito_rate, G2, Ghat2, increment, dt):
    """The running sums of identity (147) after one step from t_k: the left Riemann terms
    (d_sE^drift + d_sE^Ito) dt, G^2 dt, Ghat^2 dt at the state of t_k, and the step's martingale increment
    (:func:`attnflow.dynamics.assembly.martingale_term`). Returns the new ``(int_dtE, int_G2, int_Ghat2,
    martingale)``."""
    return (
        int_dtE + (drift_rate + ito_rate) * dt,
        int_G2 + G2 * dt,
        int_Ghat2 + Ghat2 * dt,
        martingale + increment,
    )


class EnergyLedger:
    """Running sums of identity (147) for P paths, in float64.

    Parameters
    ----------
    paths : int
    sign : float
        +1 (ascent) or -1 (descent): the sign of the dissipation terms.
    beta : float
        Only quoted in the overflow warning.
    device : torch.device
    """

    def __init__(self, paths: int, sign: float, beta: float, device: torch.device):
        self.sign = float(sign)
        self.beta = float(beta)
        z = torch.zeros(paths, dtype=torch.float64, device=device)
        self.acc = {k: z.clone() for k in ACCUMULATORS}
        self.E0: torch.Tensor | None = None
        self._warned = False

    def start(self, fe: FieldEval) -> None:
        """Take E_0 from the first evaluation (once)."""
        if self.E0 is None:
            self.E0 = fe.energy.clone()

    def add_step(
        self,
        fe: FieldEval,
        rates: tuple[torch.Tensor, torch.Tensor],
        martingale: torch.Tensor,
        dt: float,
        *,
        t: float | None = None,
        step: int | None = None,
    ) -> None:
        """Add one step's left Riemann terms: d_sE dt (``rates`` = drift and Ito parts), G^2 dt, Ghat^2 dt
        and the martingale increment (the compiled loop of :mod:`attnflow.simulation.fused` adds the same
        terms in the same order to the same running sums). Given ``t`` (and ``step``), a ledger quantity
        that leaves float64 is reported at this step (:func:`attnflow.dynamics.assembly.ledger_overflow`)."""
        if t is not None:
            self._check_finite(fe, t, step)
        acc = self.acc
        acc["int_dtE"], acc["int_G2"], acc["int_Ghat2"], acc["martingale"] = riemann_step(
            acc["int_dtE"], acc["int_G2"], acc["int_Ghat2"], acc["martingale"],
            rates[0], rates[1], fe.G2, fe.Ghat2, martingale, dt,
        )  # fmt: skip

    def add_jump(self, energy_jump: torch.Tensor) -> None:
        """Add the energy jump of a layer boundary."""
        self.acc["jumps"] = self.acc["jumps"] + energy_jump

    def scalars(
        self, fe: FieldEval, rates: tuple[torch.Tensor, torch.Tensor], t: float
    ) -> dict[str, torch.Tensor]:
        """The recorded scalars at the current state (each of shape [P], on the CPU)."""
        self._check_finite(fe, t)
        acc, s = self.acc, self.sign
        base = fe.energy - self.E0 - acc["int_dtE"] - acc["martingale"] - acc["jumps"]
        sc = {
            "energy": fe.energy,
            "G2": fe.G2,
            "Ghat2": fe.Ghat2,
            "dtE_drift": rates[0],
            "dtE_ito": rates[1],
            **acc,
            "residual_paper": base - s * acc["int_G2"],
            "residual_exact": base - s * acc["int_Ghat2"],
        }
        return {k: v.detach().cpu().clone() for k, v in sc.items()}

    def _check_finite(self, fe: FieldEval, t: float, step: int | None = None) -> None:
        if self._warned:
            return
        why = ledger_overflow(fe)
        if why is not None:
            self.warn_overflow(why, t, step)

    def warn_overflow(self, why: str, t: float, step: int | None = None) -> None:
        """Warn once that the ledger left float64 at time ``t`` (the evaluation that starts step
        ``step + 1``), with the reason ``why`` (:func:`attnflow.dynamics.assembly.overflow_message`)."""
        if self._warned:
            return
        self._warned = True
        where = f"t = {t:g}" + (f" (the evaluation of step {step + 1})" if step is not None else "")
        warnings.warn(
            f"the energy ledger left float64 at {where}: {why}; beta = {self.beta:g}. The positions stay "
            "exact but these ledger quantities and the residuals are inf/nan from here; lower beta or the "
            "head scale, or run with ledger=False",
            RuntimeWarning,
            stacklevel=4,
        )

    def state_dict(self) -> dict:
        """The running sums and E_0 (CPU tensors)."""
        return {
            "acc": {k: v.cpu().clone() for k, v in self.acc.items()},
            "E0": None if self.E0 is None else self.E0.cpu().clone(),
        }

    def load_state_dict(self, sd: dict, device: torch.device) -> None:
        """Restore :meth:`state_dict`."""
        self.acc = {k: v.to(device) for k, v in sd["acc"].items()}
        self.E0 = None if sd["E0"] is None else sd["E0"].to(device)
