r"""Optimal-transport distances between token clouds on :math:`S^{d-1}`, through POT.

A cloud of ``n`` tokens is the uniform empirical measure :math:`\mu = \frac1n\sum_i \delta_{x_i}`.
Exact distances use the network simplex ``ot.emd2``; sliced distances use the spherical sliced
Wasserstein distance of Bonet et al. (ICLR 2023) as implemented by ``ot.sliced_wasserstein_sphere``
and ``ot.sliced_wasserstein_sphere_unif`` (POT, Flamary et al., JMLR 2021).

Units. POT parametrises every great circle by :math:`[0, 1)` (circumference 1), so its spherical
sliced values are in units of *turns*. attnflow multiplies them by :math:`2\pi` and reports
**radians**, the unit of the geodesic cost: on :math:`S^1` (``d = 2``) every projection is an
isometry of the circle, so :func:`sliced_wasserstein_sphere` then equals the exact
:func:`wasserstein2` with ``cost="geodesic"``. Divide by :math:`2\pi` to recover POT's numbers.
All functions return distances :math:`W_2`, not squared costs :math:`W_2^2`.

Shapes: clouds of shape ``(P, n, d)`` or ``(n, d)`` (treated as ``P = 1``); results ``(P,)``.
"""

from __future__ import annotations

import math

import numpy as np
import ot
import torch

from ..geometry.sphere import exp_map, geodesic_distance, log_map, pairwise_geodesic_distance
from .inputs import as_batched_tokens, check_positive_scalar

__all__ = [
    "COSTS",
    "distance_to_nearest_dirac",
    "distance_to_uniform",
    "nearest_dirac_location",
    "sliced_wasserstein_sphere",
    "sliced_wasserstein_sphere_radians",
    "wasserstein2",
    "wasserstein2_distance",
    "wasserstein2_squared",
]

#: Ground costs accepted by the exact distances: squared geodesic or squared chordal distance.
COSTS = ("geodesic", "chordal")


def _check_cost(cost: str) -> str:
    if cost not in COSTS:
        raise ValueError(
            f"cost must be one of {COSTS}: got {cost!r}; 'geodesic' is arccos(<x, y>)^2, "
            "'chordal' is |x - y|^2"
        )
    return cost


def _check_count(value: int, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}: got {value!r}")
    return int(value)


