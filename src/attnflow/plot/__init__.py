"""Figures (a leaf of the package: nothing in the core imports it)."""

from .reproduction import (
    plot_all as plot_all,
    plot_g2 as plot_g2,
    plot_ledger as plot_ledger,
    plot_tokens as plot_tokens,
)

__all__ = ["plot_all", "plot_g2", "plot_ledger", "plot_tokens"]
