r"""Training losses: measure-to-measure distances between token clouds, and the two-class logistic risk.

Measure losses (each returns the mean over paths of a squared distance, so that it is smooth where the
clouds coincide):

* ``"ssw"``: the spherical sliced 2-Wasserstein distance of Bonet et al. (ICLR 2023), from POT
  (``ot.sliced_wasserstein_sphere`` through :func:`attnflow.observables.transport.sliced_wasserstein_sphere`
  with ``grad=True``), squared, in radians^2;
* ``"w2"``: the exact geodesic 2-Wasserstein distance (``ot.emd2``,
  :func:`attnflow.observables.transport.wasserstein2`), squared;
* ``"mmd"``: the squared maximum mean discrepancy with the Gaussian kernel
  :math:`k(x, y) = \exp(-|x - y|^2 / (2\sigma^2))` (Gretton et al., JMLR 13, 2012, eq. (3), biased
  V-statistic), :func:`mmd2` (POT has no MMD).

The sequence loss ``"logistic"`` is the mean binary cross-entropy of a linear readout's logits
(``torch.nn.functional.binary_cross_entropy_with_logits``, computed by log-sum-exp).
"""

from __future__ import annotations

import math

import torch

from ..observables.transport import sliced_wasserstein_sphere, wasserstein2

__all__ = ["CLASS_LOSSES", "MEASURE_LOSSES", "LOSSES", "logistic_loss", "measure_loss", "mmd2"]

#: kernel width sigma of the MMD loss (tokens on the unit sphere: |x - y| <= 2)
MMD_SIGMA = 0.5
#: random great circles of the sliced loss (fixed seed: the same frames at every training step)
SSW_PROJECTIONS = 64


def mmd2(x: torch.Tensor, y: torch.Tensor, *, sigma: float = MMD_SIGMA) -> torch.Tensor:
    r"""Squared MMD between the empirical laws of two clouds, Gaussian kernel (biased V-statistic).

    .. math:: \mathrm{MMD}^2 = \frac1{n^2}\sum_{ij} k(x_i, x_j) + \frac1{m^2}\sum_{ij} k(y_i, y_j)
              - \frac2{nm}\sum_{ij} k(x_i, y_j)

    (Gretton et al., JMLR 13, 2012, eq. (3)).

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    y : Tensor, shape=[P, m, d] or [1, m, d]
    sigma : float
        Kernel width > 0.

    Returns
    -------
    Tensor, shape=[P]
    """
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma (the MMD kernel width) must be a finite number > 0: got {sigma!r}")

    def k(a, b):
        sq = (a.unsqueeze(-2) - b.unsqueeze(-3)).square().sum(-1)
        return torch.exp(-sq / (2.0 * sigma * sigma)).mean(dim=(-1, -2))

    return k(x, x) + k(y, y) - 2.0 * k(x, y)


def _ssw2(x, y):
    return sliced_wasserstein_sphere(x, y, n_projections=SSW_PROJECTIONS, seed=0, grad=True).square()


def _w2sq(x, y):
    return wasserstein2(x, y).square()


#: measure-to-measure losses: name -> f(x, y) of shape [P]
MEASURE_LOSSES = {"ssw": _ssw2, "w2": _w2sq, "mmd": mmd2}
#: losses of the two-class sequence task
CLASS_LOSSES = ("logistic",)
#: every loss name a training config may give
LOSSES = (*MEASURE_LOSSES, *CLASS_LOSSES)


def measure_loss(name: str, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over paths of the measure loss ``name`` between clouds x (shape [P, n, d]) and target
    (shape [P, m, d], or [1, m, d]: one cloud compared with every path)."""
    if name not in MEASURE_LOSSES:
        raise ValueError(f"unknown measure loss {name!r}; valid: {', '.join(MEASURE_LOSSES)}")
    return MEASURE_LOSSES[name](x, target).mean()


def logistic_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of logits (shape [P]) against labels in {0, 1} (shape [P])."""
    return torch.nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
