"""The before -> after tables of review/round9_applied.md, from the snapshots regen.py saves.

Usage: python docs/studies/real_model_flows/review/round8/report.py BEFORE.json AFTER.json
Prints markdown: verdict counts per directory (holds / fails / depends / inconclusive / unmeasured, then
descriptions and identities; 'unmeasured' = a test record whose main value is unmeasured: step not converged,
collapses, no headroom, an MLP jump), then every record whose verdict, value, reading or null-specificity
label changed.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # review/: report_common
from report_common import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], 8, 9))
