r"""Multi-head gradient-flow structure (arXiv 2605.04279, seeds/000; NOTES.md §7): per-head energies,
their rates split per token into self, cross-head and radial-shadow terms, a monotonicity checker, and
the entropy production of the attention rows.

Conventions (those of the simulated model, :class:`attnflow.TransformerModel`): scores
:math:`s^h_{ij} = \beta\langle x_i, D_h x_j\rangle`, weights :math:`A^h_{ij}` of the attention kind
(softmax, ``usa`` = :math:`e^{s}/n`, ``relu``, ``sigmoid``), head outputs
:math:`u^h_i = V_h\sum_j A^h_{ij} x_j` (:math:`V_h = D_h` unless ``values`` are given) and velocity

.. math:: \dot x_i = \frac{\sigma}{H}\sum_{h'} P(x_i)\,u^{h'}_i,\qquad
          P(x) = I - xx^\top \text{ (sphere)},\ I \text{ (flat)},\qquad \sigma = \pm 1.

Per-head energies (companion convention, NOTES §5, §7)
:math:`E_h = \frac{1}{2\beta n^2}\sum_{ij} e^{s^h_{ij}}`, :math:`E_{\rm multi} = \sum_h E_h`, with
gradient :math:`g^h_i = \nabla_{x_i}E_h = \frac{1}{2n^2}\sum_j (e^{s^h_{ij}} D_h + e^{s^h_{ji}} D_h^\top)x_j`
(:math:`= n^{-2} f^h_i` for symmetric :math:`D_h`, :math:`f^h_i = \sum_j e^{s^h_{ij}} D_h x_j`). With the
projection identity :math:`\langle P(x)u, g\rangle = \langle u, g\rangle - \langle u, x\rangle\langle g,
x\rangle` the rate splits per token as

.. math:: \frac{dE_h}{dt} = \sum_i \underbrace{\tfrac{\sigma}{H}\langle g^h_i, P u^h_i\rangle}_{\rm self}
          + \underbrace{\tfrac{\sigma}{H}\sum_{h'\ne h}\langle g^h_i, u^{h'}_i\rangle}_{\rm cross}
          \underbrace{- \tfrac{\sigma}{H}\sum_{h'\ne h}\langle g^h_i, x_i\rangle
          \langle u^{h'}_i, x_i\rangle}_{\rm radial\ shadows}
          + \underbrace{\tfrac{1}{2n^2}\sum_{ij} e^{s^h_{ij}} x_i^\top \dot D_h x_j}_{\rm head\ motion},

the radial term being minus the products of the radial shadows :math:`r = \langle\cdot, x_i\rangle x_i`
of the gradient and of the other heads' outputs (zero in the flat dynamics). [derived, NOTES §7]: for
USA with symmetric :math:`D_h = V_h` the self term is :math:`\frac{\sigma}{Hn^2}|P f^h_i|^2/n` and, for
orthogonal heads (:math:`D_hD_{h'} = 0`), the cross term vanishes, so on the sphere only the radial
shadows can break per-head monotonicity.

Arrays are float64, batched over paths; memory is :math:`O(PHn^2)` (meant for n up to a few hundred).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch

from ..geometry import get_geometry
from ..model.attention import attention_weights
from ..model.transformer import DIRECTIONS
from .inputs import check_heads, check_positive_scalar, check_tokens

__all__ = [
    "MULTIHEAD_KINDS",
    "HeadEnergyRates",
    "MonotonicityReport",
    "attention_entropy_production",
    "check_monotonicity",
    "head_energy_gradients",
    "head_energy_rates",
    "head_outputs",
    "multihead_velocity",
    "radial_shadows",
]

#: attention kinds whose rows are local (the decomposition needs A^h_ij row by row)
MULTIHEAD_KINDS = ("softmax", "usa", "relu", "sigmoid")
TERMS = ("self_term", "cross_term", "radial_term", "head_motion")


def _inputs(x, D, beta, attention, geometry, values):
    if attention not in MULTIHEAD_KINDS:
        raise ValueError(
            f"attention must be one of {', '.join(MULTIHEAD_KINDS)} (row-local weights): got {attention!r}; "
            "sinkhorn couples the rows and has no per-head decomposition here"
        )
    beta = check_positive_scalar(beta, "beta")
    geo = get_geometry(geometry)
    x = check_tokens(x.to(torch.float64) if isinstance(x, torch.Tensor) else x, geo.name)
    D = check_heads(D, x)
    V = D if values is None else check_heads(values, x, "values")
    if V.shape[1] != D.shape[1]:
        raise ValueError(f"values have {V.shape[1]} heads but D has {D.shape[1]}; pass one value per head")
    return x, D, V, beta, geo


def _scores(x: torch.Tensor, D: torch.Tensor, beta: float) -> torch.Tensor:
    """s^h_ij = beta <x_i, D_h x_j>, shape [P, H, n, n]."""
    return beta * torch.einsum("pid,phde,pje->phij", x, D, x)


def _weights(s: torch.Tensor, attention: str) -> torch.Tensor:
    return attention_weights(s, torch.logsumexp(s, dim=-1), attention)


def head_outputs(
    x: torch.Tensor, D: torch.Tensor, beta: float = 1.0, *, attention: str = "softmax", values=None
) -> torch.Tensor:
    r"""Head outputs :math:`u^h_i = V_h\sum_j A^h_{ij} x_j` as the model uses them (NOTES §1, §7).

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
        Score matrices.
    beta : float
    attention : str
        One of :data:`MULTIHEAD_KINDS`.
    values : Tensor or None, shape as D
        Value matrices (None: V = D).

    Returns
    -------
    Tensor, shape=[P, H, n, d]
        For ``usa`` this is :math:`f^h_i/n` of NOTES §7; for softmax the normalised :math:`w^h_i`.
    """
    x, D, V, beta, _ = _inputs(x, D, beta, attention, "flat", values)
    A = _weights(_scores(x, D, beta), attention)
    return torch.einsum("phde,phij,pje->phid", V, A, x)


def head_energy_gradients(x: torch.Tensor, D: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    r"""Ambient gradients :math:`g^h_i = \nabla_{x_i} E_h` of the per-head energies (NOTES §7).

    .. math:: g^h_i = \frac{1}{2n^2}\sum_j \left(e^{s^h_{ij}} D_h + e^{s^h_{ji}} D_h^\top\right) x_j

    Returns
    -------
    Tensor, shape=[P, H, n, d]
    """
    x, D, _, beta, _ = _inputs(x, D, beta, "usa", "flat", None)
    return _gradients(x, D, _scores(x, D, beta))


def _gradients(x, D, s):
    n = x.shape[1]
    U = torch.exp(s)
    fwd = torch.einsum("phde,phij,pje->phid", D, U, x)
    bwd = torch.einsum("phed,phji,pje->phid", D, U, x)
    return (fwd + bwd) / (2.0 * n * n)


def radial_shadows(x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""Radial shadows :math:`r^h_i = \langle u^h_i, x_i\rangle x_i` (NOTES §7), shape=[P, H, n, d]."""
    return torch.einsum("phid,pid->phi", u, x).unsqueeze(-1) * x.unsqueeze(1)


