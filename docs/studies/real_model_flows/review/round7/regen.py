"""Regenerate every real_model_flows record directory under the review-round-7 rules, the nulls first.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round7/mlp_jump.py        # once: the per-layer MLP tables
    python docs/studies/real_model_flows/review/round7/regen.py [ROOT] [--before FILE] [--after FILE] [--tables]

The procedure of ``review/round6/regen.py`` (the nulls' records regenerated first, their verdicts -- with
``no_headroom`` and ``cannot_test`` since round 7 -- written into each trained summary under
``null_outcomes``, then the trained records; ``--tables``: table.md / tables.json and explain.md's verdict
tables). The rules are the config fields dated 2026-12-04 round 7 (``specificity_every_verdict``,
``null_same_flow_tol``, ``collapse_symmetric``, ``mlp_jump_factor``, ``headroom_rule``,
``free_running_description``, ``reading_names_choice``); the per-layer MLP table the jump rule reads is
stored in each family's ``verdict_data.mlp_layers`` by ``mlp_jump.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "round6"))

import importlib.util  # noqa: E402

from regen import main  # noqa: E402  (review/round6/regen.py: the same order, nulls first)


def tables(root: Path) -> None:
    """table.md / tables.json of every directory and explain.md's verdict tables (review/round5/regen.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[5] / "scripts"))
    from regen_tables import main as tables_main

    spec = importlib.util.spec_from_file_location("round5_regen", Path(__file__).parents[1] / "round5/regen.py")
    r5 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(r5)
    dirs = (".", "smollm2", "permuted", "random", "permuted_smollm2", "random_smollm2")
    tables_main([*(str(root / d) for d in dirs), "--allow-vanished"])
    r5.explain_tables(root)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--tables"]
    rc = main(args)
    if "--tables" in sys.argv[1:]:
        tables(Path(args[0] if args and not args[0].startswith("-") else "docs/studies/real_model_flows"))
    sys.exit(rc)
