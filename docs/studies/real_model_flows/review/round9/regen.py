"""Regenerate every real_model_flows record directory under the review-round-9 rules, the nulls first.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round9/regen.py [ROOT] [--before F] [--after F] [--tables]

Round 8's procedure (``review/round8/regen.py``: the MLP factor range, then round 7's nulls-first order) with
the config fields dated 2026-12-04 round 9 at their defaults: ``room_fail_stands`` (F2: a 'follows' value
that fails over all depths stands where too few depths have room) and ``fit_grid_check`` (F1: a fitted-time
fail that a constant time of the fit's own grid beats is the fit objective's, inconclusive). No flow is run.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    sys.argv = [str(HERE.parent / "round8" / "regen.py"), *sys.argv[1:]]
    sys.path.insert(0, str(HERE.parent / "round8"))
    runpy.run_path(str(HERE.parent / "round8" / "regen.py"), run_name="__main__")