def multihead_velocity(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float = 1.0,
    *,
    attention: str = "softmax",
    geometry: str = "sphere",
    values=None,
    direction: str = "ascent",
) -> torch.Tensor:
    r""":math:`\dot x_i = \frac{\sigma}{H}\sum_h P(x_i) u^h_i` (eq. (10) of arXiv 2605.18870),
    shape=[P, n, d].

    Independent of :mod:`attnflow.dynamics` (tested equal to
    :func:`attnflow.dynamics.field.evaluate_torch`).
    """
    x, D, V, beta, geo = _inputs(x, D, beta, attention, geometry, values)
    u = torch.einsum("phde,phij,pje->phid", V, _weights(_scores(x, D, beta), attention), x)
    return _velocity(x, u, geo, _sign(direction))


def _sign(direction: str) -> float:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'ascent' or 'descent': got {direction!r}")
    return DIRECTIONS[direction]


def _velocity(x, u, geo, sign):
    m = u.mean(dim=1)
    if geo.unit_norm:
        m = m - (m * x).sum(-1, keepdim=True) * x
    return sign * m


@dataclass
class HeadEnergyRates:
    r"""Per-head energies and the per-token split of their rates (module docstring; NOTES §7).

    Attributes
    ----------
    energy : Tensor, shape=[..., P, H]
        :math:`E_h`.
    self_term, cross_term, radial_term : Tensor, shape=[..., P, H, n]
        Per-token contributions to :math:`dE_h/dt` (radial = 0 in the flat dynamics).
    head_motion : Tensor, shape=[..., P, H]
        :math:`\partial_t E_h` through moving heads (0 for frozen heads).
    """

    energy: torch.Tensor
    self_term: torch.Tensor
    cross_term: torch.Tensor
    radial_term: torch.Tensor
    head_motion: torch.Tensor

    @property
    def per_head(self) -> torch.Tensor:
        r""":math:`dE_h/dt`, shape=[..., P, H]."""
        return (self.self_term + self.cross_term + self.radial_term).sum(-1) + self.head_motion

    @property
    def multi(self) -> torch.Tensor:
        r""":math:`dE_{\rm multi}/dt = \sum_h dE_h/dt`, shape=[..., P]."""
        return self.per_head.sum(-1)

    def term_sums(self) -> torch.Tensor:
        """The four terms summed over tokens, shape=[..., P, H, 4] (order of ``TERMS``)."""
        return torch.stack(
            [self.self_term.sum(-1), self.cross_term.sum(-1), self.radial_term.sum(-1), self.head_motion],
            dim=-1,
        )

    @staticmethod
    def stack(items: Sequence[HeadEnergyRates]) -> HeadEnergyRates:
        """Stack rates of several times along a new leading axis."""
        return HeadEnergyRates(
            **{f.name: torch.stack([getattr(r, f.name) for r in items]) for f in fields(HeadEnergyRates)}
        )


