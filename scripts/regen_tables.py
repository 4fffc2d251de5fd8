"""Rebuild the ``table.md`` of committed study results from their ``summary.json`` (no rerun), and check
that no number of the old page is lost.

Usage (from the repository root, with the package on the path)::

    python scripts/regen_tables.py docs/studies/longtime [docs/studies/jko_stability ...]
    python scripts/regen_tables.py --check docs/studies/longtime   # exit 1 if table.md is out of date

For each study directory it reads ``study.json`` (which study, its config) and ``summary.json`` (the
numbers), calls the study module's ``tables(summary, config)`` (or ``tables(summary)``: the
:class:`~attnflow.studies.Table` specs its analysis returns) and renders them with the one renderer
(:func:`attnflow.studies.render.markdown`). The config is the committed one; fields that did not exist
when the study ran take their declared defaults. Only studies whose module defines ``tables`` are handled.

Before writing, every numeric token of the old page is looked up in the new one: a token found as the
same text is kept; one found only as the same value in another format (``1.0`` as ``1``) is listed as
reformatted; one found in the text of ``--moved-to`` (default ``explain.md``: prose moved out of the
table, such as a provenance line) as moved; one found in none of these ways is listed as vanished, and
the page is not written unless ``--allow-vanished`` is given (the vanished tokens are printed either way).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
from pathlib import Path

#: a number as it is written in a table: sign, digits, decimals, exponent (``-1.5e-03``, ``64``, ``.5``)
NUMBER = re.compile(r"(?<![\w.^])[-+]?(?:\d+\.\d+|\.\d+|\d+)(?:[eE][-+]?\d+)?(?!\w|\.\d)")


def numbers(text: str) -> list[str]:
    """The numeric tokens of ``text`` (not the digits inside names such as ``W2`` or ``S^2``)."""
    return NUMBER.findall(text)


def compare_numbers(old: str, new: str, moved: str = "") -> dict[str, list[str]]:
    """The numeric tokens of ``old`` missing from ``new`` as text: ``moved`` (in the text ``moved``, e.g. a
    provenance line moved to ``explain.md``), ``reformatted`` (the same value is in ``new`` to the token's
    precision) and ``vanished`` (none of these)."""
    new_tokens = set(numbers(new))
    new_values = [float(t) for t in new_tokens]
    moved_tokens = set(numbers(moved))
    out: dict[str, list[str]] = {"moved": [], "reformatted": [], "vanished": []}
    for tok in dict.fromkeys(numbers(old)):
        if tok in new_tokens:
            continue
        if tok in moved_tokens:
            out["moved"].append(tok)
            continue
        v = float(tok)
        digits = len(re.sub(r"[^0-9]", "", tok.split("e")[0].split("E")[0]).lstrip("0")) or 1
        tol = 5 * abs(v) * 10.0**-digits  # about half a unit of the token's last significant digit
        same = any(abs(w - v) <= tol for w in new_values)
        out["reformatted" if same else "vanished"].append(tok)
    return out


def build_tables(study_dir: Path) -> list:
    """The :class:`~attnflow.studies.render.Table` specs of ``study_dir`` built from its committed summary by
    the study's table function: the study class's ``tables`` (a module holding several studies names one
    per class) or else its module's ``tables(summary[, config])``."""
    from attnflow.studies import get_study

    meta = json.loads((study_dir / "study.json").read_text())
    summary = json.loads((study_dir / "summary.json").read_text())
    study = get_study(meta["study"])
    build = getattr(type(study), "tables", None) or getattr(
        importlib.import_module(type(study).__module__), "tables", None
    )
    if build is None:
        raise SystemExit(f"{study_dir}: study {meta['study']!r} has no tables(summary, config) function")
    fields = study.Config.model_fields
    config = study.Config.model_validate({k: v for k, v in meta.get("config", {}).items() if k in fields})
    takes_config = len(inspect.signature(build).parameters) > 1
    return build(summary, config) if takes_config else build(summary)


def regenerate(study_dir: Path) -> str:
    """The Markdown of the tables of ``study_dir`` rendered from its committed summary."""
    from attnflow.studies.render import markdown

    return markdown(build_tables(study_dir))


def specs(study_dir: Path) -> dict:
    """The ``tables.json`` content of ``study_dir`` (what the runner writes beside ``table.md``)."""
    return {"tables": [t.to_json() for t in build_tables(study_dir)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="committed study directories (docs/studies/NAME)")
    ap.add_argument("--check", action="store_true", help="only report directories whose table.md differs")
    ap.add_argument("--allow-vanished", action="store_true", help="write even if numbers vanished")
    ap.add_argument(
        "--moved-to",
        default="explain.md",
        help="a file of the study directory that may hold numbers moved out of table.md (prose such as a "
        "provenance line; default explain.md)",
    )
    args = ap.parse_args(argv)
    bad = 0
    for d in args.dirs:
        new = regenerate(d)
        path = d / "table.md"
        old = path.read_text() if path.is_file() else ""
        spec_path = d / "tables.json"
        spec_text = json.dumps(specs(d), indent=1)
        if old == new and spec_path.is_file() and spec_path.read_text() == spec_text:
            print(f"{d}: table.md up to date ({len(numbers(new))} numbers)")
            continue
        if args.check:
            bad += 1
            print(f"{d}: table.md differs from a regeneration; run scripts/regen_tables.py {d}")
            continue
        other = d / args.moved_to
        diff = compare_numbers(old, new, other.read_text() if other.is_file() else "")
        print(
            f"{d}: {len(set(numbers(old)))} distinct numbers in the old table.md, "
            f"{len(diff['moved'])} moved to {args.moved_to} {diff['moved']}, "
            f"{len(diff['reformatted'])} reformatted {diff['reformatted']}, "
            f"{len(diff['vanished'])} vanished {diff['vanished']}"
        )
        if diff["vanished"] and not args.allow_vanished:
            bad += 1
            print(f"{d}: not written (numbers vanished)")
            continue
        path.write_text(new)
        spec_path.write_text(spec_text)
        print(f"{d}: wrote table.md and tables.json")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
