"""Rebuild the tables of committed study results from their ``summary.json`` (no rerun), and check that
every number of the old ``table.md`` is still on the new page.

Usage (from the repository root, with the package on the path)::

    python scripts/regen_tables.py docs/studies/noise_phase [docs/studies/stability_input ...]
    python scripts/regen_tables.py --check docs/studies/noise_phase   # write nothing; exit 1 if stale

For each study directory it reads ``study.json`` (which study, its config) and ``summary.json`` (the
numbers), calls the study module's ``tables(summary, config)`` (the table specs its analysis returns,
:class:`attnflow.studies.render.Table`), renders them with :func:`attnflow.studies.render.markdown` into
``table.md`` and stores the specs in ``tables.json`` (what the runner writes after a run). The config is
the committed one; fields that did not exist when the study ran take their defaults.

A hand-written preamble of the old page (a leading italic paragraph ``_..._`` saying how the committed
run was made: not a table, and nothing the study's code writes) moves to the study's ``explain.md``,
under ``## The committed run`` (:func:`split_preamble`).

Before writing, the numeric tokens of the old and the new page are compared (:func:`vanished`): a number
of the old page that neither the new one nor the moved preamble prints is listed (the page may change
format, its numbers may not) and the exit status is 1 unless ``--allow-vanished`` is given.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import re
import sys
from pathlib import Path

#: a number as a table prints it: 3, -0.25, 1.5e-06, 12% (the percent sign is dropped)
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def numbers(text: str) -> list[float]:
    """The numeric tokens of ``text`` as floats, in order (``+3.1%`` -> 3.1, ``1e-06`` -> 1e-06)."""
    out = []
    for tok in NUMBER.findall(text):
        try:
            out.append(float(tok))
        except ValueError:
            continue
    return out


def vanished(old: str, new: str) -> list[float]:
    """The numbers of ``old`` that ``new`` does not print (equal as floats; the sign counts), sorted.

    Examples
    --------
    >>> vanished("| a | 0.25 +- 0.01 |", "| a | 0.25 | 0.01 |")
    []
    >>> vanished("b = -1.0 and 3%", "b = -1")
    [3.0]
    """
    have = {v for v in numbers(new) if math.isfinite(v)}
    return sorted({v for v in numbers(old) if math.isfinite(v) and v not in have})


def split_preamble(text: str) -> tuple[str, str]:
    r"""(the leading italic paragraph of ``text``, the rest); ``""`` when it has none.

    Examples
    --------
    >>> split_preamble("_Full run: 42 runs._\n\n| a |\n")
    ('_Full run: 42 runs._', '| a |\n')
    """
    head, sep, rest = text.partition("\n\n")
    if sep and head.startswith("_") and head.rstrip().endswith("_"):
        return head.strip(), rest
    return "", text


EXPLAIN_SECTION = "## The committed run"


def move_preamble(study_dir: Path, preamble: str) -> None:
    """Put ``preamble`` into ``study_dir/explain.md`` under :data:`EXPLAIN_SECTION`, after its title
    (once)."""
    path = study_dir / "explain.md"
    text = path.read_text() if path.is_file() else ""
    if preamble in text:
        return
    block = f"{EXPLAIN_SECTION}\n\n{preamble}\n\n"
    title, sep, rest = text.partition("\n\n")
    if text.startswith("# ") and sep:
        text = f"{title}\n\n{block}{rest}"
    else:
        text = block + text
    path.write_text(text)


def new_tables(study_dir: Path) -> tuple[str, dict]:
    """The Markdown and the ``tables.json`` data of ``study_dir``'s committed summary."""
    from attnflow.studies import get_study
    from attnflow.studies.render import markdown

    meta = json.loads((study_dir / "study.json").read_text())
    summary = json.loads((study_dir / "summary.json").read_text())
    study = get_study(meta["study"])
    module = importlib.import_module(type(study).__module__)
    build = getattr(module, "tables", None)
    if build is None:
        raise SystemExit(f"{study_dir}: study {meta['study']!r} has no tables(summary, config) function")
    fields = study.Config.model_fields
    config = study.Config.model_validate({k: v for k, v in meta.get("config", {}).items() if k in fields})
    specs = build(summary, config)
    return markdown(specs), {"tables": [t.to_json() for t in specs]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="committed study directories (docs/studies/NAME)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is out of date")
    ap.add_argument(
        "--allow-vanished", action="store_true", help="write a page even when numbers of the old one vanish"
    )
    args = ap.parse_args(argv)
    bad = 0
    for d in args.dirs:
        md, data = new_tables(d)
        old = (d / "table.md").read_text() if (d / "table.md").is_file() else ""
        preamble, _ = split_preamble(old)
        lost = vanished(old, md + "\n" + preamble)
        if preamble:
            print(f"{d}: the hand-written preamble of table.md moves to explain.md ({EXPLAIN_SECTION})")
        if lost:
            print(f"{d}: {len(lost)} numbers of the old table.md are not on the new page: {lost}")
        else:
            count = len(set(numbers(old)))
            print(f"{d}: all {count} distinct numbers of the old table.md are on the new page")
        stored = (d / "tables.json").read_text() if (d / "tables.json").is_file() else None
        fresh = json.dumps(data, indent=1) + "\n"
        if old == md and stored == fresh:
            print(f"{d}: up to date")
            continue
        if args.check:
            print(f"{d}: table.md or tables.json differs from a regeneration")
            bad += 1
            continue
        if lost and not args.allow_vanished:
            bad += 1
            continue
        if preamble:
            move_preamble(d, preamble)
        (d / "table.md").write_text(md)
        (d / "tables.json").write_text(fresh)
        print(f"{d}: wrote table.md ({len(data['tables'])} tables) and tables.json")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