def head_energy_rates(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float = 1.0,
    *,
    attention: str = "softmax",
    geometry: str = "sphere",
    values=None,
    direction: str = "ascent",
    head_rate: torch.Tensor | None = None,
) -> HeadEnergyRates:
    r"""Per-head energies and the per-token split of :math:`dE_h/dt` along the model's flow.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
        Tokens (on S^{d-1} for ``geometry="sphere"``).
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
        Score matrices (symmetric or not).
    beta : float
    attention : str
        One of :data:`MULTIHEAD_KINDS` (SA = ``softmax``, USA = ``usa``).
    geometry : {"sphere", "flat"}
    values : Tensor or None
        Value matrices (None: V = D). Head weights w_h enter as ``values = H w_h V_h``.
    direction : {"ascent", "descent"}
    head_rate : Tensor or None, shape as D
        :math:`\dot D_h` for moving heads.

    Returns
    -------
    HeadEnergyRates
        Summing its terms gives the derivative of :func:`attnflow.observables.head_energies` along the
        flow (tested against central finite differences).
    """
    x, D, V, beta, geo = _inputs(x, D, beta, attention, geometry, values)
    sign = _sign(direction)
    n, H = x.shape[1], D.shape[1]
    s = _scores(x, D, beta)
    u = torch.einsum("phde,phij,pje->phid", V, _weights(s, attention), x)
    g = _gradients(x, D, s)
    c = sign / H
    gu = torch.einsum("phid,pkid->phki", g, u)  # <g^h_i, u^k_i>, shape [P, H, H, n]
    own = torch.diagonal(gu, dim1=1, dim2=2).permute(0, 2, 1)  # <g^h_i, u^h_i>, [P, H, n]
    cross = c * (gu.sum(2) - own)
    if geo.unit_norm:
        gx = torch.einsum("phid,pid->phi", g, x)
        ux = torch.einsum("phid,pid->phi", u, x)
        self_term = c * (own - gx * ux)
        radial = -c * gx * (ux.sum(1, keepdim=True) - ux)
    else:
        self_term, radial = c * own, torch.zeros_like(own)
    energy = torch.exp(s).sum((-1, -2)) / (2.0 * beta * n * n)
    if head_rate is None:
        motion = torch.zeros_like(energy)
    else:
        Dd = check_heads(head_rate, x, "head_rate")
        motion = torch.einsum("phij,pid,phde,pje->ph", torch.exp(s), x, Dd, x) / (2.0 * n * n)
    return HeadEnergyRates(energy, self_term, cross, radial, motion)


