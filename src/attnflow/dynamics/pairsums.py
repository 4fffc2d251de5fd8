r"""The record every field backend returns: pair sums over tokens, nothing assembled.

For scores :math:`s^h_{ij} = \beta\langle x_i, D_h x_j\rangle` (masked to :math:`j \le i` when causal) and
a row shift :math:`M^h_i` chosen by the backend (any finite value; the sums are exact for every choice),
with :math:`e_{ij} = e^{s_{ij} - M_i}`:

* ``row_shift`` :math:`M_i` and ``row_sum`` :math:`\sum_j e_{ij}`, so that the row log-sum-exp is
  :math:`\mathrm{lse}_i = M_i + \log\sum_j e_{ij}` and :math:`\sum_j U_{ij} = e^{M_i}\sum_j e_{ij}`;
* ``row_x`` :math:`\sum_j e_{ij} x_j`;
* ``row_q`` :math:`\sum_j e_{ij}\langle x_i, x_j\rangle^2` and, off the sphere, ``row_r2``
  :math:`\sum_j e_{ij}|x_j|^2` (the Ito sums);
* ``col_shift`` :math:`c_h` and ``col_x`` :math:`\sum_i e^{s_{ij} - c_h} x_i` (column sums of
  :math:`U`), or ``None`` when :math:`U^h` is symmetric (then they equal the row sums);
* ``attn_x`` :math:`\sum_j A_{ij} x_j` for the attention kinds whose weights are not the softmax of the
  scores (USA, ReLU, sigmoid, Sinkhorn), or for a backend that computes the softmax mean itself;
  ``None`` means :math:`A = \mathrm{softmax}` and the mean is ``row_x / row_sum``.

The ledger sums (``row_q``, ``row_r2``, ``col_x``) are ``None`` when the ledger was not requested.
:mod:`attnflow.dynamics.assembly` turns a record into the velocity and the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["PairSums"]


@dataclass(frozen=True)
class PairSums:
    """Pair sums of one field evaluation (see the module docstring for the definitions).

    Attributes
    ----------
    row_shift, row_sum : Tensor, shape=[P, H, n], float64
    row_x : Tensor or None, shape=[P, H, n, d], float64
    row_q, row_r2 : Tensor or None, shape=[P, H, n], float64
    col_shift : Tensor or None, shape=[P, H], float64
    col_x : Tensor or None, shape=[P, H, n, d], float64
    attn_x : Tensor or None, shape=[P, H, n, d], working precision
    """

    row_shift: torch.Tensor
    row_sum: torch.Tensor
    row_x: torch.Tensor | None = None
    row_q: torch.Tensor | None = None
    row_r2: torch.Tensor | None = None
    col_shift: torch.Tensor | None = None
    col_x: torch.Tensor | None = None
    attn_x: torch.Tensor | None = None

    @property
    def lse(self) -> torch.Tensor:
        r"""Row log-sum-exp :math:`M_i + \log\sum_j e_{ij}`, shape [P, H, n]."""
        return self.row_shift + torch.log(self.row_sum)
