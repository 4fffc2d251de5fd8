r"""The two training tasks: move a token cloud to a target law, and classify sequences of two classes.

* :class:`MeasureTask`: inputs are ``paths`` clouds of ``n`` tokens drawn uniformly on :math:`S^{d-1}`;
  the target law is a mixture of ``clusters`` von Mises-Fisher laws (concentration ``kappa``) with
  means fixed by the seed, represented by one large sample of ``target_factor * n`` tokens shared by
  every path (a per-path target sample of n tokens would let the flow memorise samples instead of
  learning the law). The flow must transport every uniform cloud onto the target law (loss:
  :data:`attnflow.training.losses.MEASURE_LOSSES`); the test set has new inputs and a new target sample.
* :class:`TwoClassTask`: a sequence is a cloud of ``n`` tokens whose first token is a classification
  token fixed at the pole :math:`e_d` (identical in every sequence, so a readout of it at depth 0 cannot
  beat chance) and whose other tokens are the projected normal law
  :math:`x = (\mu_c + \sigma g)/|\mu_c + \sigma g|` around the class mean
  :math:`\mu_c = \cos\alpha\, e_d \pm \sin\alpha\, e_1`; the flow must carry the class into the
  classification token, read out linearly (loss ``logistic``).

Training and test sets come from different seed streams of :mod:`attnflow.random`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..model.tokens import uniform, von_mises_fisher
from ..random import path_generator

__all__ = ["TASK_KINDS", "MeasureTask", "TwoClassTask"]

TASK_KINDS = ("measure", "two_class")


def _count(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}: got {value!r}")
    return value


@dataclass(frozen=True)
class MeasureTask:
    """Uniform clouds to a von Mises-Fisher mixture (module docstring).

    Attributes
    ----------
    x0 : Tensor, shape=[paths, n, d]
        Training inputs.
    target : Tensor, shape=[1, target_factor n, d]
        The sample of the target law every path is compared with.
    x0_test, target_test : Tensor, shapes as x0 and target
        Held-out inputs and an independent target sample.
    """

    x0: torch.Tensor
    target: torch.Tensor
    x0_test: torch.Tensor
    target_test: torch.Tensor
    kind = "measure"

    @classmethod
    def make(
        cls,
        *,
        paths: int,
        n: int,
        d: int,
        clusters: int = 2,
        kappa: float = 20.0,
        target_factor: int = 4,
        seed: int = 0,
    ) -> MeasureTask:
        """Draw the task (float64) from ``seed``."""
        _count("paths", paths, 1)
        _count("n", n, 2)
        _count("target_factor", target_factor, 1)
        if not (isinstance(kappa, (int, float)) and math.isfinite(kappa) and kappa > 0):
            raise ValueError(f"kappa must be a finite number > 0: got {kappa!r}")
        # one path of paths * n tokens: the cluster means are drawn once, so every cloud samples one law
        m = target_factor * n
        pool = von_mises_fisher(1, 2 * m, d, seed=seed, clusters=clusters, kappa=float(kappa))
        pool = pool.reshape(2, 1, m, d)
        x0 = uniform(2 * paths, n, d, seed=seed)
        return cls(x0=x0[:paths], target=pool[0], x0_test=x0[paths:], target_test=pool[1])


@dataclass(frozen=True)
class TwoClassTask:
    """Sequences of two classes with a classification token (module docstring).

    Attributes
    ----------
    x0 : Tensor, shape=[paths, n, d]
    labels : Tensor, shape=[paths], float64 in {0, 1}
    x0_test, labels_test : the held-out set, same shapes.
    """

    x0: torch.Tensor
    labels: torch.Tensor
    x0_test: torch.Tensor
    labels_test: torch.Tensor
    kind = "two_class"

    @staticmethod
    def sequences(
        count: int, n: int, d: int, *, angle: float, spread: float, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` sequences and their labels (classes alternate, then a seeded permutation)."""
        labels = (torch.arange(count) % 2).to(torch.float64)
        labels = labels[torch.randperm(count, generator=generator)]
        pole = torch.zeros(d, dtype=torch.float64)
        pole[-1] = 1.0
        e1 = torch.zeros(d, dtype=torch.float64)
        e1[0] = 1.0
        sign = (2.0 * labels - 1.0)[:, None, None]
        means = math.cos(angle) * pole + sign * math.sin(angle) * e1  # (count, 1, d)
        g = torch.randn(count, n - 1, d, generator=generator, dtype=torch.float64)
        body = torch.nn.functional.normalize(means + spread * g, dim=-1)
        cls_token = pole.expand(count, 1, d)
        return torch.cat([cls_token, body], dim=1), labels

    @classmethod
    def make(
        cls, *, paths: int, n: int, d: int, angle: float = math.pi / 3, spread: float = 0.5, seed: int = 0
    ) -> TwoClassTask:
        """Draw the task (float64) from ``seed``: ``paths`` training and ``paths`` test sequences."""
        _count("paths", paths, 2)
        _count("n", n, 2)
        if not (isinstance(spread, (int, float)) and math.isfinite(spread) and spread >= 0):
            raise ValueError(f"spread must be a finite number >= 0: got {spread!r}")
        x0, labels = cls.sequences(
            paths, n, d, angle=angle, spread=spread, generator=path_generator(seed, 0, "tokens")
        )
        xt, lt = cls.sequences(
            paths, n, d, angle=angle, spread=spread, generator=path_generator(seed, 1, "tokens")
        )
        return cls(x0=x0, labels=labels, x0_test=xt, labels_test=lt)