@dataclass
class MonotonicityReport:
    r"""Which of :math:`E_{\rm multi}` and each :math:`E_h` are monotone along a trajectory.

    Monotone means :math:`\sigma\,dE/dt \ge -\mathrm{tol}\cdot\mathrm{scale}` at every recorded time
    (non-decreasing for ascent, non-increasing for descent), the scale being the sum of the absolute
    per-token terms at that time.

    Attributes
    ----------
    multi_monotone : ndarray, shape=[P]
    head_monotone : ndarray, shape=[P, H]
    multi_negative_fraction, head_negative_fraction : ndarray, shape=[P], [P, H]
        Fraction of recorded times with a violation.
    multi_worst, head_worst : ndarray, shape=[P], [P, H]
        Most negative :math:`\sigma\,dE/dt` (0 if none is negative).
    multi_worst_relative : ndarray, shape=[P]
        ``multi_worst`` divided by the scale (summed over heads) at that time.
    head_worst_relative : ndarray, shape=[P, H]
        ``head_worst`` divided by the scale at that time.
    head_worst_time : ndarray, shape=[P, H]
    head_responsible : ndarray of str, shape=[P, H]
        The most negative of the four terms at the worst time ("" where monotone).
    """

    multi_monotone: np.ndarray
    head_monotone: np.ndarray
    multi_negative_fraction: np.ndarray
    head_negative_fraction: np.ndarray
    multi_worst: np.ndarray
    multi_worst_relative: np.ndarray
    head_worst: np.ndarray
    head_worst_relative: np.ndarray
    head_worst_time: np.ndarray
    head_responsible: np.ndarray


