"""The S^2 forcing F(tau) of arXiv 2605.18870 Sec. 6 (NOTES.md §2), written independently of attnflow."""

import numpy as np


def forcing_s2(tau: float) -> np.ndarray:
    """F(tau), a symmetric 3 x 3 matrix."""
    c, s = np.cos(tau), np.sin(tau)
    return np.array(
        [
            [2 + 1.5 * c, np.sin(2 * tau), s],
            [np.sin(2 * tau), 2 + 1.5 * s, np.cos(2 * tau)],
            [s, np.cos(2 * tau), 2 + 1.5 * np.cos(tau + np.pi / 4)],
        ]
    )
