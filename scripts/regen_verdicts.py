"""Rebuild the verdict records of committed study results without rerunning the study.

Usage (from the repository root, with the package on the path)::

    python scripts/regen_verdicts.py docs/studies/stability_input [docs/studies/longtime ...]
    python scripts/regen_verdicts.py --check docs/studies/stability_input   # exit 1 if out of date

For each study directory it reads ``study.json`` (which study, its config) and ``summary.json`` (the
numbers), calls the study module's ``records(summary, config)`` and writes the records back under the
summary's key ``"verdicts"`` (every other key untouched). The config is the committed one; criterion
fields that did not exist when the study ran take their declared defaults (the criterion is declared in
the code, before any data it is applied to). Only studies whose module defines ``records`` are handled.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path


def regenerate(study_dir: Path) -> tuple[dict, list]:
    """The summary of ``study_dir`` and its freshly built verdict records (JSON-ready)."""
    from attnflow.studies import get_study

    meta = json.loads((study_dir / "study.json").read_text())
    summary = json.loads((study_dir / "summary.json").read_text())
    study = get_study(meta["study"])
    module = importlib.import_module(type(study).__module__)
    build = getattr(module, "records", None)
    if build is None:
        raise SystemExit(f"{study_dir}: study {meta['study']!r} has no records(summary, config) function")
    fields = study.Config.model_fields
    config = study.Config.model_validate({k: v for k, v in meta.get("config", {}).items() if k in fields})
    return summary, [r.to_json() for r in build(summary, config)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="committed study directories (docs/studies/NAME)")
    ap.add_argument("--check", action="store_true", help="only report directories whose records differ")
    args = ap.parse_args(argv)
    stale = 0
    for d in args.dirs:
        summary, recs = regenerate(d)
        if summary.get("verdicts") == recs:
            print(f"{d}: {len(recs)} records, up to date")
            continue
        stale += 1
        if args.check:
            print(f"{d}: records differ from a regeneration")
            continue
        summary["verdicts"] = recs
        text = (d / "summary.json").read_text()
        lines = text.splitlines()
        indent = (len(lines[1]) - len(lines[1].lstrip(" "))) if len(lines) > 1 else 1  # keep the file's style
        (d / "summary.json").write_text(
            json.dumps(summary, indent=indent or 1) + ("\n" if text.endswith("\n") else "")
        )
        counts = {}
        for r in recs:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        print(f"{d}: wrote {len(recs)} records {counts}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
