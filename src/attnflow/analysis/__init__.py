"""Analysis: studies built on simulations and observables (fits, audits)."""

from .edi import (
    check_edi as check_edi,
    check_edi_cli as check_edi_cli,
    check_edi_table as check_edi_table,
    run_audit as run_audit,
)
from .fits import fit_power_law as fit_power_law, power_law_band as power_law_band

__all__ = ["check_edi", "check_edi_cli", "check_edi_table", "fit_power_law", "power_law_band", "run_audit"]
