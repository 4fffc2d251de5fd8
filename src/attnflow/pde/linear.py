r"""Closed-form linear growth rates of modes about the uniform density (our derivation, checked in tests).

Scalar heads :math:`D_h = a_h I` (values :math:`V_h = D_h`). Then :math:`P^\perp(x)\,a_h y\,e^{\beta a_h
\langle x, y\rangle} = \beta^{-1}\nabla_x e^{\beta a_h\langle x,y\rangle}`, so the velocity of eq. (81) is a
gradient: :math:`v = \frac{s}{\beta H}\sum_h\nabla(K_h * u)` (USA) or
:math:`\frac{s}{\beta H}\sum_h\nabla\log(K_h * u)` (SA), with the zonal kernel
:math:`K_h(x, y) = e^{\beta a_h\langle x, y\rangle}`. By Funk-Hecke, :math:`K_h` acts on a Fourier mode
:math:`e^{ik\theta}` (S^1) or a spherical harmonic of degree ``l`` (S^2) as the factor
:math:`\kappa_l = 2\pi I_k(\beta a)` or :math:`4\pi i_l(\beta a)`. Linearising
:math:`\partial_t u + \nabla\cdot(u v) = \varepsilon\Delta u` about the uniform density
:math:`\bar u = 1/|S^{d-1}|` (a stationary state for every :math:`a_h`) with
:math:`\Delta Y_l = -\Lambda_l Y_l`, :math:`\Lambda_l = k^2` or :math:`l(l+1)`, gives the exact rate of
the mode

.. math:: \lambda_l = \Lambda_l\Big(\frac{s}{\beta H}\sum_h \rho_l(\beta a_h) - \varepsilon\Big),\qquad
          \rho_l(z) = \begin{cases} I_k(z) \ \text{or}\ i_l(z) & \text{USA} \\
          I_k(z)/I_0(z) \ \text{or}\ i_l(z)/i_0(z) & \text{SA.}\end{cases}

With ``s = +1`` (ascent) every mode grows when :math:`\varepsilon = 0`; the uniform state loses
stability below the critical noise :math:`\varepsilon_c = \frac{1}{\beta H}\sum_h\rho_1(\beta a_h)`
(degree 1 is the first to go: :math:`\rho_l` decreases with ``l``). With descent every mode decays.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ive

__all__ = ["critical_noise", "mode_growth_rate"]


def _rho(z: float, deg: int, d: int, attention: str) -> float:
    if d == 2:
        num, den = ive(deg, z), ive(0, z)
    elif d == 3:
        num, den = (
            ive(deg + 0.5, z) * math.sqrt(math.pi / (2 * z)),
            ive(0.5, z) * math.sqrt(math.pi / (2 * z)),
        )
    else:
        raise ValueError(f"closed-form rates exist on S^1 (d = 2) and S^2 (d = 3): got d = {d}")
    if attention == "softmax":
        return float(num / den)
    if attention == "usa":
        return float(num * math.exp(z))
    raise ValueError(f"closed-form rates for attention 'softmax' or 'usa': got {attention!r}")


def _scales(a) -> np.ndarray:
    a = np.atleast_1d(np.asarray(a, dtype=np.float64))
    if a.ndim != 1 or not np.isfinite(a).all() or (a <= 0).any():
        raise ValueError(f"head scales a_h (D_h = a_h I) must be finite and > 0: got {a!r}")
    return a


def mode_growth_rate(
    degree: int,
    *,
    d: int,
    beta: float,
    a=1.0,
    attention: str = "softmax",
    sign: float = 1.0,
    eps: float = 0.0,
) -> float:
    """Exact linear growth rate of a degree-``degree`` mode about the uniform density (module docstring).

    Parameters
    ----------
    degree : int
        |k| on S^1, l on S^2 (>= 1).
    d : {2, 3}
    beta : float
    a : float or array-like
        Scales of the heads D_h = a_h I.
    attention : {"softmax", "usa"}
    sign : float
        +1 ascent, -1 descent.
    eps : float
        Token noise intensity.

    Examples
    --------
    >>> round(mode_growth_rate(1, d=2, beta=1.0), 6)  # I_1(1)/I_0(1)
    0.44639
    """
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise ValueError(f"degree must be an integer >= 1: got {degree!r}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0: got {eps!r}")
    lam = degree**2 if d == 2 else degree * (degree + 1)
    a = _scales(a)
    mean = sum(_rho(beta * ah, int(degree), d, attention) for ah in a) / (beta * a.size)
    return float(lam * (sign * mean - eps))


def critical_noise(*, d: int, beta: float, a=1.0, attention: str = "softmax") -> float:
    """eps_c = (1/(beta H)) sum_h rho_1(beta a_h): below it the uniform state is unstable (ascent)."""
    a = _scales(a)
    return float(sum(_rho(beta * ah, 1, d, attention) for ah in a) / (beta * a.size))
