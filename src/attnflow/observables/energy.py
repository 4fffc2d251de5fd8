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

Derivation of the Ito part (used by :mod:`attnflow.dynamics.ledger_terms`):
for :math:`\varphi(D) = e^{\beta x^\top D y}`, :math:`d\varphi = \varphi\,\beta\,x^\top dD\,y
+ \tfrac12\varphi\,\beta^2\,d\langle x^\top D y\rangle_t` and :math:`d\langle x^\top D y\rangle_t
= g^2\,\mathrm{Var}(x^\top\xi y)\,dt`; for the symmetric noise
:math:`\mathrm{Var} = \tfrac14\sum_{ab}(x_a y_b + y_a x_b)^2 = \tfrac12(|x|^2|y|^2 + \langle x,y\rangle^2)`.
Multiplying by the prefactor :math:`1/(2\beta Hn^2)` gives the formula above.

All quantities are computed by the one shared evaluation of the field,
:func:`attnflow.dynamics.field.evaluate_torch`, and the per-step ledger terms,
:func:`attnflow.dynamics.ledger_terms.step_terms`; this module only validates inputs and selects
outputs, so the observables agree with what the simulation loop records.

Shapes: tokens ``x`` ``(P, n, d)``; heads ``D`` ``(P, H, d, d)`` (or ``(H, d, d)``, the same heads for
every path). Results are float64.
"""

from __future__ import annotations

import math

import torch

from ..dynamics.field import FieldEval, evaluate_torch
from ..dynamics.ledger_terms import step_terms
from ..geometry.sphere import check_on_sphere
from ..model.transformer import TransformerModel
from ..model.weights import WeightProcess

__all__ = ["energy_time_derivative", "head_energies", "interaction_energy"]

#: Tolerance on | |x_i| - 1 | for tokens passed to the observables (float64 and float32 inputs).
SPHERE_TOL = {torch.float64: 1e-6, torch.float32: 1e-5}


def _check_tokens(x: torch.Tensor, geometry: str = "sphere", name: str = "x") -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape (P, n, d): got {type(x).__name__}; "
            "convert with torch.as_tensor(x, dtype=torch.float64)"
        )
    if x.ndim != 3 or x.shape[1] < 1 or x.shape[2] < 2:
        raise ValueError(
            f"{name} must have shape (P, n, d) with n >= 1 and d >= 2: got {tuple(x.shape)}; "
            "add a leading path axis with x.unsqueeze(0)"
        )
    if x.dtype not in SPHERE_TOL:
        raise ValueError(f"{name} must be float32 or float64: got {x.dtype}; use x.double()")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} must be finite: found {int((~torch.isfinite(x)).sum())} non-finite entries")
    if geometry == "sphere":
        check_on_sphere(x, name, tol=SPHERE_TOL[x.dtype])
    return x


def _check_heads(D: torch.Tensor, x: torch.Tensor, name: str = "D") -> torch.Tensor:
    P, _, d = x.shape
    if not isinstance(D, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape (P, H, d, d) or (H, d, d): got {type(D).__name__}"
        )
    if D.ndim == 3:
        D = D.unsqueeze(0).expand(P, *D.shape)
    if D.ndim != 4 or D.shape[0] != P or D.shape[1] < 1 or D.shape[-2:] != (d, d):
        raise ValueError(
            f"{name} must have shape (P, H, d, d) = ({P}, H, {d}, {d}) or (H, {d}, {d}) to match x of shape "
            f"{tuple(x.shape)}: got {tuple(D.shape)}"
        )
    if not torch.isfinite(D).all():
        raise ValueError(f"{name} must be finite: found {int((~torch.isfinite(D)).sum())} non-finite entries")
    return D.to(x.dtype)


def _model(
    beta: float,
    *,
    attention: str = "softmax",
    geometry: str = "sphere",
    causal: bool = False,
    weights: WeightProcess | None = None,
) -> TransformerModel:
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite number > 0: got {beta!r}")
    kw = {} if weights is None else {"weights": weights}
    # The direction only signs the token velocity; observables here are unsigned.
    return TransformerModel(
        direction="descent",
        attention=attention,
        beta=float(beta),
        geometry=geometry,
        causal=causal,
        backend="torch",
        **kw,
    )


def _field_eval(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float = 1.0,
    *,
    values: torch.Tensor | None = None,
    attention: str = "softmax",
    geometry: str = "sphere",
    causal: bool = False,
    weights: WeightProcess | None = None,
    t: float = 0.0,
    ledger: bool = True,
) -> tuple[TransformerModel, torch.Tensor, FieldEval]:
    """Validate inputs and run the shared field evaluation (internal helper of the observables).

    Returns the model used, the validated heads (P, H, d, d) and the :class:`FieldEval`.
    """
    model = _model(beta, attention=attention, geometry=geometry, causal=causal, weights=weights)
    x = _check_tokens(x, geometry)
    D = _check_heads(D, x)
    V = None if values is None else _check_heads(values, x, "values")
    if V is not None and V.shape[1] != D.shape[1]:
        raise ValueError(
            f"values have {V.shape[1]} heads but D has {D.shape[1]}; pass one value matrix per head"
        )
    return model, D, evaluate_torch(model, x, D, V, t, ledger=ledger)


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
    return _field_eval(x, D, beta)[2].energy


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
    _, Dv, fe = _field_eval(x, D, beta)
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
    model, Dv, fe = _field_eval(x, D, beta, weights=process, t=float(t))
    process.validate(Dv.shape[1], Dv.shape[-1])
    terms = step_terms(
        model, fe, Dv, float(t), process.drift(Dv, float(t)), process.diffusion(Dv, float(t)), None
    )
    return terms.dtE_drift, terms.dtE_ito
