r"""Clustering measures of a token cloud on :math:`S^{d-1}`, none of which hides a threshold.

Tokens cluster along the attention flow (Geshkovski, Letrouit, Polyanskiy & Rigollet, "A mathematical
perspective on Transformers", 2023; NOTES.md §5). The measures here say *how much* without choosing a
cut-off: mean and minimum pairwise inner product, norm of the mean token and effective rank of the
Gram matrix. The one measure that needs a scale, the number of clusters, is returned together with its
dependence on that scale (:func:`cluster_count_sensitivity`), so that no single threshold is hidden.

Shapes (``docs/design.md``): tokens ``x`` of shape ``(P, n, d)`` (``P`` paths), or ``(n, d)`` for one
cloud, which is treated as ``P = 1``. Every function returns one value per path, shape ``(P,)``.

What ``simulate`` returns is taken as it is (issue 31): the measures :func:`mean_pairwise_inner_product`,
:func:`mean_token_norm`, :func:`min_pairwise_inner_product`, :func:`gram_effective_rank` and
:func:`cluster_count` accept a torch tensor, a NumPy array, or an xarray ``Dataset`` (its ``positions``) or
``DataArray`` with dims ``(..., "token", "dim")``; for xarray input the result is a labelled ``DataArray``
over the other dims (``("path", "time")`` for a run, with its coordinates), e.g.
``mean_pairwise_inner_product(ds).sel(time=5.0)``. :func:`time_to_one_cluster` reads a run the same way.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
import xarray as xr
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform

from ..geometry.sphere import pairwise_geodesic_distance as _pairwise_geodesic
from .inputs import as_batched_tokens, check_positive_scalar

__all__ = [
    "cluster_count",
    "cluster_count_sensitivity",
    "gram_effective_rank",
    "mean_pairwise_inner_product",
    "mean_token_norm",
    "min_pairwise_inner_product",
    "pairwise_geodesic_distance",
    "time_to_one_cluster",
]


def _positions(x, name: str = "x") -> xr.DataArray:
    """The token DataArray of a run: a Dataset's ``positions``, or the DataArray itself (dims checked)."""
    if isinstance(x, xr.Dataset):
        if "positions" not in x:
            raise ValueError(
                f"{name} is a Dataset without a 'positions' variable (variables: {sorted(x.data_vars)}); "
                "record the tokens (simulate(..., positions=True), record.positions: true in a config)"
            )
        x = x["positions"]
    if x.dims[-2:] != ("token", "dim"):
        raise ValueError(
            f"{name} must have the dims (..., 'token', 'dim') of a run's positions: got {x.dims}; "
            "transpose it with .transpose(..., 'token', 'dim')"
        )
    return x


def _accepts_runs(fn: Callable) -> Callable:
    """Let a per-cloud measure take NumPy arrays and xarray runs, labelled over the leading dims."""

    @functools.wraps(fn)
    def wrapper(x, *args, **kwargs):
        if isinstance(x, (xr.Dataset, xr.DataArray)):
            da = _positions(x)
            lead = da.dims[:-2]
            values = np.asarray(da.values)
            flat = torch.as_tensor(values.reshape((-1, *values.shape[-2:])))
            out = fn(flat, *args, **kwargs).cpu().numpy().reshape(values.shape[:-2])
            coords = {k: v for k, v in da.coords.items() if set(v.dims) <= set(lead)}
            return xr.DataArray(out, dims=lead, coords=coords, name=fn.__name__)
        if isinstance(x, np.ndarray):
            x = torch.as_tensor(x)
        return fn(x, *args, **kwargs)

    return wrapper


def _gram(x: torch.Tensor) -> torch.Tensor:
    r"""Gram matrices :math:`G_{ij} = \langle x_i, x_j\rangle`, shape ``(P, n, n)``."""
    return x @ x.transpose(-1, -2)


