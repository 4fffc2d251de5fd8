r"""Kernel estimate of the tokens' differential entropy and the free energy of noisy tokens.

With Brownian tokens of intensity eps (generator eps Delta, :attr:`attnflow.TransformerModel.token_noise`),
the mean-field density u solves :math:`\partial_t u = \varepsilon\Delta u - s\,\nabla\cdot(u\,v[u])`
(NOTES.md §10). For unnormalised attention (``usa``) with symmetric heads, :math:`v[u] = \nabla
\frac{\delta\mathcal E}{\delta u}`, so this is the Wasserstein gradient flow of the free energy

.. math:: \mathcal F = -s\,\mathcal E - \varepsilon S, \qquad S = -\int u\log u\,d\sigma,

which therefore decreases (*derived*: the first variation of
:math:`\mathcal E = \frac1{2\beta}\iint e^{\beta\langle x, Dy\rangle}du\,du` is
:math:`\frac1\beta\int e^{\beta\langle x, Dy\rangle}du(y)`, whose sphere gradient is the USA velocity). For
``descent`` (s = -1) it is :math:`\mathcal E - \varepsilon S`. For softmax attention the flow carries the
mobility and F is not a Lyapunov function in general.

The entropy of a token cloud is estimated by leave-one-out resubstitution with the von Mises-Fisher
kernel :math:`K_\kappa(x, y) = C_d(\kappa)\,e^{\kappa\langle x, y\rangle}`,
:math:`C_d(\kappa) = \kappa^{d/2-1}/((2\pi)^{d/2} I_{d/2-1}(\kappa))` (a density w.r.t. the surface measure):

.. math:: \hat S = -\frac1n\sum_i\log\Big(\frac1{n-1}\sum_{j\ne i}K_\kappa(x_i, x_j)\Big),

with bandwidth :math:`h = \kappa^{-1/2}` (radians) and, by default, :math:`h = n^{-1/(d+3)}`: the
Silverman exponent :math:`-1/(m + 4)` of a kernel estimate on the m = d - 1 dimensional sphere (Hall, Watson
and Cabrera, Biometrika 1987, for the estimator; the constant 1 is our choice, stated here). Computed in log
space (log-sum-exp, :func:`scipy.special.ive` for the Bessel function).
"""

from __future__ import annotations

import math

import torch
from scipy.special import ive

from .energy import interaction_energy
from .inputs import as_batched_tokens

__all__ = ["default_bandwidth", "free_energy", "kernel_entropy", "vmf_log_normaliser"]


def default_bandwidth(n: int, d: int) -> float:
    """The default angular bandwidth h = n^(-1/(d+3)) (radians) of :func:`kernel_entropy`."""
    return float(n) ** (-1.0 / (d + 3))


def vmf_log_normaliser(kappa: float, d: int) -> float:
    r"""log C_d(kappa) of the von Mises-Fisher density on S^{d-1}, stable for large kappa.

    :math:`\log C_d = (d/2-1)\log\kappa - (d/2)\log 2\pi - \log I_{d/2-1}(\kappa)`, with
    :math:`\log I_\nu(\kappa) = \log\mathrm{ive}(\nu, \kappa) + \kappa`.
    """
    nu = d / 2.0 - 1.0
    return nu * math.log(kappa) - (d / 2.0) * math.log(2 * math.pi) - (math.log(ive(nu, kappa)) + kappa)


def kernel_entropy(x: torch.Tensor, bandwidth: float | None = None) -> torch.Tensor:
    r"""Leave-one-out von Mises-Fisher kernel estimate of the differential entropy of a token cloud.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on S^{d-1} (n >= 2).
    bandwidth : float or None
        Angular bandwidth h > 0 in radians (kappa = 1/h^2); None: :func:`default_bandwidth` (n^(-1/(d+3))).

    Returns
    -------
    Tensor, shape=[P], float64
        :math:`\hat S` (module docstring); log |S^{d-1}| for the uniform law (log 4 pi on S^2).

    Examples
    --------
    >>> import attnflow as af
    >>> S = kernel_entropy(af.tokens.uniform(1, 2000, 3, seed=0))
    >>> abs(float(S[0]) - math.log(4 * math.pi)) < 0.05
    True
    """
    xb = as_batched_tokens(x, min_tokens=2).to(torch.float64)
    n, d = xb.shape[-2], xb.shape[-1]
    h = default_bandwidth(n, d) if bandwidth is None else bandwidth
    if isinstance(h, bool) or not isinstance(h, (int, float)) or not math.isfinite(h) or h <= 0:
        raise ValueError(
            f"bandwidth must be a finite angle > 0 in radians: got {bandwidth!r}; give e.g. bandwidth=0.3 or "
            f"None for the default n^(-1/(d+3)) = {default_bandwidth(n, d):.3g}"
        )
    kappa = 1.0 / h**2
    logk = kappa * (xb @ xb.transpose(-1, -2))  # [P, n, n]
    logk.diagonal(dim1=-2, dim2=-1).fill_(-math.inf)  # leave one out
    log_f = torch.logsumexp(logk, dim=-1) - math.log(n - 1) + vmf_log_normaliser(kappa, d)
    return -log_f.mean(-1)


def free_energy(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float,
    eps: float,
    direction: str,
    bandwidth: float | None = None,
) -> dict[str, torch.Tensor]:
    r"""The free energy :math:`\mathcal F = -s\,\mathcal E - \varepsilon\hat S` of noisy tokens.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
    beta : float
    eps : float
        Token noise intensity (>= 0).
    direction : {"ascent", "descent"}
    bandwidth : float or None
        Angular bandwidth of the entropy estimate (:func:`kernel_entropy`).

    Returns
    -------
    dict of Tensor, shape=[P], float64
        ``energy`` E (eq. (20)), ``entropy`` S, ``free_energy`` F; for descent F = E - eps S.
    """
    signs = {"ascent": 1.0, "descent": -1.0}
    if direction not in signs:
        raise ValueError(f"direction must be 'ascent' or 'descent': got {direction!r}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0 (the token noise): got {eps!r}; e.g. eps=0.1")
    E = interaction_energy(x, D, beta)
    S = kernel_entropy(x, bandwidth)
    return {"energy": E, "entropy": S, "free_energy": -signs[direction] * E - eps * S}
