r"""Interaction energy of the token cloud and its explicit time derivative through the weights.

With scores :math:`s^h_{ij} = \beta\langle x_i, D_h x_j\rangle` and :math:`U^h_{ij} = e^{s^h_{ij}}`
(``docs/design.md``; NOTES.md §3):

* interaction energy (arXiv 2605.18870, eq. (20), with the inverse temperature of the companion paper)

  .. math:: \mathcal{E}(x, D) = \frac{1}{2\beta H n^2}\sum_{h=1}^{H}\sum_{i,j=1}^{n} U^h_{ij};

* per-head energies of the companion paper (arXiv 2605.04279, seeds/000)
  :math:`E_h = \frac{1}{2\beta n^2}\sum_{ij} U^h_{ij}`, so that :math:`\sum_h E_h = H\,\mathcal{E}`;
* explicit time derivative at frozen tokens for heads moving by :math:`dD_h = f_h\,dt + g_h\,dW_h`
  (the term :math:`\partial_t\mathcal{E}` of identity (116) and of its discrete form (147)):

  .. math:: \partial_t\mathcal{E}\,dt = \sum_h \langle f_h, C_h\rangle_F\,dt
            + \frac{\beta}{2}\sum_h g_h^2 \sum_{ij} \frac{U^h_{ij}\,\mathrm{Var}(x_i^\top\xi x_j)}{2Hn^2}\,dt,
     \qquad C_h = \sum_{ij}\frac{U^h_{ij}\,x_i x_j^\top}{2Hn^2},

  with :math:`\mathrm{Var}(x^\top\xi y) = (1 + \langle x, y\rangle^2)/2` for the symmetric noise
  :math:`\xi = (Z + Z^\top)/2` and :math:`= 1` for the full noise :math:`\xi = Z` (unit tokens).

Derivation of the Ito part (implemented in :mod:`attnflow.dynamics.assembly`):
for :math:`\varphi(D) = e^{\beta x^\top D y}`, :math:`d\varphi = \varphi\,\beta\,x^\top dD\,y
+ \tfrac12\varphi\,\beta^2\,d\langle x^\top D y\rangle_t` and :math:`d\langle x^\top D y\rangle_t
= g^2\,\mathrm{Var}(x^\top\xi y)\,dt`; for the symmetric noise
:math:`\mathrm{Var} = \tfrac14\sum_{ab}(x_a y_b + y_a x_b)^2 = \tfrac12(|x|^2|y|^2 + \langle x,y\rangle^2)`.
Multiplying by the prefactor :math:`1/(2\beta Hn^2)` gives the formula above.

All quantities are computed by the one shared evaluation of the field,
:func:`attnflow.dynamics.field.evaluate_torch`, and the per-step ledger terms,
:func:`attnflow.dynamics.field.model_ledger_rates` (formulas in :mod:`attnflow.dynamics.assembly`);
this module only validates inputs and selects outputs, so the observables agree with what the simulation
loop records.

Shapes: tokens ``x`` ``(P, n, d)``; heads ``D`` ``(P, H, d, d)`` (or ``(H, d, d)``, the same heads for
every path). Results are float64.
"""

from __future__ import annotations

import math

import torch

from ..dynamics.field import model_ledger_rates
from ..model.weights import WeightProcess
from .inputs import field_eval

__all__ = ["energy_time_derivative", "head_energies", "interaction_energy"]


def interaction_energy(x: torch.Tensor, D: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    r"""Interaction energy of the tokens under the heads (arXiv 2605.18870, eq. (20)).

    .. math:: \mathcal{E} = \frac{1}{2\beta H n^2}\sum_{h,i,j}\exp(\beta\langle x_i, D_h x_j\rangle)

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
        Tokens on S^{d-1}.
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
        Score matrices (symmetric or not).
    beta : float
        Inverse temperature (> 0; paper: 1).

    Returns
    -------
    Tensor, shape=[P], float64

    Examples
    --------
    >>> import torch, attnflow as af
    >>> x = af.tokens.uniform(2, 8, 3, seed=0)
    >>> E = interaction_energy(x, torch.eye(3).expand(1, 3, 3).double())
    >>> E.shape
    torch.Size([2])
    """
    return field_eval(x, D, beta)[2].energy


def head_energies(x: torch.Tensor, D: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    r"""Per-head energies of the companion paper (arXiv 2605.04279, seeds/000; NOTES.md §5).

    .. math:: E_h = \frac{1}{2\beta n^2}\sum_{i,j}\exp(\beta\langle x_i, M_h x_j\rangle),
       \qquad \sum_h E_h = E_{\mathrm{multi}} = H\,\mathcal{E}

    where :math:`\mathcal{E}` is :func:`interaction_energy` (normalised by 1/H, eq. (20)).

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
    beta : float

    Returns
    -------
    Tensor, shape=[P, H], float64
    """
    _, Dv, fe = field_eval(x, D, beta)
    # head_mass = sum_ij U_ij / (2 H n^2), so E_h = H * head_mass / beta.
    return fe.head_mass * (Dv.shape[1] / float(beta))


def energy_time_derivative(
    x: torch.Tensor, D: torch.Tensor, t: float, process: WeightProcess, beta: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Explicit time derivative of the energy at frozen tokens: drift part and Ito part.

    For heads following :math:`dD_h = f_h(D, t)\,dt + g_h(D, t)\,dW_h` (``process``),

    .. math:: \partial_t\mathcal{E}^{\mathrm{drift}} = \frac{1}{2Hn^2}\sum_{h,i,j} U^h_{ij}\,
              x_i^\top f_h x_j,\qquad
              \partial_t\mathcal{E}^{\mathrm{Ito}} = \frac{\beta}{2}\sum_h g_h^2\,\frac{1}{2Hn^2}
              \sum_{i,j} U^h_{ij}\,\mathrm{Var}(x_i^\top\xi x_j),

    the integrand :math:`\partial_s\mathcal{E}` of identity (116) / (147) of arXiv 2605.18870
    (NOTES.md §3; symmetric noise: Var = (1 + <x_i,x_j>^2)/2, full noise: Var = 1). The sum of the two
    is the drift of :math:`\mathcal{E}(x, D_t)` in Ito's formula at frozen x.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
        Heads D(t).
    t : float
        Time at which f and g are evaluated.
    process : WeightProcess
        Any weight process (Constant, OrnsteinUhlenbeck, Oscillating, CustomProcess, ...); its
        ``noise`` attribute selects the symmetric or full noise.
    beta : float

    Returns
    -------
    drift, ito : Tensor, shape=[P], float64
    """
    if not isinstance(process, WeightProcess):
        raise TypeError(
            f"process must be a WeightProcess (Constant, OrnsteinUhlenbeck, Oscillating, CustomProcess): "
            f"got {type(process).__name__}"
        )
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise ValueError(f"t must be a finite number: got {t!r}")
    model, Dv, fe = field_eval(x, D, beta, weights=process, t=float(t))
    process.validate(Dv.shape[1], Dv.shape[-1])
    return model_ledger_rates(
        model, fe, Dv, float(t), process.drift(Dv, float(t)), process.diffusion(Dv, float(t))
    )