def pairwise_geodesic_distance(x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
    r"""Great-circle distances between all pairs of tokens (batched front end of
    :func:`attnflow.geometry.pairwise_geodesic_distance`).

    .. math::
        \theta_{ij} = 2\,\operatorname{atan2}(\|x_i - y_j\|, \|x_i + y_j\|)
                     = \arccos\langle x_i, y_j\rangle

    The atan2 form needs no clipping, gives exactly 0 for identical tokens and keeps relative
    precision at small angles, where ``arccos`` has an error floor of about 1.5e-8 in float64.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`.
    y : Tensor, shape=[P, m, d] or [m, d], optional
        Second cloud (same ``P`` and ``d``); ``None`` means ``y = x``.

    Returns
    -------
    Tensor, shape=[P, n, m]
        Distances in radians, in :math:`[0, \pi]`.

    Examples
    --------
    >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    >>> pairwise_geodesic_distance(x)[0, 0, 1].item()  # doctest: +ELLIPSIS
    1.5707963...
    """
    xb = as_batched_tokens(x, "x")
    yb = xb if y is None else as_batched_tokens(y, "y")
    if yb.shape[-1] != xb.shape[-1] or yb.shape[0] != xb.shape[0]:
        raise ValueError(
            f"x and y must have the same number of paths P and dimension d: got x {tuple(xb.shape)} and "
            f"y {tuple(yb.shape)}; pass clouds of shape (P, n, d) and (P, m, d)"
        )
    return _pairwise_geodesic(xb, yb)


@_accepts_runs
def mean_pairwise_inner_product(x: torch.Tensor) -> torch.Tensor:
    r"""Mean inner product over distinct pairs of tokens.

    .. math::
        \bar\rho = \frac{1}{n(n-1)} \sum_{i \neq j} \langle x_i, x_j\rangle
                 = \frac{\|\sum_i x_i\|^2 - \sum_i \|x_i\|^2}{n(n-1)}

    It equals 1 for a single cluster and is the variable :math:`\rho` of the equiangular reduced model
    (NOTES.md §5) when all pairwise inner products are equal. The second form costs :math:`O(nd)`.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`, ``n >= 2``.

    Returns
    -------
    Tensor, shape=[P]
        Values in :math:`[-1/(n-1), 1]`.
    """
    xb = as_batched_tokens(x, "x", min_tokens=2)
    n = xb.shape[1]
    total = xb.sum(dim=1).pow(2).sum(dim=-1)
    diagonal = xb.pow(2).sum(dim=(1, 2))
    return (total - diagonal) / (n * (n - 1))


@_accepts_runs
def mean_token_norm(x: torch.Tensor) -> torch.Tensor:
    r"""Norm of the mean token, :math:`\|\frac1n \sum_i x_i\|`.

    For tokens on the sphere :math:`\|\bar x\|^2 = \frac{1}{n} + \frac{n-1}{n}\bar\rho` with
    :math:`\bar\rho` the :func:`mean_pairwise_inner_product`; it is 1 exactly for a single cluster and
    close to 0 for a spread (or balanced antipodal) cloud.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`.

    Returns
    -------
    Tensor, shape=[P]
        Values in :math:`[0, 1]`.
    """
    xb = as_batched_tokens(x, "x")
    return torch.linalg.vector_norm(xb.mean(dim=1), dim=-1)


@_accepts_runs
def min_pairwise_inner_product(x: torch.Tensor) -> torch.Tensor:
    r"""Smallest inner product over distinct pairs, :math:`\min_{i\neq j}\langle x_i, x_j\rangle`.

    It is the cosine of the diameter of the cloud: all tokens lie in one cap of geodesic diameter
    :math:`\arccos(\min_{i\ne j}\langle x_i, x_j\rangle)`, and it tends to 1 only when *every* token has
    joined a single cluster.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`, ``n >= 2``.

    Returns
    -------
    Tensor, shape=[P]
        Values in :math:`[-1, 1]`.
    """
    xb = as_batched_tokens(x, "x", min_tokens=2)
    n = xb.shape[1]
    eye = torch.eye(n, dtype=torch.bool, device=xb.device)
    return _gram(xb).masked_fill(eye, math.inf).amin(dim=(-1, -2))


@_accepts_runs
def gram_effective_rank(x: torch.Tensor) -> torch.Tensor:
    r"""Effective rank of the Gram matrix :math:`G = X X^\top` (Roy & Vetterli, 2007).

    .. math::
        \operatorname{erank}(G) = \exp\Big(-\sum_k p_k \log p_k\Big),\qquad
        p_k = \frac{\lambda_k}{\sum_l \lambda_l},

    with :math:`\lambda_k = \sigma_k(X)^2` the eigenvalues of :math:`G` (squared singular values of the
    token matrix, :math:`\sum_l\lambda_l = \operatorname{tr} G = n` on the sphere) and
    :math:`0\log 0 = 0`. It is 1 when every token lies on one line (:math:`\pm` one direction) and
    :math:`\min(n, d)` when the tokens form a tight frame, e.g. an orthonormal basis.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`.

    Returns
    -------
    Tensor, shape=[P]
        Values in :math:`[1, \min(n, d)]`.

    References
    ----------
    O. Roy and M. Vetterli, "The effective rank: a measure of effective dimensionality",
    15th European Signal Processing Conference (EUSIPCO), 2007.

    Examples
    --------
    >>> round(gram_effective_rank(torch.eye(3, dtype=torch.float64)).item(), 12)
    3.0
    """
    xb = as_batched_tokens(x, "x")
    eigenvalues = torch.linalg.svdvals(xb).pow(2)
    p = eigenvalues / eigenvalues.sum(dim=-1, keepdim=True)
    entropy = -torch.special.xlogy(p, p).sum(dim=-1)
    return entropy.exp()


def _merge_heights(x: torch.Tensor) -> np.ndarray:
    r"""Sorted single-linkage merge heights, shape ``(P, n - 1)``, from scipy ``linkage`` per path.

    Single-linkage heights are non-decreasing along the tree, and each merge at height :math:`\le t`
    joins two clusters, so ``fcluster(tree, t, criterion="distance")`` yields exactly
    :math:`n - \#\{\text{heights} \le t\}` clusters; counting heights serves every threshold at once.
    """
    if x.shape[1] == 1:
        return np.zeros((x.shape[0], 0))
    heights = []
    for matrix in pairwise_geodesic_distance(x).detach().cpu().numpy():
        tree = linkage(squareform(matrix, checks=False), method="single")
        heights.append(np.sort(tree[:, 2]))
    return np.array(heights).reshape(x.shape[0], x.shape[1] - 1)


def _counts(x: torch.Tensor, thresholds: np.ndarray) -> np.ndarray:
    """Cluster counts, shape ``(P, K)``, for validated tokens ``(P, n, d)`` and thresholds ``(K,)``."""
    heights = _merge_heights(x)
    merged = np.stack([np.searchsorted(row, thresholds, side="right") for row in heights])
    return (x.shape[1] - merged).astype(np.int64)


def _check_thresholds(thresholds: Sequence[float] | np.ndarray | torch.Tensor) -> np.ndarray:
    values = np.asarray(
        thresholds.detach().cpu().numpy() if isinstance(thresholds, torch.Tensor) else thresholds,
        dtype=np.float64,
    )
    if values.ndim != 1 or values.size == 0:
        raise ValueError(
            f"thresholds must be a non-empty 1-D sequence of geodesic distances: got shape {values.shape}; "
            "pass e.g. numpy.geomspace(1e-3, numpy.pi, 50)"
        )
    if not (np.all(np.isfinite(values)) and np.all(values > 0)):
        raise ValueError(
            f"thresholds must be finite and > 0 (radians): got min {values.min()!r}; "
            "pass positive geodesic distances"
        )
    return values


@_accepts_runs
def cluster_count(x: torch.Tensor, threshold: float) -> torch.Tensor:
    r"""Number of clusters by single linkage on geodesic distance, cut at ``threshold``.

    Two tokens belong to the same cluster when a chain of tokens joins them with every link of
    geodesic length :math:`\theta_{ij} = \arccos\operatorname{clip}\langle x_i, x_j\rangle \le`
    ``threshold``: scipy ``linkage(method="single")``, cut as ``fcluster(criterion="distance")`` would
    (counted from the merge heights, :math:`n - \#\{\text{heights} \le t\}`).
    The count depends on the threshold; use :func:`cluster_count_sensitivity` to see how.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`.
    threshold : float
        Largest geodesic link length (radians) inside a cluster, > 0.

    Returns
    -------
    Tensor, shape=[P], dtype=int64
        Number of clusters per path, in :math:`[1, n]`.
    """
    threshold = check_positive_scalar(threshold, "threshold")
    xb = as_batched_tokens(x, "x")
    counts = _counts(xb, np.array([threshold]))[:, 0]
    return torch.as_tensor(counts, dtype=torch.int64, device=xb.device)


def cluster_count_sensitivity(
    x: torch.Tensor, thresholds: Sequence[float] | np.ndarray | torch.Tensor
) -> xr.DataArray:
    r"""Single-linkage cluster counts for a range of thresholds, so the dependence on the cut is visible.

    The tree is built once per path; the count at threshold :math:`t` is the number of flat clusters
    whose single-linkage (cophenetic) distance is :math:`\le t`, as in :func:`cluster_count`. A count
    that stays constant over a wide range of :math:`t` is a well-defined number of clusters; one that
    changes steadily is not.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`.
    thresholds : sequence of float, shape=[K]
        Geodesic distances in radians, each > 0 (for example ``numpy.geomspace(1e-3, numpy.pi, 50)``).

    Returns
    -------
    xarray.DataArray, dims=("path", "threshold"), shape=[P, K], dtype=int64
        Counts, with coordinates ``path = 0..P-1`` and ``threshold`` (radians).
    """
    values = _check_thresholds(thresholds)
    xb = as_batched_tokens(x, "x")
    counts = _counts(xb, values)
    return xr.DataArray(
        counts,
        dims=("path", "threshold"),
        coords={"path": np.arange(xb.shape[0]), "threshold": values},
        name="cluster_count",
        attrs={
            "long_name": "number of single-linkage clusters",
            "threshold_units": "rad (geodesic distance on S^(d-1))",
        },
    )


def time_to_one_cluster(run, threshold: float) -> xr.DataArray:
    r"""First recorded time at which a run's tokens form one cluster (:func:`cluster_count` = 1), per path.

    The particle counterpart of the reduced model's clustering time: single linkage on geodesic distance,
    cut at ``threshold`` (radians), evaluated at every recorded time; NaN for a path that never reaches one
    cluster within the run. The answer depends on the threshold and on the record interval (a time between
    two records is not seen); :func:`cluster_count_sensitivity` shows the dependence on the threshold.

    Parameters
    ----------
    run : xarray.Dataset or xarray.DataArray
        What :func:`attnflow.simulate` returns (or its ``positions``), dims ``(path, time, token, dim)``.
    threshold : float
        Largest geodesic link length inside a cluster (radians), > 0.

    Returns
    -------
    xarray.DataArray, dims=("path",)
        Times (the run's time unit), NaN where one cluster is never reached.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> x = np.zeros((1, 3, 2, 2)); x[..., 0] = 1.0                 # two tokens at (1, 0) ...
    >>> x[0, 0, 1] = [0.0, 1.0]                                      # ... apart at t = 0 only
    >>> run = xr.DataArray(x, dims=("path", "time", "token", "dim"), coords={"time": [0.0, 0.5, 1.0]})
    >>> time_to_one_cluster(run, 0.1).values.tolist()
    [0.5]
    """
    da = _positions(run, "run")
    if "time" not in da.dims:
        raise ValueError(
            f"run must have a 'time' dim (what simulate returns): got dims {da.dims}; "
            "for one cloud use cluster_count(x, threshold) == 1"
        )
    if "path" not in da.dims:
        da = da.expand_dims("path")
    da = da.transpose("path", "time", "token", "dim")
    counts = cluster_count(da, threshold).values  # (P, T)
    times = (
        np.asarray(da["time"].values, dtype=np.float64)
        if "time" in da.coords
        else np.arange(da.sizes["time"], dtype=np.float64)
    )
    one = counts == 1
    first = np.where(one.any(axis=1), times[np.argmax(one, axis=1)], np.nan)
    coords = {"path": da["path"].values} if "path" in da.coords else {}
    return xr.DataArray(
        first,
        dims=("path",),
        coords=coords,
        name="time_to_one_cluster",
        attrs={"threshold_rad": float(threshold), "long_name": "first recorded time with one cluster"},
    )
