"""Plain NumPy baseline: one step of the paper's scheme, dense per head.

What an implementation of Sec. 6 of arXiv 2605.18870 written with NumPy looks like: for each
head form the ``n x n`` score matrix, its softmax, the velocity (eq. (10)), the energy ledger
(NOTES.md section 3: energy eq. (20), harmonic-mean mobility eq. (36), G^2 of Lemma 4.12,
Ghat^2, drift and Ito moments) and the projected Euler update
``x <- Pi(x + s dt v)``. Rows are processed in blocks so that one block of scores stays
below ``block_bytes``; the arithmetic is the dense ``O(P H n^2)`` one, vectorised by NumPy
(matrix products through BLAS, ``exp`` through NumPy's SIMD loops).

Run ``python benchmarks/numpy_baseline.py`` for a one-line timing at the paper's size.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["numpy_field", "numpy_step"]


def numpy_field(
    x: np.ndarray,
    D: np.ndarray,
    V: np.ndarray | None,
    beta: float,
    *,
    geometry: str = "sphere",
    ledger: bool = True,
    block_bytes: int = 2**27,
) -> dict[str, np.ndarray]:
    """Velocity and ledger with dense per-head score blocks (no causal mask).

    Parameters
    ----------
    x : ndarray, shape (P, n, d)
    D, V : ndarray, shape (P, H, d, d); ``V=None`` means ``V = D``
    beta : float
    geometry : {"sphere", "flat"}
    ledger : bool
    block_bytes : int
        Upper bound on one ``(P, rows, n)`` block of scores.

    Returns
    -------
    dict
        The keys of :func:`attnflow.dynamics.numba_backend.fused_field`.
    """
    V = D if V is None else V
    npaths, n, d = x.shape
    nheads = D.shape[1]
    rows = max(1, min(n, block_bytes // (x.itemsize * npaths * n)))
    xt = np.swapaxes(x, 1, 2)
    velocity = np.zeros_like(x)
    lse = np.empty((npaths, nheads, n), dtype=x.dtype)
    grad = np.zeros_like(x)
    energy = np.zeros(npaths, dtype=x.dtype)
    second = np.zeros((npaths, nheads, d, d), dtype=x.dtype)
    ito = np.zeros((npaths, nheads), dtype=x.dtype)
    for h in range(nheads):
        dh, vh = D[:, h], V[:, h]
        kx = beta * np.matmul(dh, xt)  # (P, d, n): beta D_h x_j
        ybar = np.empty_like(x)
        y = np.empty_like(x)
        z = np.zeros_like(x)
        for r0 in range(0, n, rows):
            xb = x[:, r0 : r0 + rows]
            s = np.matmul(xb, kx)  # (P, rows, n)
            smax = s.max(axis=-1, keepdims=True)
            u = np.exp(s - smax, out=s)
            ell = u.sum(axis=-1, keepdims=True)
            lse[:, h, r0 : r0 + rows] = (smax + np.log(ell))[..., 0]
            ux = np.matmul(u, x)
            ybar[:, r0 : r0 + rows] = ux / ell
            if ledger:
                scale = np.exp(smax)
                y[:, r0 : r0 + rows] = scale * ux
                z += np.matmul(np.swapaxes(u, 1, 2), scale * xb)
                gram = np.matmul(xb, xt)
                rowwise = np.einsum("pij,pij->pi", u, 1 + gram * gram)
                ito[:, h] += np.einsum("pi,pi->p", scale[..., 0], rowwise)
        velocity += np.matmul(ybar, np.swapaxes(vh, 1, 2))
        if ledger:
            grad += np.matmul(y, np.swapaxes(dh, 1, 2)) + np.matmul(z, dh)
            energy += np.exp(lse[:, h].astype(np.float64)).sum(axis=-1).astype(x.dtype)
            second[:, h] = np.matmul(np.swapaxes(x, 1, 2), y)
    velocity /= nheads
    norm = 2.0 * nheads * n * n
    out = {"velocity": _tangent(velocity, x, geometry), "lse": lse}
    if ledger:
        grad = _tangent(grad / (2.0 * nheads * n), x, geometry)
        neg = -lse.astype(np.float64)
        top = neg.max(axis=1)
        log_b = -np.log(n) - (top + np.log(np.exp(neg - top[:, None]).mean(axis=1)))
        speed2 = np.sum(out["velocity"] ** 2, axis=-1)
        out.update(
            grad=grad,
            energy=energy / (beta * norm),
            G2=np.mean(np.exp(log_b) * speed2, axis=-1).astype(x.dtype),
            Ghat2=np.mean(np.sum(out["velocity"] * grad, axis=-1), axis=-1),
            second_moment=second / norm,
            ito_moment=ito / norm,
        )
    return out


def _tangent(v: np.ndarray, x: np.ndarray, geometry: str) -> np.ndarray:
    if geometry == "flat":
        return v
    return v - np.sum(v * x, axis=-1, keepdims=True) * x


def numpy_step(
    x: np.ndarray,
    D: np.ndarray,
    V: np.ndarray | None,
    beta: float,
    dt: float,
    *,
    sign: float = -1.0,
    ledger: bool = True,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One projected Euler step ``x <- Pi(x + sign dt v)`` (Sec. 6) plus the ledger at ``x``."""
    out = numpy_field(x, D, V, beta, ledger=ledger)
    y = x + sign * dt * out["velocity"]
    return y / np.linalg.norm(y, axis=-1, keepdims=True), out


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x0 = rng.normal(size=(20, 300, 3))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    z0 = rng.normal(size=(20, 100, 3, 3))
    heads = z0 + np.swapaxes(z0, -1, -2)
    for dtype in (np.float32, np.float64):
        xs, ds = x0.astype(dtype), heads.astype(dtype)
        numpy_step(xs, ds, None, 1.0, 0.01)
        start = time.perf_counter()
        numpy_step(xs, ds, None, 1.0, 0.01)
        seconds = time.perf_counter() - start
        print(f"{dtype.__name__}: {seconds:.3f} s, {20 * 100 * 300**2 / seconds:.3g} pairs/s")
