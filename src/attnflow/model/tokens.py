"""Initial token configurations x(0) in (S^{d-1})^n, batched over paths: shape (P, n, d).

Every generator takes a ``seed``; path p uses its own stream (see :mod:`attnflow.random`), so the
initial condition of a path does not depend on how many paths are drawn.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..geometry.sphere import Sphere, check_on_sphere, project
from ..random import path_generators, path_seed

_DEFAULT_DTYPE = torch.float64

#: The largest von Mises-Fisher concentration. Wood's sampler needs 1 - x0, about (d - 1) / (2 kappa),
#: to stay far above the float64 resolution 2.2e-16 near 1 (at kappa ~ 1e15 it rounds to 0 and
#: log(1 - x0^2) fails); 1e10 keeps five digits of margin (an angular spread of ~1e-5).
KAPPA_MAX = 1e10
#: The largest octahedral noise: |base + eps|^2 must stay finite in float64 (sqrt(1.8e308) = 1.3e154).
NOISE_MAX = 1e150


def _check_real(x, name: str) -> None:
    if torch.is_tensor(x) and x.is_complex() or not torch.is_tensor(x) and np.iscomplexobj(x):
        raise ValueError(
            f"{name} must be real-valued: got a complex array; pass its real part (x.real) if the "
            "imaginary part is meant to be zero"
        )


def _check_sizes(paths: int, n: int, d: int) -> None:
    for name, val, low in (("paths", paths, 1), ("n", n, 1), ("d", d, 2)):
        if isinstance(val, bool) or not isinstance(val, int) or val < low:
            raise ValueError(f"{name} must be an integer >= {low}: got {val!r}")


def uniform(
    paths: int, n: int, d: int, *, seed: int, dtype: torch.dtype = _DEFAULT_DTYPE, device="cpu"
) -> torch.Tensor:
    """i.i.d. uniform tokens on S^{d-1} (normalised standard Gaussians).

    Returns
    -------
    Tensor, shape=[paths, n, d]
    """
    _check_sizes(paths, n, d)
    gens = path_generators(seed, paths, "tokens")
    return torch.stack([Sphere().uniform((n,), d, g, dtype) for g in gens]).to(device)


def octahedral(
    paths: int,
    n: int,
    d: int = 3,
    *,
    seed: int,
    noise: float = 0.05,
    dtype: torch.dtype = _DEFAULT_DTYPE,
    device="cpu",
) -> torch.Tensor:
    """The authors' initial tokens (NOTES.md §2): vertices +-e_k chosen uniformly, plus N(0, noise^2).

    Each token picks one of the 2d signed basis vectors uniformly at random, adds isotropic Gaussian
    noise of standard deviation ``noise`` and is normalised (arXiv 2605.18870, Sec. 6 set-up).

    Returns
    -------
    Tensor, shape=[paths, n, d]
    """
    _check_sizes(paths, n, d)
    if not (0 <= noise <= NOISE_MAX):
        raise ValueError(
            f"noise must be a number in [0, {NOISE_MAX:g}] (so that the noisy tokens' norms stay finite): "
            f"got {noise!r}; the default is 0.05"
        )
    gens = path_generators(seed, paths, "tokens")
    out = []
    for g in gens:
        idx = torch.randint(0, 2 * d, (n,), generator=g)
        base = torch.zeros(n, d, dtype=dtype)
        sign = torch.where(idx % 2 == 0, 1.0, -1.0).to(dtype)
        base[torch.arange(n), idx // 2] = sign
        eps = torch.randn(n, d, generator=g, dtype=dtype) * noise
        out.append(project(base + eps))
    return torch.stack(out).to(device)


def von_mises_fisher(
    paths: int,
    n: int,
    d: int,
    *,
    seed: int,
    clusters: int = 3,
    kappa: float = 50.0,
    dtype: torch.dtype = _DEFAULT_DTYPE,
    device="cpu",
) -> torch.Tensor:
    """Tokens from a mixture of ``clusters`` von Mises-Fisher laws with concentration ``kappa``.

    Cluster means are uniform on the sphere; each token picks a cluster uniformly. Sampling uses
    Wood's (1994) rejection algorithm for the cosine w = <x, mu>, exact for every d >= 2 (NumPy
    generator seeded from the path's token stream).

    Returns
    -------
    Tensor, shape=[paths, n, d]
    """
    _check_sizes(paths, n, d)
    if isinstance(clusters, bool) or not isinstance(clusters, int) or clusters < 1:
        raise ValueError(f"clusters must be an integer >= 1: got {clusters!r}")
    if not (0 < kappa <= KAPPA_MAX):
        raise ValueError(
            f"kappa must be a number in (0, {KAPPA_MAX:g}] (Wood's sampler needs 1 - 1/kappa to differ "
            f"from 1 in float64): got {kappa!r}; for tighter clusters give the tokens with init 'file'"
        )
    b = (d - 1) / (2 * kappa + math.sqrt(4 * kappa**2 + (d - 1) ** 2))
    x0 = (1 - b) / (1 + b)
    c = kappa * x0 + (d - 1) * math.log(1 - x0**2)
    out = []
    for p in range(paths):
        rng = np.random.default_rng(path_seed(seed, p, "tokens"))
        means = rng.standard_normal((clusters, d))
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        lab = rng.integers(0, clusters, n)
        w = np.empty(n)
        filled = 0
        while filled < n:
            m = 2 * (n - filled) + 8
            z = rng.beta((d - 1) / 2, (d - 1) / 2, m)
            u = rng.random(m)
            ww = (1 - (1 + b) * z) / (1 - (1 - b) * z)
            ok = kappa * ww + (d - 1) * np.log(1 - x0 * ww) - c >= np.log(u)
            acc = ww[ok][: n - filled]
            w[filled : filled + acc.size] = acc
            filled += acc.size
        mu = means[lab]
        v = rng.standard_normal((n, d))
        v -= (v * mu).sum(-1, keepdims=True) * mu
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        x = w[:, None] * mu + np.sqrt(np.clip(1 - w**2, 0, None))[:, None] * v
        out.append(project(torch.from_numpy(x)).to(dtype))
    return torch.stack(out).to(device)


def from_array(
    x, *, paths: int | None = None, dtype: torch.dtype = _DEFAULT_DTYPE, device="cpu"
) -> torch.Tensor:
    """Validate user tokens and return them with shape (P, n, d).

    Parameters
    ----------
    x : array-like, shape=[n, d] or [P, n, d]
        Unit vectors. A single cloud ``(n, d)`` is repeated over ``paths`` (default 1).
    """
    _check_real(x, "tokens")
    t = torch.as_tensor(x, dtype=dtype, device=device)
    if t.ndim == 2:
        t = t.unsqueeze(0).expand(paths or 1, -1, -1).clone()
    elif t.ndim == 3:
        if paths is not None and t.shape[0] != paths:
            raise ValueError(
                f"tokens have {t.shape[0]} paths but paths={paths}; pass (n, d) to repeat one cloud "
                "or drop the paths argument"
            )
    else:
        raise ValueError(f"tokens must have shape (n, d) or (P, n, d): got shape {tuple(t.shape)}")
    if t.shape[-1] < 2:
        raise ValueError(f"token dimension d must be >= 2: got d={t.shape[-1]}")
    check_on_sphere(t, "tokens")
    return t
