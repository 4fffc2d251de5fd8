r"""The one home of the field's formulas: velocity and energy ledger assembled from pair sums, in float64.

Every backend (:mod:`~attnflow.dynamics.torch_backend`, :mod:`~attnflow.dynamics.numba_backend`) returns
a :class:`~attnflow.dynamics.pairsums.PairSums`; this module turns it into a :class:`FieldEval`. With
:math:`U^h_{ij} = e^{s^h_{ij}}`, :math:`\sum_j U^h_{ij} = e^{M_i}\,\texttt{row\_sum}_i` and
:math:`y^h_i = \sum_j U^h_{ij} x_j = e^{M_i}\,\texttt{row\_x}_i` (NOTES.md §1, §3; arXiv 2605.18870):

* velocity (eq. (10), Sec. 6 scheme) :math:`v_i = \frac1H\sum_h P(x_i) V_h \sum_j A^h_{ij} x_j`, with
  :math:`P` the geometry's tangent projection (:math:`P^\perp(x) = I - xx^\top` on the sphere);
* the pair normalisation :math:`2Hn^2` (:func:`pair_norm`) and the energy (eq. (20), with the companion
  paper's :math:`1/\beta`) :math:`\mathcal E = \frac{1}{2\beta Hn^2}\sum_{h,i,j} U^h_{ij}`;
* mobility (Cor. 4.8) :math:`m_h(x_i) = e^{\mathrm{lse}^h_i}/n` and its harmonic mean over heads
  :math:`b(x_i)` (eq. (36)), computed in log space (never :math:`1/0`);
* the paper's strong upper gradient (Lemma 4.12, Sec. 6) :math:`G^2 = \frac1n\sum_i b(x_i)|v_i|^2`;
* :math:`n P\nabla_{x_i}\mathcal E = \frac{1}{2Hn} P\sum_h (D_h y^h_i + D_h^\top z^h_i)`,
  :math:`z^h_i = \sum_j U^h_{ji} x_j` (exact for non-symmetric D), and the exact dissipation power
  :math:`\hat G^2 = \frac1n\sum_i\langle v_i, n P\nabla_{x_i}\mathcal E\rangle`, so that
  :math:`d\mathcal E/dt = s\,\hat G^2` at frozen weights;
* the drift moment :math:`C_h = \sum_{ij} U^h_{ij} x_i x_j^\top/(2Hn^2)`;
* the Ito factors: for :math:`dD_h = f_h\,dt + g_h\,dW_h` with noise shape :math:`\xi`
  (:math:`(Z+Z^\top)/2` or :math:`Z`), Ito's formula at frozen tokens gives

  .. math:: d\mathcal E = \sum_h\langle f_h, C_h\rangle_F\,dt
            + \frac\beta2\sum_h g_h^2\sum_{ij}\frac{U^h_{ij}\,\mathrm{Var}(x_i^\top\xi x_j)}{2Hn^2}\,dt
            + \sum_h\langle g_h\,dW_h, C_h\rangle_F,

  because :math:`\partial_D e^{\beta x^\top D y} = \beta U\,x y^\top`; for the symmetric noise
  :math:`\mathrm{Var}(x^\top\xi y) = (|x|^2|y|^2 + \langle x,y\rangle^2)/2`
  (:math:`(1 + \langle x,y\rangle^2)/2` on the sphere), for the full noise :math:`|x|^2|y|^2`.
  Under the layer scaling of Sec. 5 the heads act as
  :math:`c(t) D`, so f, g and dW become :math:`c f + \dot c D`, :math:`c g`, :math:`c\,dW`
  (:func:`ledger_rates`, :func:`martingale_increment`).

The ledger's formulas are written once, here, as plain arithmetic valid on tensors and on numbers inside
numba (issue 30): the row mass :func:`row_mass` and the Ito row factor :func:`ito_row`, the path sums
:func:`path_sums` (E, G^2, Ghat^2 from their sums), the rate factors :func:`effective_drift`,
:func:`ito_coefficient`, :func:`ito_rate_term` and the martingale term :func:`martingale_term`.
:func:`assemble`, :func:`ledger_rates` and :func:`martingale_increment` call them on tensors; the numba
backend's compiled assembly (:mod:`attnflow.dynamics.numba_assembly`, its ``FORMULAS``) and the compiled
multi-step loop (:mod:`attnflow.simulation.fused`, its ``FORMULAS``) compile these very functions and
only loop over them; ``tests/test_fused_loop.py`` checks that each has one definition, and
``tests/test_numba_assembly.py`` / ``tests/test_fused_loop.py`` hold the compiled results to these.

The velocity is assembled in the precision of the sums that carry it (working precision for the PyTorch
backend, float64 for the numba kernel) and returned in the tokens' dtype. Every ledger quantity is float64;
the PyTorch backend computes the row log-sum-exp in the working precision (so a float32 run's energy carries
a relative error of about |lse| 6e-8), the numba kernel in float64. A row sum exp(lse) overflows float64 once
lse > 709, i.e. slightly before E itself would (by log(2 beta H n^2)); the simulation warns when the ledger
leaves float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..geometry import Geometry
from .pairsums import PairSums

__all__ = [
    "FieldEval",
    "assemble",
    "effective_drift",
    "energy_from_lse",
    "ito_coefficient",
    "ito_rate_term",
    "ito_row",
    "ledger_overflow",
    "ledger_rates",
    "martingale_increment",
    "martingale_term",
    "overflow_message",
    "pair_norm",
    "path_sums",
    "row_mass",
]


@dataclass
class FieldEval:
    """One evaluation of the field at (x, D, t). Ledger entries are ``None`` when not requested.

    Attributes
    ----------
    velocity : Tensor, shape=[P, n, d]
        v_i (without the direction sign), tangent to the geometry.
    lse : Tensor, shape=[P, H, n]
        Row log-sum-exp of the scores.
    raw_velocity : Tensor or None, shape=[P, n, d]
        (1/H) sum_h W^h_i before the tangent projection (the printed scheme uses it).
    energy, G2, Ghat2 : Tensor, shape=[P], float64
    grad : Tensor, shape=[P, n, d], float64
        n P grad_{x_i} E.
    second_moment : Tensor, shape=[P, H, d, d], float64
        C_h.
    ito_moment, ito_full, head_mass : Tensor, shape=[P, H], float64
        sum_ij U_ij (|x_i|^2 |x_j|^2 + <x_i,x_j>^2) / (2Hn^2), sum_ij U_ij |x_i|^2 |x_j|^2 / (2Hn^2)
        (twice the Ito variance factors of the symmetric and of the full noise) and
        sum_ij U_ij / (2Hn^2); on unit-norm geometries ``ito_full == head_mass``.
    """

    velocity: torch.Tensor
    lse: torch.Tensor
    raw_velocity: torch.Tensor | None = None
    energy: torch.Tensor | None = None
    G2: torch.Tensor | None = None
    Ghat2: torch.Tensor | None = None
    grad: torch.Tensor | None = None
    second_moment: torch.Tensor | None = None
    ito_moment: torch.Tensor | None = None
    ito_full: torch.Tensor | None = None
    head_mass: torch.Tensor | None = None


def pair_norm(H: int, n: int) -> float:
    """The normalisation 2 H n^2 of the energy (eq. (20)) and of every ledger pair sum."""
    return 2.0 * H * n * n


def energy_from_lse(lse: torch.Tensor, beta: float) -> torch.Tensor:
    """E = 1/(2 beta H n^2) sum_{h,i} exp(lse^h_i) from row log-sum-exps (eq. (20); float64).

    Parameters
    ----------
    lse : Tensor, shape=[P, H, n]
    beta : float

    Returns
    -------
    Tensor, shape=[P]
    """
    _, H, n = lse.shape
    return torch.exp(lse.to(torch.float64)).sum(dim=(-1, -2)) / (pair_norm(H, n) * beta)


def assemble(
    sums: PairSums,
    x: torch.Tensor,
    D: torch.Tensor,
    V: torch.Tensor,
    beta: float,
    geometry: Geometry,
    *,
    ledger: bool = True,
    raw: bool = False,
) -> FieldEval:
    """Velocity and (optionally) the energy ledger from the pair sums of one evaluation.

    Parameters
    ----------
    sums : PairSums
    x : Tensor, shape=[P, n, d]
        Tokens (their dtype is the working precision).
    D, V : Tensor, shape=[P, H, d, d]
        Score and value matrices as used in the sums (layer scaling applied).
    beta : float
    geometry : Geometry
    ledger : bool
        Assemble the ledger quantities (the sums must carry them).
    raw : bool
        Also return the unprojected mean head output.
    """
    P, n, d = x.shape
    H = D.shape[1]
    f64 = torch.float64
    mean = sums.attn_x if sums.attn_x is not None else sums.row_x / sums.row_sum.unsqueeze(-1)
    raw_v = torch.einsum("phab,phib->pia", V.to(mean.dtype), mean) / H
    v_sums = geometry.tangent(x.to(mean.dtype), raw_v)  # in the precision of the sums
    v = v_sums.to(x.dtype)
    lse = sums.lse
    out = FieldEval(velocity=v, lse=lse.to(x.dtype), raw_velocity=raw_v.to(x.dtype) if raw else None)
    if not ledger:
        return out
    if sums.row_x is None:
        raise ValueError("assemble(ledger=True) needs pair sums computed with ledger=True")
    norm = pair_norm(H, n)
    e_shift = torch.exp(sums.row_shift)  # (P, H, n)
    head_mass = row_mass(e_shift, sums.row_sum).sum(-1) / norm
    out.head_mass = head_mass
    # b = ((1/H) sum_h 1/m_h)^{-1}, eq. (36): sum_h exp(-lse_h) through a log-sum-exp (no overflow of a term)
    b = harmonic_mobility(torch.exp(torch.logsumexp(-lse, dim=1)), H, n)
    v64 = v_sums.to(f64)
    y = row_moment(e_shift.unsqueeze(-1), sums.row_x)  # y^h_i = sum_j U_ij x_j
    z = y if sums.col_x is None else torch.exp(sums.col_shift)[..., None, None] * sums.col_x
    D64 = D.to(f64)
    x64 = x.to(f64)
    g = (torch.einsum("phab,phib->pia", D64, y) + torch.einsum("phba,phib->pia", D64, z)) / (norm / n)
    g = geometry.tangent(x64, g)
    out.grad = g
    out.energy, out.G2, out.Ghat2 = path_sums(
        head_mass.sum(-1), (b * v64.square().sum(-1)).sum(-1), (v64 * g).sum(-1).sum(-1), beta, n
    )
    out.second_moment = torch.einsum("pia,phib->phab", x64, y) / norm
    if sums.row_q is None:
        # the Ito sums were skipped (zero weight noise): no Ito factors, ledger_rates gives d_sE^Ito = 0
        out.ito_moment = out.ito_full = None
    elif geometry.unit_norm:
        out.ito_moment = ito_row(e_shift, sums.row_sum, sums.row_q).sum(-1) / norm
        out.ito_full = head_mass
    elif sums.row_r2 is None:
        # a backend without the |x_j|^2 sums (the numba kernel) gives no Ito factors off the sphere;
        # the dispatcher sends a ledger off the sphere to the PyTorch backend
        out.ito_moment = out.ito_full = None
    else:
        sq = x64.square().sum(-1).unsqueeze(1)  # |x_i|^2, (P, 1, n)
        full = e_shift * sq * sums.row_r2
        out.ito_moment = (full + e_shift * sums.row_q).sum(-1) / norm
        out.ito_full = full.sum(-1) / norm
    return out


#: log of the largest float64 (exp overflows above it)
LOG_FLOAT64_MAX = math.log(torch.finfo(torch.float64).max)


def ledger_overflow(fe: FieldEval) -> str | None:
    r"""Which ledger quantities of an evaluation left the float64 range, and why (None when all are finite).

    The energy is :math:`\frac{1}{2\beta Hn^2}\sum_{h,i} e^{\mathrm{lse}^h_i}` (eq. (20)): once a row
    log-sum-exp exceeds log(max float64) = 709.78, :math:`e^{\mathrm{lse}}` is inf, the energy is inf, and
    :math:`\hat G^2` (built from :math:`y^h_i = e^{M_i}\,\texttt{row\_x}_i`) becomes inf or nan
    (inf - inf, 0 * inf). The velocity is assembled from the normalised sums and stays exact; :math:`G^2`
    uses the mobility in log space and stays finite longer. The message names the quantities, the largest
    row log-sum-exp, and what to change.
    """
    bad = [
        name
        for name in ("energy", "G2", "Ghat2")
        if getattr(fe, name, None) is not None and not bool(torch.isfinite(getattr(fe, name)).all())
    ]
    if not bad:
        return None
    lse_max = float(fe.lse.detach().to(torch.float64).max()) if fe.lse is not None else float("nan")
    return overflow_message(bad, lse_max, bool(torch.isfinite(fe.velocity).all()))


def overflow_message(bad: list[str], lse_max: float, velocity_finite: bool) -> str:
    """The message of :func:`ledger_overflow` from its parts: the quantities that left float64 (``bad``),
    the largest row log-sum-exp and whether the velocity is finite (the compiled loop of
    :mod:`attnflow.simulation.fused` finds these in compiled code at the step it happens)."""
    velocity = "finite" if velocity_finite else "not finite either"
    return (
        f"{', '.join(bad)} left the float64 range: the largest row log-sum-exp of the scores, "
        f"log sum_j exp(beta <x_i, D_h x_j>), is {lse_max:.4g} > {LOG_FLOAT64_MAX:.2f} = log(max float64), "
        f"so exp(lse) in the energy (eq. (20)) and e^M y in Ghat^2 overflow (inf, and inf - inf = nan); the "
        f"velocity ({velocity}) uses normalised sums"
    )


def _per_head_g2(g, P: int, H: int) -> torch.Tensor:
    g = torch.as_tensor(g, dtype=torch.float64)
    if g.ndim >= 2 and g.shape[-2:] == (1, 1):
        g = g[..., 0, 0]
    return (g**2).expand(P, H) if g.ndim <= 2 else (g**2).reshape(P, H)


# The formulas below are plain arithmetic, valid on tensors (assemble, ledger_rates, martingale_increment)
# and on numbers inside numba: the compiled assembly of attnflow.dynamics.numba_assembly and the compiled
# loop of attnflow.simulation.fused compile these very functions (their one definition; FORMULAS there).


def row_mass(e_shift, row_sum):
    """sum_j U^h_ij = e^{M_i} row_sum_i = exp(lse^h_i) = n m_h(x_i): a row's mass (Cor. 4.8; summed over
    (h, i) and divided by 2 H n^2 it is beta E, eq. (20))."""
    return e_shift * row_sum


def row_moment(e_shift, row_x):
    """y^h_i = sum_j U^h_ij x_j = e^{M_i} row_x_i: a row's first moment; the rows of the drift moment
    C_h = sum_i x_i (y^h_i)^T / (2 H n^2) (the factor of the head drift in the rate of E, eq. (147); NOTES
    §3) and of the gradient n P grad_i E (eq. (20))."""
    return e_shift * row_x


def harmonic_mobility(inv_mass_sum, H, n):
    """b(x_i) = ((1/H) sum_h 1/m_h(x_i))^{-1}, m_h = exp(lse^h_i)/n, from ``inv_mass_sum`` =
    sum_h exp(-lse^h_i): H / (n inv_mass_sum), the harmonic-mean mobility of G^2 (eq. (36), Lemma 4.12)."""
    return H / (n * inv_mass_sum)


def ito_row(e_shift, row_sum, row_q):
    """sum_j U^h_ij (1 + <x_i, x_j>^2) = e^{M_i} (row_sum_i + row_q_i): a row of the Ito factor of the
    symmetric noise on the sphere (twice Var(x_i^T xi x_j) summed with the weights U, eq. (147))."""
    return e_shift * (row_sum + row_q)


def path_sums(mass, g2_sum, ghat2_sum, beta, n):
    """E, G^2, Ghat^2 of a path from their sums: E = sum_h head mass / beta (eq. (20); head mass
    sum_ij U_ij/(2Hn^2)), G^2 = (1/n) sum_i b(x_i) abs(v_i)^2 (Lemma 4.12), Ghat^2 = (1/n) sum_i <v_i,
    n P grad_i E> (NOTES §3)."""
    return mass / beta, g2_sum / n, ghat2_sum / n


def ito_rate_term(g2, scale, factor):
    """g_h^2 c^2 times the Ito factor of head h: one head's term of the Ito rate of E (eq. (147)), before
    :func:`ito_coefficient`; under the layer scaling the noise g dW acts as c g dW."""
    return g2 * scale**2 * factor


def martingale_term(scale, inner):
    """c sum_h <dS_h, C_h>_F from ``inner`` = sum_h <dS_h, C_h>_F: the martingale increment of one step
    (eq. (147); NOTES §3), dS = g sqrt(dt) xi the noise added to the heads, c the layer scaling."""
    return scale * inner


def effective_drift(scale, drift, scale_rate, D):
    """c f + (dc/dt) D: the drift of the effective heads c(t) D under the layer scaling of Sec. 5, the
    factor of C_h in the drift rate of E (eq. (147)); ``scale_rate = 0`` adds nothing."""
    if scale_rate != 0.0:
        return scale * drift + scale_rate * D
    return scale * drift


def ito_coefficient(beta, symmetric):
    """beta/4 (noise (Z + Z^T)/2) or beta/2 (noise Z): the factor of sum_h g_h^2 c^2 (Ito factor) in the Ito
    rate of E (eq. (147); the variances in the module docstring)."""
    return beta / 4.0 if symmetric else beta / 2.0


def ledger_rates(
    fe: FieldEval,
    D: torch.Tensor,
    *,
    beta: float,
    noise_kind: str,
    scale: float,
    scale_rate: float,
    drift: torch.Tensor,
    g,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Drift and Ito rates of E at frozen tokens (the d_sE of eq. (147)), float64, each of shape [P].

    Parameters
    ----------
    fe : FieldEval
        Evaluation at (x, D, t) with the ledger.
    D : Tensor, shape=[P, H, d, d]
        The heads (raw, before layer scaling).
    beta : float
    noise_kind : {"symmetric", "full"}
        Shape of the weight noise xi.
    scale, scale_rate : float
        Layer scaling c(t) and dc/dt (1 and 0 without it).
    drift : Tensor, shape=[P, H, d, d]
        f(D, t).
    g : float or Tensor broadcastable to [P, H, 1, 1]
        Diffusion coefficient g(D, t) (0 for deterministic processes). With ``g = 0`` the Ito rate is
        exactly 0 and ``fe`` may come without its Ito factors (evaluated with ``ito=False``).
    """
    P, H = D.shape[:2]
    f_eff = effective_drift(scale, drift.to(torch.float64), scale_rate, D.to(torch.float64))
    C = fe.second_moment
    dtE_drift = (f_eff * C).sum(dim=(-1, -2, -3))
    g2 = _per_head_g2(g, P, H).to(C.device)
    if (fe.ito_moment if noise_kind == "symmetric" else fe.ito_full) is None:
        if bool((g2 * scale**2 != 0).any()):
            raise ValueError(
                "ledger_rates: the weight noise g is not zero but the field was evaluated without its Ito "
                "sums (ito=False); evaluate with ito=True whenever the weight process is stochastic"
            )
        return dtE_drift, torch.zeros_like(dtE_drift)
    factor = fe.ito_moment if noise_kind == "symmetric" else fe.ito_full
    dtE_ito = ito_coefficient(beta, noise_kind == "symmetric") * ito_rate_term(g2, scale, factor).sum(-1)
    return dtE_drift, dtE_ito


def martingale_increment(fe: FieldEval, noise: torch.Tensor | None, scale: float) -> torch.Tensor:
    """The martingale increment sum_h <c dS_h, C_h>_F of one step (eq. (147)), float64, shape [P].

    ``noise`` is the increment dS = g sqrt(dt) xi added to the heads in the step (None: zero).
    """
    C = fe.second_moment
    if noise is None:
        return torch.zeros(C.shape[0], dtype=torch.float64, device=C.device)
    return martingale_term(scale, (noise.to(torch.float64) * C).sum(dim=(-1, -2, -3)))