def _paired_clouds(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate two clouds and broadcast their path axes (P or 1 each)."""
    x = torch.as_tensor(x) if isinstance(x, np.ndarray) else x  # NumPy clouds are taken as they are
    y = torch.as_tensor(y) if isinstance(y, np.ndarray) else y
    xb = as_batched_tokens(x, "x")
    yb = as_batched_tokens(y, "y")
    if xb.shape[-1] != yb.shape[-1]:
        raise ValueError(
            f"x and y must live on the same sphere S^(d-1): got d = {xb.shape[-1]} and d = {yb.shape[-1]}"
        )
    px, py = xb.shape[0], yb.shape[0]
    if px != py and 1 not in (px, py):
        raise ValueError(
            f"x and y must have the same number of paths P, or one of them a single cloud: got P = {px} "
            f"and P = {py}; pass clouds of shape (P, n, d) and (P, m, d)"
        )
    paths = max(px, py)
    return xb.expand(paths, *xb.shape[1:]), yb.expand(paths, *yb.shape[1:])


def _cost_matrix(x: torch.Tensor, y: torch.Tensor, cost: str) -> torch.Tensor:
    r"""Ground cost between all pairs, shape ``(P, n, m)``, accurate at small and large angles.

    :math:`\|x - y\|` and :math:`\|x + y\|` come from ``torch.cdist`` without the matrix-product
    shortcut (which, like :math:`\arccos\langle x, y\rangle`, loses :math:`\sqrt{\varepsilon}` near 0),
    and :math:`\theta = 2\,\mathrm{atan2}(\|x - y\|, \|x + y\|)` needs no clipping. Identical
    tokens therefore cost exactly 0, and small perturbations are measured to relative precision.
    """
    if cost == "chordal":
        return torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist").pow(2)
    return pairwise_geodesic_distance(x, y).pow(2)


def wasserstein2(x: torch.Tensor, y: torch.Tensor, *, cost: str = "geodesic") -> torch.Tensor:
    r"""Exact 2-Wasserstein distance W2 of two uniform token clouds: the square root of POT's ``ot.emd2``.

    Not POT's convention: ``ot.emd2`` returns the optimal *squared* cost :math:`W_2^2`; this returns
    :math:`W_2`. :func:`wasserstein2_distance` is the same function under a name that says so, and
    :func:`wasserstein2_squared` returns POT's value.

    .. math::
        W_2(\mu, \nu) = \Big(\min_{\pi \in \Pi(\frac1n\mathbf 1_n, \frac1m\mathbf 1_m)}
                        \sum_{i,j} \pi_{ij}\, c(x_i, y_j)\Big)^{1/2},\qquad
        c = \begin{cases}\arccos^2\langle x, y\rangle & \text{geodesic}\\
                         \|x - y\|^2 = 2 - 2\langle x, y\rangle & \text{chordal}\end{cases}

    The angle is evaluated as :math:`\theta = 2\,\mathrm{atan2}(\|x-y\|, \|x+y\|)` (equal to the
    clipped :math:`\arccos\langle x, y\rangle` but accurate near 0 and :math:`\pi`), so
    :math:`W_2(\mu, \mu) = 0` exactly and small perturbations of a cloud (input-stability studies,
    NOTES.md §4) are measured to relative precision. Since :math:`2\sin(\theta/2) \le \theta`, the
    chordal distance never exceeds the geodesic one. The cost matrix is differentiable in ``x`` and
    ``y``, and so is the result through POT's torch backend.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        First cloud, on :math:`S^{d-1}`.
    y : Tensor, shape=[P, m, d] or [m, d]
        Second cloud, same ``d``; ``m`` may differ from ``n``. A single cloud is compared with every
        path of the other argument.
    cost : {"geodesic", "chordal"}
        Ground cost (keyword only).

    Returns
    -------
    Tensor, shape=[P]
        :math:`W_2` (radians for ``"geodesic"``).

    References
    ----------
    R. Flamary et al., "POT: Python Optimal Transport", JMLR 22(78), 2021.

    Examples
    --------
    >>> x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    >>> y = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    >>> wasserstein2(x, y).item()  # doctest: +ELLIPSIS
    1.5707963...
    """
    _check_cost(cost)
    xb, yb = _paired_clouds(x, y)
    n, m = xb.shape[1], yb.shape[1]
    a = torch.full((n,), 1.0 / n, dtype=xb.dtype, device=xb.device)
    b = torch.full((m,), 1.0 / m, dtype=yb.dtype, device=yb.device)
    costs = _cost_matrix(xb, yb, cost)
    # the default 1e5 simplex iterations is too few for a few hundred tokens; POT warns if exceeded
    max_iter = max(100_000, 20 * n * m)
    squared = torch.stack([ot.emd2(a, b, matrix, numItermax=max_iter) for matrix in costs])
    return squared.clamp_min(0.0).sqrt()


def _stiefel_projections(dim: int, n_projections: int, seed: int, like: torch.Tensor) -> torch.Tensor:
    r"""Haar-distributed frames :math:`U \in V_{d,2}`, shape ``(L, d, 2)``, from a private generator.

    Drawn on the CPU in float64 with ``torch.Generator().manual_seed(seed)`` (the global torch RNG is
    left untouched, unlike POT's own ``seed=`` which calls ``torch.manual_seed``), so that the same
    seed gives the same projections on every device; QR with the sign of ``diag(R)`` fixed makes the
    factor unique, hence Haar (Mezzadri, Notices AMS 54, 2007).
    """
    generator = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(n_projections, dim, 2, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return (q * signs.unsqueeze(-2)).to(dtype=like.dtype, device=like.device)


def sliced_wasserstein_sphere(
    x: torch.Tensor, y: torch.Tensor, *, n_projections: int = 200, seed: int = 0, grad: bool = False
) -> torch.Tensor:
    r"""Spherical sliced 2-Wasserstein distance (Bonet et al., 2023) in radians: 2 pi times POT's value.

    Not POT's convention: ``ot.sliced_wasserstein_sphere`` measures on circles of circumference 1; this
    returns radians, :math:`2\pi` times POT's value on the same frames.
    :func:`sliced_wasserstein_sphere_radians` is the same function under a name that says so;
    divide by :math:`2\pi` for POT's value.

    .. math::
        SSW_2(\mu, \nu) = 2\pi\Big(\frac1L \sum_{l=1}^L W_2^2\big(P^{U_l}_\#\mu, P^{U_l}_\#\nu\big)
                          \Big)^{1/2},\qquad P^U(x) = \frac{U^\top x}{\|U^\top x\|},

    a Monte-Carlo average over ``L`` frames :math:`U_l` drawn uniformly on the Stiefel manifold
    :math:`V_{d,2}`; each projected problem is solved on the circle by ``ot.wasserstein_circle``
    (inside ``ot.sliced_wasserstein_sphere``, a binary search stopped at ``eps = 1e-6``). POT returns
    the distance (not its square) on circles of circumference 1; the factor :math:`2\pi` converts to
    radians. For ``d = 2`` every frame is an isometry of :math:`S^1`, so the value equals the exact
    geodesic :math:`W_2` of :func:`wasserstein2` up to the binary-search tolerance. The same seed gives
    the same frames for every path, so values of different paths are comparable. POT runs on detached
    CPU NumPy copies (its torch backend is about 20 times slower for this solver), so the result
    carries no gradient, unless ``grad=True``: then POT runs on the torch tensors themselves and the
    value is differentiable in ``x`` and ``y`` (training losses, :mod:`attnflow.training.losses`).

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        First cloud on :math:`S^{d-1}`.
    y : Tensor, shape=[P, m, d] or [m, d]
        Second cloud, same ``d``.
    n_projections : int
        Number ``L`` of random great circles, >= 1.
    seed : int
        Seed of the private generator of the frames, >= 0.
    grad : bool
        Keep the autograd graph (POT's torch backend) instead of detached NumPy copies.

    Returns
    -------
    Tensor, shape=[P]
        :math:`SSW_2` in radians (POT's value times :math:`2\pi`).

    References
    ----------
    C. Bonet, P. Berg, N. Courty, F. Septier, L. Drumetz and M.-T. Pham, "Spherical
    Sliced-Wasserstein", ICLR 2023.
    """
    n_projections = _check_count(n_projections, "n_projections", 1)
    seed = _check_count(seed, "seed", 0)
    xb, yb = _paired_clouds(x, y)
    if grad:
        frames_t = _stiefel_projections(xb.shape[-1], n_projections, seed, xb)
        values_t = [
            ot.sliced_wasserstein_sphere(xp, yp, n_projections=n_projections, projections=frames_t, p=2)
            for xp, yp in zip(xb, yb, strict=True)
        ]
        return 2.0 * math.pi * torch.stack(values_t)
    frames = _stiefel_projections(xb.shape[-1], n_projections, seed, xb).cpu().numpy()
    # POT's circle binary search is a Python loop; its NumPy backend runs it ~20x faster than torch
    xs, ys = xb.detach().cpu().numpy(), yb.detach().cpu().numpy()
    values = [
        ot.sliced_wasserstein_sphere(xp, yp, n_projections=n_projections, projections=frames, p=2)
        for xp, yp in zip(xs, ys, strict=True)
    ]
    return torch.as_tensor(2.0 * math.pi * np.asarray(values, dtype=np.float64), dtype=xb.dtype).to(xb.device)


def distance_to_uniform(x: torch.Tensor, n_projections: int = 200, seed: int = 0) -> torch.Tensor:
    r"""Spherical sliced 2-Wasserstein distance from the cloud to the uniform law on :math:`S^{d-1}`.

    Computed by ``ot.sliced_wasserstein_sphere_unif``: for every frame :math:`U_l` the projected cloud
    is compared with the uniform law on the circle by the closed form of Bonet et al. (2023, Prop. 3)
    (the projection of the uniform law on :math:`S^{d-1}` is uniform on the circle), and

    .. math::
        SSW_2(\mu, \sigma) = 2\pi\Big(\frac1L\sum_l W_2^2(P^{U_l}_\#\mu, \mathrm{Unif}(S^1))\Big)^{1/2}.

    Reported in radians like :func:`sliced_wasserstein_sphere`. For ``n`` equally spaced points on
    :math:`S^1` the value is :math:`\pi / (n\sqrt 3)`. Large for a clustered cloud, close to 0 for a
    well-spread one. Like :func:`sliced_wasserstein_sphere`, POT runs on detached CPU NumPy copies
    (faster than its torch backend here), so the result carries no gradient.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`.
    n_projections : int
        Number of random great circles, >= 1.
    seed : int
        Seed of the private generator of the frames, >= 0.

    Returns
    -------
    Tensor, shape=[P]
        :math:`SSW_2` to the uniform law, in radians.
    """
    n_projections = _check_count(n_projections, "n_projections", 1)
    seed = _check_count(seed, "seed", 0)
    xb = as_batched_tokens(x, "x")
    frames = _stiefel_projections(xb.shape[-1], n_projections, seed, xb).cpu().numpy()
    values = [
        ot.sliced_wasserstein_sphere_unif(xp, n_projections=n_projections, projections=frames)
        for xp in xb.detach().cpu().numpy()
    ]
    return torch.as_tensor(2.0 * math.pi * np.asarray(values, dtype=np.float64), dtype=xb.dtype).to(xb.device)


def _dirac_cost(x: torch.Tensor, z: torch.Tensor, cost: str) -> torch.Tensor:
    r"""Mean cost :math:`\frac1n\sum_i c(x_i, z)`, shape ``(P,)``, with small-angle-safe distances:
    :math:`\theta = 2\,\mathrm{atan2}(\|x - z\|, \|x + z\|)` and :math:`\|x - z\|^2` from differences."""
    if cost == "chordal":
        return torch.linalg.vector_norm(x - z.unsqueeze(1), dim=-1).pow(2).mean(dim=-1)
    return geodesic_distance(x, z.unsqueeze(1)).pow(2).mean(dim=-1)


def nearest_dirac_location(
    x: torch.Tensor, *, cost: str = "geodesic", max_iter: int = 100, tol: float = 1e-12
) -> torch.Tensor:
    r"""Point :math:`z^\star \in S^{d-1}` whose Dirac mass is closest in :math:`W_2` to the cloud.

    :math:`W_2^2(\mu, \delta_z) = \frac1n\sum_i c(x_i, z)` (the only coupling sends everything to
    :math:`z`), so :math:`z^\star` minimises the mean cost:

    * ``"chordal"``: :math:`\frac1n\sum_i\|x_i - z\|^2 = 2 - 2\langle\bar x, z\rangle`, minimised
      exactly by the normalised mean :math:`z^\star = \bar x/\|\bar x\|` (any point if
      :math:`\bar x = 0`; the first token is returned then).
    * ``"geodesic"``: :math:`z^\star` is a Karcher (Riemannian centre of mass) mean. Starting from the
      normalised mean, Riemannian gradient steps
      :math:`z \leftarrow \exp_z\big(t\,\frac1n\sum_i \log_z x_i\big)` (the gradient of the mean cost
      is :math:`-\frac2n\sum_i\log_z x_i`) with :math:`t = 1` (the classical fixed-point iteration of
      Buss & Fillmore, 2001; Afsari, 2011), halving :math:`t` until the mean cost does not increase
      (beyond a round-off slack of :math:`8\varepsilon` relative), until
      :math:`\|\frac1n\sum_i\log_z x_i\| \le` ``tol`` or ``max_iter`` steps. For a cloud inside an
      open hemisphere the minimiser is unique (Afsari, 2011) and this is it; for a spread cloud it is
      a local minimiser near the normalised mean, so the reported distance is an upper bound on the
      global minimum, never above the value at the normalised mean (up to round-off).

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`.
    cost : {"geodesic", "chordal"}
        Ground cost.
    max_iter : int
        Largest number of Karcher steps (geodesic cost only), >= 0.
    tol : float
        Stop when the mean log map is shorter than this, > 0.

    Returns
    -------
    Tensor, shape=[P, d]
        Unit vectors :math:`z^\star`.

    References
    ----------
    S. R. Buss and J. P. Fillmore, "Spherical averages and applications to spherical splines and
    interpolation", ACM Trans. Graph. 20(2), 2001. B. Afsari, "Riemannian L^p center of mass:
    existence, uniqueness, and convexity", Proc. AMS 139(2), 2011.
    """
    _check_cost(cost)
    max_iter = _check_count(max_iter, "max_iter", 0)
    tol = check_positive_scalar(tol, "tol")
    xb = as_batched_tokens(x, "x")
    mean = xb.mean(dim=1)
    norm = torch.linalg.vector_norm(mean, dim=-1, keepdim=True)
    degenerate = norm <= 1e-12
    z = torch.where(degenerate, xb[:, 0], mean / norm.clamp_min(1e-300))
    if cost == "chordal":
        return z
    value = _dirac_cost(xb, z, cost)
    done = torch.zeros(xb.shape[0], dtype=torch.bool, device=xb.device)
    for _ in range(max_iter):
        step = log_map(z.unsqueeze(1), xb).mean(dim=1)
        done |= torch.linalg.vector_norm(step, dim=-1) <= tol
        if done.all():
            break
        scale = torch.ones_like(value)
        accepted = done.clone()
        # near the minimum the mean cost is flat to round-off, so "no increase" is judged with a slack
        # of a few ulps; otherwise round-off would reject the (contracting) full Karcher step
        slack = 8 * torch.finfo(value.dtype).eps * value
        for _ in range(40):
            candidate = exp_map(z, scale.unsqueeze(-1) * step)
            candidate_value = _dirac_cost(xb, candidate, cost)
            better = ~accepted & (candidate_value <= value + slack)
            z = torch.where(better.unsqueeze(-1), candidate, z)
            value = torch.where(better, candidate_value, value)
            accepted |= better
            if accepted.all():
                break
            scale = torch.where(accepted, scale, scale / 2)
        # no decrease even for a tiny step: at a minimum to round-off
        done |= ~accepted
    return z


def distance_to_nearest_dirac(
    x: torch.Tensor, *, cost: str = "geodesic", max_iter: int = 100, tol: float = 1e-12
) -> torch.Tensor:
    r""":math:`W_2` from the cloud to the closest single Dirac mass on the sphere.

    .. math::
        \min_{z\in S^{d-1}} W_2(\mu, \delta_z) = \Big(\min_z \frac1n\sum_i c(x_i, z)\Big)^{1/2},

    with the minimiser of :func:`nearest_dirac_location`: for ``"chordal"`` the value is exactly
    :math:`\sqrt{2 - 2\|\bar x\|}`; for ``"geodesic"`` it is the square root of the Fréchet variance
    at the Karcher mean found there (an upper bound on the global minimum for very spread clouds).
    Distances are evaluated with :math:`\theta = 2\,\mathrm{atan2}(\|x - z\|, \|x + z\|)`, accurate
    at small angles. Zero exactly for a cloud collapsed to one point: the measure of a single cluster.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`.
    cost : {"geodesic", "chordal"}
        Ground cost.
    max_iter, tol
        Passed to :func:`nearest_dirac_location`.

    Returns
    -------
    Tensor, shape=[P]
        :math:`W_2` to the nearest Dirac mass (radians for ``"geodesic"``).
    """
    z = nearest_dirac_location(x, cost=cost, max_iter=max_iter, tol=tol)
    xb = x.unsqueeze(0) if x.ndim == 2 else x
    return _dirac_cost(xb, z, cost).sqrt()


def wasserstein2_distance(x: torch.Tensor, y: torch.Tensor, *, cost: str = "geodesic") -> torch.Tensor:
    r"""W2 itself (the square root of POT's ``ot.emd2``): :func:`wasserstein2` under a name that says so.

    Parameters
    ----------
    x, y : Tensor, shape=[P, n, d] / [P, m, d] or [n, d] / [m, d]
        Clouds on :math:`S^{d-1}`.
    cost : {"geodesic", "chordal"}

    Returns
    -------
    Tensor, shape=[P]
        :math:`W_2`.
    """
    return wasserstein2(x, y, cost=cost)


def wasserstein2_squared(x: torch.Tensor, y: torch.Tensor, *, cost: str = "geodesic") -> torch.Tensor:
    r"""POT's convention: the optimal squared cost :math:`W_2^2`, what ``ot.emd2`` returns for the cost
    matrix :math:`c(x_i, y_j)` of :func:`wasserstein2` (squared geodesic or squared chordal distance).

    Parameters
    ----------
    x, y : Tensor, shape=[P, n, d] / [P, m, d] or [n, d] / [m, d]
        Clouds on :math:`S^{d-1}`.
    cost : {"geodesic", "chordal"}

    Returns
    -------
    Tensor, shape=[P]
        :math:`W_2^2` (radians squared for ``"geodesic"``).

    Examples
    --------
    >>> x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    >>> y = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    >>> round(wasserstein2_squared(x, y, cost="chordal").item(), 12)  # |x - y|^2
    2.0
    """
    return wasserstein2(x, y, cost=cost).square()


def sliced_wasserstein_sphere_radians(
    x: torch.Tensor, y: torch.Tensor, *, n_projections: int = 200, seed: int = 0, grad: bool = False
) -> torch.Tensor:
    r""":func:`sliced_wasserstein_sphere` under a name that says its unit: radians, :math:`2\pi` times
    POT's ``ot.sliced_wasserstein_sphere`` (circles of circumference 1) on the same frames.

    Parameters
    ----------
    x, y : Tensor, shape=[P, n, d] / [P, m, d] or [n, d] / [m, d]
        Clouds on :math:`S^{d-1}`.
    n_projections, seed, grad
        As in :func:`sliced_wasserstein_sphere`.

    Returns
    -------
    Tensor, shape=[P]
        :math:`SSW_2` in radians.
    """
    return sliced_wasserstein_sphere(x, y, n_projections=n_projections, seed=seed, grad=grad)
