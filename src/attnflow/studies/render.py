"""The one renderer of a study's tables: a :class:`Table` spec (columns, rows of data) to Markdown
(``table.md``, the docs) and to HTML (the report).

A study never writes Markdown by hand: its analysis returns :class:`Table` specs in its
:class:`~attnflow.studies.StudyResult` and the runner renders them (and stores the specs in
``tables.json``, so the report renders the same rows as HTML).

Example
-------
>>> t = Table(columns=[Column("law"), Column("rel", "rel. sigma_min", ".3g")],
...           rows=[{"law": "dirac", "rel": 1.234e-17}, {"law": "uniform", "rel": 0.0521}],
...           title="Injectivity", note="at the largest P")
>>> print(markdown([t]))
### Injectivity
<BLANKLINE>
at the largest P
<BLANKLINE>
| law | rel. sigma_min |
|---|---|
| dirac | 1.23e-17 |
| uniform | 0.0521 |
<BLANKLINE>
"""

from __future__ import annotations

import html as _html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "Column",
    "Table",
    "cell_text",
    "ci_cells",
    "ci_columns",
    "html",
    "markdown",
    "table_from_json",
    "verdicts_table",
]


@dataclass(frozen=True)
class Column:
    """One column: the row key it shows, its header (default: the key) and a format spec for numbers."""

    key: str
    label: str = ""
    fmt: str = ""

    @property
    def header(self) -> str:
        return self.label or self.key


@dataclass(frozen=True)
class Table:
    """A table of data: ``rows`` are mappings from column keys to values (numbers, strings, bools, None).

    Raises
    ------
    ValueError
        No column, a repeated column key, or a row without one of the columns' keys.
    """

    columns: Sequence[Column]
    rows: Sequence[Mapping[str, Any]]
    title: str = ""
    note: str = ""
    id: str = ""

    def __post_init__(self) -> None:
        cols = [c if isinstance(c, Column) else Column(str(c)) for c in self.columns]
        object.__setattr__(self, "columns", cols)
        if not cols:
            raise ValueError(
                f"table {self.title or self.id!r} has no column; give e.g. columns=[Column('x')]"
            )
        keys = [c.key for c in cols]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"table {self.title or self.id!r}: column keys must be distinct: {dup} repeated")
        for i, row in enumerate(self.rows):
            missing = [k for k in keys if k not in row]
            if missing:
                raise ValueError(
                    f"table {self.title or self.id!r}: row {i} has no value for columns {missing}; give None "
                    "for an empty cell"
                )

    def to_json(self) -> dict:
        """The spec as JSON data (``table_from_json`` reads it back)."""
        return {
            "id": self.id,
            "title": self.title,
            "note": self.note,
            "columns": [asdict(c) for c in self.columns],
            "rows": [{c.key: row[c.key] for c in self.columns} for row in self.rows],
        }


def ci_columns(key: str, label: str = "", fmt: str = "", *, ci_label: str = "95% CI") -> list[Column]:
    """A value and its 95% interval: the columns ``key`` and ``<key>_ci`` (a ``[low, high]`` pair in the
    row, shown as ``low, high``); :func:`ci_cells` gives their cells from a fit."""
    return [Column(key, label, fmt), Column(f"{key}_ci", ci_label, fmt)]


def ci_cells(fit: Mapping[str, Any], *params: str, prefix: str = "") -> dict:
    """The cells of :func:`ci_columns` for each fitted parameter of ``params``: ``fit[p]`` and its
    interval ``fit[p + "_ci"]`` under the keys ``prefix + p`` and ``prefix + p + "_ci"`` (None when the fit
    lacks them, e.g. a fit that was not made).

    Examples
    --------
    >>> ci_cells({"b": -0.5, "b_ci": [-0.6, -0.4]}, "b", prefix="tail_")
    {'tail_b': -0.5, 'tail_b_ci': [-0.6, -0.4]}
    """
    return {f"{prefix}{k}": fit.get(k) for p in params for k in (p, f"{p}_ci")}


def table_from_json(data: Mapping[str, Any]) -> Table:
    """The :class:`Table` of :meth:`Table.to_json`."""
    return Table(
        columns=[Column(**c) for c in data["columns"]],
        rows=list(data["rows"]),
        title=data.get("title", ""),
        note=data.get("note", ""),
        id=data.get("id", ""),
    )