def check_monotonicity(
    times, rates: HeadEnergyRates, *, direction: str = "ascent", tol: float = 1e-9
) -> MonotonicityReport:
    r"""Monotonicity of :math:`E_{\rm multi}` and of each :math:`E_h` along a recorded trajectory.

    Parameters
    ----------
    times : array-like, shape=[T]
    rates : HeadEnergyRates
        With a leading time axis ([T, P, H, n] terms; :meth:`HeadEnergyRates.stack`).
    direction : {"ascent", "descent"}
        The flow's direction: the energy should rise (ascent) or fall (descent).
    tol : float
        Relative tolerance (round-off), >= 0.

    Returns
    -------
    MonotonicityReport
    """
    t = np.asarray(times, dtype=float)
    if rates.self_term.ndim != 4 or rates.self_term.shape[0] != t.size:
        raise ValueError(
            f"rates must carry a leading time axis of length len(times) = {t.size} (terms of shape "
            f"[T, P, H, n]): got {tuple(rates.self_term.shape)}; stack them with HeadEnergyRates.stack"
        )
    if not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a finite number >= 0: got {tol!r}")
    sign = _sign(direction)
    per = (sign * rates.per_head).numpy()  # [T, P, H]
    scale = sum(
        np.abs(getattr(rates, k).numpy()).sum(-1) for k in ("self_term", "cross_term", "radial_term")
    ) + np.abs(rates.head_motion.numpy())
    bad = per < -tol * scale - 1e-300
    multi = per.sum(-1)
    mbad = multi < -tol * scale.sum(-1) - 1e-300
    terms = (sign * rates.term_sums()).numpy()  # [T, P, H, 4]
    k = np.argmin(per, axis=0)  # [P, H]
    P, H = per.shape[1:]
    pi, hi = np.meshgrid(np.arange(P), np.arange(H), indexing="ij")
    worst = np.minimum(per[k, pi, hi], 0.0)
    rel = np.where(scale[k, pi, hi] > 0, worst / np.maximum(scale[k, pi, hi], 1e-300), 0.0)
    resp = np.where(bad.any(0), np.asarray(TERMS)[np.argmin(terms[k, pi, hi], axis=-1)], "")
    km = np.argmin(multi, axis=0)
    mscale = scale.sum(-1)[km, np.arange(P)]
    mworst = np.minimum(multi[km, np.arange(P)], 0.0)
    return MonotonicityReport(
        multi_monotone=~mbad.any(0),
        multi_worst_relative=np.where(mscale > 0, mworst / np.maximum(mscale, 1e-300), 0.0),
        head_monotone=~bad.any(0),
        multi_negative_fraction=mbad.mean(0),
        head_negative_fraction=bad.mean(0),
        multi_worst=mworst,
        head_worst=worst,
        head_worst_relative=rel,
        head_worst_time=t[k],
        head_responsible=resp,
    )


def attention_entropy_production(
    x: torch.Tensor,
    D: torch.Tensor,
    xdot: torch.Tensor,
    beta: float = 1.0,
    *,
    head_rate: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Entropy production of the softmax rows (NOTES §7, [derived]):
    :math:`\dot S^h_i = -\mathrm{Cov}_{j\sim A^h_{i\cdot}}(s^h_{ij}, \dot s^h_{ij})`.

    With :math:`s = \beta\langle x_i, D x_j\rangle` this is :math:`-\beta^2\,\mathrm{Cov}(\langle x_i, D x_j
    \rangle, \tfrac{d}{dt}\langle x_i, D x_j\rangle)`, because :math:`\dot A_{ij} = A_{ij}(\dot s_{ij} -
    \sum_k A_{ik}\dot s_{ik})` and :math:`\sum_j \dot A_{ij} = 0` in :math:`\dot S = -\sum_j \dot A_{ij}\log
    A_{ij}`.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
    xdot : Tensor, shape=[P, n, d]
        Token velocity (e.g. :func:`multihead_velocity`).
    beta : float
    head_rate : Tensor or None
        :math:`\dot D_h` for moving heads.

    Returns
    -------
    Tensor, shape=[P, H, n]
        :math:`dS^h_i/dt` of :func:`attnflow.observables.attention_entropy`.
    """
    x, D, _, beta, _ = _inputs(x, D, beta, "softmax", "flat", None)
    if not isinstance(xdot, torch.Tensor) or xdot.shape != x.shape:
        raise ValueError(
            f"xdot must be a tensor of the tokens' shape {tuple(x.shape)}: got "
            f"{tuple(xdot.shape) if isinstance(xdot, torch.Tensor) else type(xdot).__name__}"
        )
    xd = xdot.to(torch.float64)
    s = _scores(x, D, beta)
    sd = beta * (torch.einsum("pid,phde,pje->phij", xd, D, x) + torch.einsum("pid,phde,pje->phij", x, D, xd))
    if head_rate is not None:
        sd = sd + _scores(x, check_heads(head_rate, x, "head_rate"), beta)
    A = torch.softmax(s, dim=-1)
    cov = (A * s * sd).sum(-1) - (A * s).sum(-1) * (A * sd).sum(-1)
    return -cov
