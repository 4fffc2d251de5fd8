"""Regenerate the ``table.md`` (and ``tables.json``) of committed multi-head study pages from their
committed ``summary.json`` (no rerun), with the one renderer, and check that no number of the old page
vanished.

Usage (from the repository root, with the package on the path)::

    python scripts/regen_tables_multihead.py docs/studies/critical_beta [docs/studies/entropy ...]
    python scripts/regen_tables_multihead.py --check docs/studies/critical_beta   # exit 1 if out of date

For each directory it reads ``summary.json`` (the study under ``run.study``, its config under
``run.config``), calls the study's table function ``tables(summary, config)`` (:data:`TABLES`) and
renders the specs with :func:`attnflow.studies.render.markdown`. Before writing, every number of the old
``table.md`` must still be in the new one (compared as numbers: ``1.0`` and ``1`` are the same number);
a number that vanished is listed and the page is not written (exit 1).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path

#: study name -> "module:function" of its table function ``(summary, config) -> list[Table]``
TABLES = {
    "critical_beta": "attnflow.studies.multihead_reduced:critical_beta_tables",
    "superadditivity": "attnflow.studies.multihead_reduced:superadditivity_tables",
    "relu_vs_softmax": "attnflow.studies.multihead_reduced:relu_vs_softmax_tables",
    "monotonicity": "attnflow.studies.multihead_flows:monotonicity_tables",
    "sufficient_condition": "attnflow.studies.multihead_flows:sufficient_condition_tables",
    "entropy": "attnflow.studies.multihead_entropy:entropy_tables",
}

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def numbers(text: str) -> set[float]:
    """The numeric tokens of ``text`` as floats (digits inside words, e.g. ``S2`` or ``b0``, excluded)."""
    return {float(t) for t in _NUMBER.findall(text)}


def vanished(old: str, new: str) -> list[float]:
    """The numbers of ``old`` that ``new`` does not contain."""
    return sorted(numbers(old) - numbers(new))


def regenerate(study_dir: Path) -> tuple[str, list[dict]]:
    """The Markdown and the table specs (JSON) of ``study_dir`` rebuilt from its ``summary.json``."""
    from attnflow.studies import get_study
    from attnflow.studies.render import markdown

    summary = json.loads((study_dir / "summary.json").read_text())
    run = summary.get("run", summary)
    name = run["study"]
    if name not in TABLES:
        raise SystemExit(
            f"{study_dir}: study {name!r} has no table function here; known: {', '.join(TABLES)}"
        )
    module, fn = TABLES[name].split(":")
    study = get_study(name)
    fields = study.Config.model_fields
    config = study.Config.model_validate({k: v for k, v in run["config"].items() if k in fields})
    tables = getattr(importlib.import_module(module), fn)(summary, config)
    return markdown(tables), [t.to_json() for t in tables]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="committed study directories (docs/studies/NAME)")
    ap.add_argument("--check", action="store_true", help="only report pages that differ from a regeneration")
    args = ap.parse_args(argv)
    bad = 0
    for d in args.dirs:
        text, specs = regenerate(d)
        old = (d / "table.md").read_text() if (d / "table.md").is_file() else ""
        if old == text:
            print(f"{d}: table.md up to date")
            continue
        if args.check:
            bad += 1
            print(f"{d}: table.md differs from a regeneration")
            continue
        lost = vanished(old, text)
        if lost:
            bad += 1
            print(f"{d}: NOT written, {len(lost)} numbers of the old page vanished: {lost}")
            continue
        (d / "table.md").write_text(text)
        (d / "tables.json").write_text(json.dumps({"tables": specs}, indent=1))
        print(f"{d}: table.md regenerated; all {len(numbers(old))} distinct numbers of the old page kept")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
