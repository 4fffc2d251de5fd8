"""Figures (a leaf of the package: nothing in the core imports it)."""

from .reproduction import (
    plot_all as plot_all,
    plot_g2 as plot_g2,
    plot_ledger as plot_ledger,
    plot_tokens as plot_tokens,
)
from .studies import figures_for as figures_for, register_figures as register_figures

__all__ = ["figures_for", "plot_all", "plot_g2", "plot_ledger", "plot_tokens", "register_figures"]
