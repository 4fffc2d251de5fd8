"""Thinning a run for a web page: at most ``max_tokens`` tokens of one path at ``max_frames`` times, and
time series at ``max_points`` times. What was kept is returned with the data, so the page can say it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

__all__ = ["CloudFrames", "even_indices", "thin_cloud"]


def even_indices(n: int, k: int) -> np.ndarray:
    """At most ``k`` indices of ``range(n)``, evenly spread, always with the first and the last.

    Examples
    --------
    >>> even_indices(10, 4).tolist()
    [0, 3, 6, 9]
    >>> even_indices(3, 10).tolist()
    [0, 1, 2]
    """
    if n < 0 or k < 1:
        raise ValueError(f"even_indices needs n >= 0 and k >= 1: got n={n}, k={k}; pass k >= 1")
    if n <= k:
        return np.arange(n)
    if k == 1:
        return np.array([n - 1])
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(int))


@dataclass(frozen=True)
class CloudFrames:
    """Tokens of one path at a few times, ready for the page.

    Attributes
    ----------
    times : ndarray, shape=[F]
    frames : ndarray, shape=[F, m, 3]
        Token coordinates (a d = 2 cloud gets z = 0; d > 3 shows the first three coordinates).
    path : int
        The path shown.
    note : str
        What was kept, in words (paths, tokens, times, coordinates).
    """

    times: np.ndarray
    frames: np.ndarray
    path: int
    note: str


def thin_cloud(ds: xr.Dataset, *, max_tokens: int = 400, max_frames: int = 60, path: int = 0) -> CloudFrames:
    """Path ``path`` of ``ds.positions`` at most ``max_tokens`` tokens (every k-th) and ``max_frames`` times.

    Only the selected entries are read from a lazy (Zarr) dataset.

    Raises
    ------
    ValueError
        If ``ds`` holds no ``positions``, ``path`` is out of range, or a limit is below 1.
    """
    if "positions" not in ds:
        raise ValueError(
            "the run recorded no token positions (record.positions = false); rerun it with "
            "record.positions: true to see its token cloud"
        )
    if max_tokens < 1 or max_frames < 1:
        raise ValueError(
            f"max_tokens and max_frames must be >= 1: got {max_tokens}, {max_frames}; pass positive limits"
        )
    pos = ds["positions"].transpose("path", "time", "token", "dim")
    P, T, n, d = (int(s) for s in pos.shape)
    if not 0 <= path < P:
        raise ValueError(f"path must lie in [0, {P - 1}]: got {path}; choose a recorded path")
    ti = even_indices(T, max_frames)
    step = max(1, int(np.ceil(n / max_tokens)))
    tok = np.arange(0, n, step)
    x = np.asarray(pos.isel(path=path, time=ti, token=tok).values, dtype=float)
    if d < 3:
        x = np.concatenate([x, np.zeros((*x.shape[:2], 3 - d))], axis=-1)
    else:
        x = x[..., :3]
    parts = [f"path {path} of {P}"]
    parts.append(f"{len(tok)} of {n} tokens" + (f" (every {step}-th)" if step > 1 else ""))
    parts.append(
        f"{len(ti)} of {T} recorded times" + (" (evenly spaced, first and last kept)" if len(ti) < T else "")
    )
    if d > 3:
        parts.append(f"first 3 of {d} coordinates")
    elif d < 3:
        parts.append(f"d = {d}: drawn in the plane z = 0")
    times = np.asarray(ds["time"].values, dtype=float)[ti]
    return CloudFrames(times=times, frames=x, path=path, note="; ".join(parts))