def cell_text(value: Any, fmt: str = "") -> str:
    """The text of one cell: None -> empty, a bool -> yes / no, a number with ``fmt`` (default ``.4g``
    for floats), a list joined by commas, a sample summary ``{"mean": m, "sd": s}`` as ``m +- s`` (the mean
    with ``fmt``, the standard deviation to two significant digits).

    Examples
    --------
    >>> cell_text({"mean": 0.26213, "sd": 0.4912}, ".3f"), cell_text([1.75, 7.25], ".3g")
    ('0.262 +- 0.49', '1.75, 7.25')
    """
    if value is None:
        return ""
    if isinstance(value, Mapping) and set(value) == {"mean", "sd"}:
        return f"{cell_text(value['mean'], fmt)} +- {cell_text(value['sd'], '.2g')}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return format(value, fmt or ".4g")
    if isinstance(value, int):
        return format(value, fmt) if fmt else str(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(cell_text(v, fmt) for v in value)
    return str(value)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(tables: Iterable[Table]) -> str:
    """The Markdown of ``tables`` (``### title``, the note, the pipe table), one blank line between."""
    parts = []
    for t in tables:
        lines = []
        if t.title:
            lines += [f"### {t.title}", ""]
        if t.note:
            lines += [t.note, ""]
        lines.append("| " + " | ".join(_md_cell(c.header) for c in t.columns) + " |")
        lines.append("|" + "---|" * len(t.columns))
        for row in t.rows:
            lines.append("| " + " | ".join(_md_cell(cell_text(row[c.key], c.fmt)) for c in t.columns) + " |")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def html(tables: Iterable[Table]) -> str:
    """The HTML of ``tables`` (a ``<h3>``, a ``<p>`` note, a ``<table>``), every text escaped."""
    out = []
    for t in tables:
        if t.title:
            out.append(f"<h3>{_html.escape(t.title)}</h3>")
        if t.note:
            out.append(f"<p>{_html.escape(t.note)}</p>")
        head = "".join(f"<th>{_html.escape(c.header)}</th>" for c in t.columns)
        body = "".join(
            "<tr>"
            + "".join(f"<td>{_html.escape(cell_text(row[c.key], c.fmt))}</td>" for c in t.columns)
            + "</tr>"
            for row in t.rows
        )
        out.append(f'<table class="study-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')
    return "\n".join(out) + ("\n" if out else "")


def verdicts_table(records: Iterable[Any], *, title: str = "", note: str = "") -> Table:
    """The verdict records of a study (:mod:`attnflow.analysis.verdicts`, records or their JSON) as a
    table: id, verdict, class, criterion, value, 95% interval, and each robustness choice with its values,
    results and outcomes.

    Examples
    --------
    >>> rec = {"id": "x-rate", "verdict": "holds", "class": "test", "robustness": [],
    ...        "criterion": {"quantity": "b", "op": "<", "threshold": 0.0},
    ...        "result": {"value": -0.51, "ci95": [-0.6, -0.42]}}
    >>> print(markdown([verdicts_table([rec])]))
    | verdict | outcome | class | criterion | value | 95% CI | robustness |
    |---|---|---|---|---|---|---|
    | x-rate | holds | test | b < 0 | -0.51 | -0.6, -0.42 |  |
    <BLANKLINE>
    """

    def num(x: Any) -> str:
        return cell_text(x, ".3g") if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)

    rows = []
    for rec in records:
        j = rec.to_json() if hasattr(rec, "to_json") else rec
        crit = j.get("criterion")
        rows.append(
            {
                "id": j["id"],
                "verdict": j["verdict"],
                "class": j["class"],
                "criterion": None
                if not crit
                else f"{crit['quantity']} {crit['op']} {num(crit['threshold'])}",
                "value": j["result"].get("value"),
                "ci95": j["result"].get("ci95"),
                "robustness": "; ".join(
                    f"{ch['choice']}: "
                    + ", ".join(
                        f"{v}: {'-' if x is None else num(x)} ({o})"
                        for v, x, o in zip(ch["values"], ch["results"], ch["outcomes"], strict=True)
                    )
                    for ch in j["robustness"]
                ),
            }
        )
    return Table(
        columns=[
            Column("id", "verdict"),
            Column("verdict", "outcome"),
            Column("class"),
            Column("criterion"),
            Column("value", fmt=".3g"),
            Column("ci95", "95% CI", ".3g"),
            Column("robustness"),
        ],
        rows=rows,
        title=title,
        note=note,
        id="verdicts",
    )
