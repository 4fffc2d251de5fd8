"""Rebuild the verdict records of committed study results without rerunning the study.

Usage (from the repository root, with the package on the path)::

    python scripts/regen_verdicts.py docs/studies/stability_input [docs/studies/longtime ...]
    python scripts/regen_verdicts.py --check docs/studies/stability_input   # exit 1 if out of date

For each study directory it reads ``study.json`` (which study, its config) and ``summary.json`` (the
numbers), calls the study module's ``records(summary, config)`` and writes the records back under the
summary's key ``"verdicts"``. The config is the committed one; criterion fields that did not exist when
the study ran take their declared defaults (the criterion is declared in the code, before any data it is
applied to). Those fields, with the value the records were built with and their description (which dates
the rule), are written under the summary's key ``"config_added_after_run"``, so that a reader of the
directory sees which rules decided its records beyond the config it ran with; ``study.json`` stays the
config as run. Every other key is untouched. Only studies whose module defines ``records`` are handled.
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


ADDED_NOTE = (
    "config fields absent from study.json's config (the config the study ran with): the records were built "
    "with these values, the fields' declared defaults (scripts/regen_verdicts.py)"
)


def added_config(study_dir: Path) -> dict | None:
    """The config fields ``regenerate`` took as defaults because ``study.json`` lacks them, with their values
    and descriptions, or None when the stored config has every field."""
    from attnflow.studies import get_study

    meta = json.loads((study_dir / "study.json").read_text())
    study = get_study(meta["study"])
    stored = meta.get("config", {})
    fields = study.Config.model_fields
    config = study.Config.model_validate({k: v for k, v in stored.items() if k in fields})
    values = config.model_dump(mode="json")
    added = {
        k: {"value": values[k], "description": " ".join((f.description or "").split())}
        for k, f in fields.items()
        if k not in stored
    }
    return {"note": ADDED_NOTE, "fields": added} if added else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="committed study directories (docs/studies/NAME)")
    ap.add_argument("--check", action="store_true", help="only report directories whose records differ")
    args = ap.parse_args(argv)
    stale = 0
    for d in args.dirs:
        summary, recs = regenerate(d)
        added = added_config(d)
        if summary.get("verdicts") == recs and summary.get("config_added_after_run") == added:
            print(f"{d}: {len(recs)} records, up to date")
            continue
        stale += 1
        if args.check:
            print(f"{d}: records or config_added_after_run differ from a regeneration")
            continue
        summary["verdicts"] = recs
        if added is None:
            summary.pop("config_added_after_run", None)
        else:
            summary["config_added_after_run"] = added
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
