r"""Verdict records: what a study may say about a claim, and how it decides it.

A *verdict* is a claim about the mathematics, backed by numbers, that a researcher may cite. It is worth
something only if the same procedure, run on a world where the claim is false, would have said "fails"
(``shared/VERDICTS.md``). Every study writes one :class:`VerdictRecord` per verdict into its
``summary.json`` (key ``"verdicts"``), and ``docs/theory_checks.md`` is generated from those records.

A record carries five things:

1. the **statement** tested and its **source** (the paper's section / equation / theorem, or
   ``"derived: docs/PAGE.md#anchor"`` for our own candidates);
2. its **class**: ``test`` (the procedure could have failed), ``identity`` (true by construction: a code
   test, never a confirmation) or ``description`` (numbers with no falsifiable statement);
3. a **criterion declared before the data** (:class:`Criterion`: the quantity, the comparison, the
   threshold and the config key that declares it);
4. **robustness**: the verdict recomputed under every arbitrary choice of the study
   (:class:`RobustnessCheck`: one outcome per value of the choice);
5. **uncertainty**: the sample size and the method of the confidence interval.

The verdict is *computed* from these, never written by hand (:func:`record_test`):

* the main result and every robustness value are decided by :meth:`Criterion.decide`: ``holds`` when the
  whole 95% interval satisfies the criterion, ``fails`` when none of it does, ``inconclusive`` when the
  interval straddles the threshold (the sample is too small to say);
* the record is ``holds`` only if the main result and every robustness value hold; ``fails`` if they all
  fail; ``depends on <choice>`` naming each choice whose values disagree (or that disagrees with the main
  result); ``inconclusive`` when nothing fails or disagrees but some outcome is inconclusive.

Example
-------
>>> c = Criterion(quantity="b, the fitted exponent of G^2 in H", op="within", threshold=(-1.2, -0.8),
...               declared_in="config: criterion.exponent_band")
>>> c.decide(-0.97, (-1.03, -0.91))
'holds'
>>> c.decide(-0.5, (-0.6, -0.4))
'fails'
>>> r = record_test(id="g2-in-h", statement="late-time G^2 decays like 1/H", source="2605.18870, Sec. 6",
...                 criterion=c, value=-0.97, ci95=(-1.03, -0.91), samples=20, method="t interval of the fit",
...                 robustness=[RobustnessCheck.from_values(c, "dt", [0.01, 0.005], [-0.97, -0.6],
...                                                         ci95=[(-1.0, -0.9), (-0.7, -0.5)])])
>>> r.verdict
'depends on dt'
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "CLASSES",
    "OUTCOMES",
    "Criterion",
    "RobustnessCheck",
    "VerdictError",
    "VerdictRecord",
    "combine",
    "count_records",
    "record_description",
    "record_identity",
    "read_records",
    "record_test",
]

#: the classes of a verdict record
CLASSES = ("test", "identity", "description")
#: what a criterion says of one value (with its interval)
OUTCOMES = ("holds", "fails", "inconclusive")

Op = Literal["<", "<=", ">", ">=", "within", "outside"]


class VerdictError(ValueError):
    """A verdict record or criterion that breaks a rule (the message names the rule, the value, the fix)."""


def _finite(x: float, what: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise VerdictError(f"{what} must be a number: got {x!r}") from None
    if math.isnan(v):
        raise VerdictError(
            f"{what} must not be NaN: got {x!r}; a NaN result is recorded as 'inconclusive' "
            "by passing value=None"
        )
    return v


class Criterion(BaseModel):
    """A falsifiable criterion on one scalar quantity, declared in the study's config before the data.

    Attributes
    ----------
    quantity : str
        What is measured, in words (e.g. ``"ratio T_ReLU / T_softmax at n = 4096"``).
    op : {"<", "<=", ">", ">=", "within", "outside"}
        The claim holds for a value v when ``v op threshold`` (``within``: lo <= v <= hi; ``outside``: v < lo
        or v > hi).
    threshold : float or (float, float)
        A number, or the band ``(lo, hi)`` for ``within`` / ``outside``.
    declared_in : str
        Where the threshold is declared before the data, e.g. ``"config: criterion_ratio"``.
    note : str
        Why this threshold (a convention, a theorem's constant, ...); optional.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    quantity: str = Field(min_length=1)
    op: Op
    threshold: float | tuple[float, float]
    declared_in: str = Field(min_length=1)
    note: str = ""

    @model_validator(mode="after")
    def _check(self) -> Criterion:
        band = self.op in ("within", "outside")
        if band != isinstance(self.threshold, tuple):
            want = "a band (lo, hi)" if band else "one number"
            raise ValueError(f"op {self.op!r} takes {want} as threshold: got {self.threshold!r}")
        if band:
            lo, hi = self.threshold
            if not (math.isfinite(lo) or math.isfinite(hi)) or not lo <= hi:
                raise ValueError(f"a band threshold needs lo <= hi: got {self.threshold!r}")
        elif math.isnan(self.threshold):
            raise ValueError("threshold must not be NaN")
        return self

    def satisfied(self, v: float) -> bool:
        """Whether the single value ``v`` satisfies the criterion."""
        t = self.threshold
        if self.op == "<":
            return v < t
        if self.op == "<=":
            return v <= t
        if self.op == ">":
            return v > t
        if self.op == ">=":
            return v >= t
        lo, hi = t
        inside = lo <= v <= hi
        return inside if self.op == "within" else not inside

    def decide(self, value: float | None, ci95: Sequence[float] | None = None) -> str:
        """``holds``, ``fails`` or ``inconclusive`` for ``value`` with its 95% interval ``ci95``.

        Without an interval the value alone decides. With one, ``holds`` needs every point of the
        interval to satisfy the criterion and ``fails`` needs none to; otherwise ``inconclusive``.
        ``value=None`` (nothing could be measured) is ``inconclusive``.

        Raises
        ------
        VerdictError
            If ``ci95`` is not an ordered pair containing ``value``.
        """
        if value is None:
            return "inconclusive"
        v = _finite(value, "value")
        if ci95 is None:
            return "holds" if self.satisfied(v) else "fails"
        lo, hi = _interval(ci95, v)
        pts = [lo, hi]
        if self.op in ("within", "outside"):
            # the band's edges inside the interval are the points where the answer can change
            pts += [e for e in self.threshold if lo <= e <= hi]
        sat = [self.satisfied(p) for p in pts]
        if self.op in ("within", "outside") and any(lo < e < hi for e in self.threshold):
            # an interval that crosses an edge of the band has points on both sides
            return "inconclusive"
        if all(sat):
            return "holds"
        if not any(sat):
            return "fails"
        return "inconclusive"


def _interval(ci95: Sequence[float], v: float | None = None) -> tuple[float, float]:
    try:
        lo, hi = (float(c) for c in ci95)
    except (TypeError, ValueError):
        raise VerdictError(f"ci95 must be a pair (lo, hi) of numbers: got {ci95!r}") from None
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise VerdictError(f"ci95 must satisfy lo <= hi: got {ci95!r}")
    if v is not None and not lo <= v <= hi:
        raise VerdictError(
            f"ci95 {ci95!r} must contain the value {v!r}: an interval that misses its "
            "estimate is a bug in the estimator"
        )
    return lo, hi


class RobustnessCheck(BaseModel):
    """The verdict recomputed under each value of one arbitrary choice of the study.

    Attributes
    ----------
    choice : str
        The choice varied (``"dt"``, ``"initial spread"``, ``"transition definition"``, ``"N"``, ...).
    values : list
        Its values (numbers or labels), the study's own value among them.
    results : list of float or None
        The criterion's quantity under each value (None: could not be measured).
    ci95 : list of (float, float) or None
        The 95% interval of each result, where there is one.
    outcomes : list of str
        :meth:`Criterion.decide` of each result.
    verdict : str
        ``holds`` / ``fails`` / ``inconclusive`` when every outcome agrees, else ``depends on <choice>``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    choice: str = Field(min_length=1)
    values: list[Any]
    results: list[float | None]
    ci95: list[tuple[float, float] | None] | None = None
    outcomes: list[Literal["holds", "fails", "inconclusive"]]
    verdict: str

    @model_validator(mode="after")
    def _check(self) -> RobustnessCheck:
        n = len(self.values)
        if n == 0:
            raise ValueError(f"robustness check {self.choice!r} needs at least one value")
        lens = {"results": len(self.results), "outcomes": len(self.outcomes)}
        if self.ci95 is not None:
            lens["ci95"] = len(self.ci95)
        bad = {k: m for k, m in lens.items() if m != n}
        if bad:
            raise ValueError(f"robustness check {self.choice!r}: {bad} must each have len(values) = {n}")
        if self.verdict != _agree(self.outcomes, self.choice):
            raise ValueError(
                f"robustness check {self.choice!r}: verdict {self.verdict!r} does not follow from the "
                f"outcomes {self.outcomes}; build it with RobustnessCheck.from_values"
            )
        return self

    @classmethod
    def from_values(
        cls,
        criterion: Criterion,
        choice: str,
        values: Sequence[Any],
        results: Sequence[float | None],
        *,
        ci95: Sequence[Sequence[float] | None] | None = None,
        outcomes: Sequence[str] | None = None,
    ) -> RobustnessCheck:
        """Decide each result with ``criterion`` and record the choice's verdict. ``outcomes``: each
        result's outcome where a rule declared with the criterion decides it (e.g. the criterion together
        with a paired control); default: :meth:`Criterion.decide` of each result."""
        if ci95 is not None and len(ci95) != len(results):
            raise VerdictError(
                f"robustness check {choice!r}: ci95 has {len(ci95)} entries for "
                f"{len(results)} results; give one interval (or None) per result"
            )
        cis = list(ci95) if ci95 is not None else [None] * len(results)
        if outcomes is None:
            outcomes = [criterion.decide(r, c) for r, c in zip(results, cis, strict=True)]
        elif len(outcomes) != len(results) or any(o not in OUTCOMES for o in outcomes):
            raise VerdictError(
                f"robustness check {choice!r}: outcomes {list(outcomes)} must give one of {OUTCOMES} per "
                f"result ({len(results)})"
            )
        outcomes = list(outcomes)
        clean = [None if r is None else float(r) for r in results]
        ci_out = None if ci95 is None else [None if c is None else _interval(c) for c in cis]
        return cls(
            choice=choice,
            values=list(values),
            results=clean,
            ci95=ci_out,
            outcomes=outcomes,
            verdict=_agree(outcomes, choice),
        )


def _agree(outcomes: Sequence[str], choice: str) -> str:
    s = set(outcomes)
    if len(s) == 1:
        return outcomes[0]
    if s == {"holds", "inconclusive"} or s == {"fails", "inconclusive"}:
        return "inconclusive"
    return f"depends on {choice}"


def combine(main: str, checks: Iterable[RobustnessCheck]) -> str:
    """The record's verdict from the main outcome and the robustness checks.

    ``holds`` / ``fails`` only when the main outcome and every value of every check say so;
    ``depends on A, B`` naming the choices whose values disagree with each other or with the main
    outcome (holds against fails); otherwise ``inconclusive``. With an inconclusive main outcome, checks
    of which some values hold and others fail make the record ``depends on`` the checks whose own values
    disagree (review round 5 of ``real_model_flows``, F7), or, where the disagreement is only between
    checks, every check with a decided value (review round 3: such a record was labelled
    ``inconclusive``, which says "too few data" where the choices disagree).
    """
    checks = list(checks)
    outcomes = [main] + [o for c in checks for o in c.outcomes]
    if all(o == main for o in outcomes) and main in ("holds", "fails"):
        return main
    opposite = {"holds": "fails", "fails": "holds"}.get(main)
    if opposite is None:  # main inconclusive: the choices disagree when both decided outcomes occur
        decided = {"holds", "fails"}
        if decided <= set(outcomes):
            # name the checks whose own values disagree (review round 5 of real_model_flows, F7); only
            # where the disagreement is between checks, every check with a decided value
            split = [c.choice for c in checks if decided <= set(c.outcomes)]
            depends = split or [c.choice for c in checks if decided & set(c.outcomes)]
        else:
            depends = [c.choice for c in checks if c.verdict.startswith("depends on")]
    else:
        depends = [c.choice for c in checks if c.verdict.startswith("depends on") or opposite in c.outcomes]
    if depends:
        return "depends on " + ", ".join(dict.fromkeys(depends))
    return "inconclusive"


class VerdictRecord(BaseModel):
    """One verdict of a study, as written to ``summary.json`` (see the module docstring).

    Build it with :func:`record_test`, :func:`record_identity` or :func:`record_description`; read one
    back with :meth:`VerdictRecord.model_validate` (or :func:`read_records`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    statement: str = Field(min_length=1)
    source: str = Field(min_length=1)
    klass: Literal["test", "identity", "description"] = Field(alias="class")
    criterion: Criterion | None = None
    result: dict[str, Any] = Field(default_factory=dict)
    robustness: list[RobustnessCheck] = Field(default_factory=list)
    uncertainty: dict[str, Any] = Field(default_factory=dict)
    verdict: str
    notes: str = ""

    @model_validator(mode="after")
    def _check(self) -> VerdictRecord:
        if self.klass == "test":
            if self.criterion is None:
                raise ValueError(f"record {self.id!r}: a test needs a criterion declared before the data")
            main = self.result.get("outcome")
            if main not in OUTCOMES:
                raise ValueError(
                    f"record {self.id!r}: result.outcome must be one of {OUTCOMES}: got {main!r}"
                )
            want = combine(main, self.robustness)
            if self.verdict != want:
                raise ValueError(
                    f"record {self.id!r}: verdict {self.verdict!r} does not follow from the "
                    f"result and robustness ({want!r}); build it with record_test"
                )
            if not self.uncertainty.get("method") or "samples" not in self.uncertainty:
                raise ValueError(f"record {self.id!r}: a test states its uncertainty: samples and method")
        elif self.verdict != self.klass:
            raise ValueError(
                f"record {self.id!r}: the verdict of a{'n' * (self.klass == 'identity')} "
                f"{self.klass} is {self.klass!r}: got {self.verdict!r}"
            )
        if not (self.source.startswith("derived:") or any(ch.isdigit() for ch in self.source)):
            raise ValueError(
                f"record {self.id!r}: source must locate the claim (paper, section, equation) or read "
                f"'derived: docs/PAGE.md#anchor': got {self.source!r}"
            )
        return self

    def to_json(self) -> dict:
        """The record as JSON-ready data (key ``class``, not ``klass``)."""
        return self.model_dump(mode="json", by_alias=True)


def record_test(
    *,
    id: str,
    statement: str,
    source: str,
    criterion: Criterion,
    value: float | None,
    ci95: Sequence[float] | None = None,
    samples: int,
    method: str,
    robustness: Sequence[RobustnessCheck] = (),
    extra: Mapping[str, Any] | None = None,
    notes: str = "",
    outcome: str | None = None,
) -> VerdictRecord:
    """A record of class ``test``: the criterion decides ``value`` (with ``ci95``), the robustness checks
    can only weaken it (see :func:`combine`).

    Parameters
    ----------
    samples : int
        The sample size behind ``ci95`` (clouds, paths, draws, fitted points).
    method : str
        How the interval was computed (``"Wilson interval"``, ``"t interval of the slope"``, ``"bootstrap
        over clouds, 2000 resamples"``; ``"none: deterministic"`` for a deterministic quantity).
    extra : mapping, optional
        Further numbers of the result (kept under ``result``).
    outcome : str, optional
        The main outcome where a rule declared with the criterion decides it (e.g. the criterion together
        with a paired control; say which in ``notes``); default: :meth:`Criterion.decide` of ``value``.
    """
    if outcome is None:
        outcome = criterion.decide(value, ci95)
    elif outcome not in OUTCOMES:
        raise VerdictError(f"record {id!r}: outcome must be one of {OUTCOMES}: got {outcome!r}")
    result: dict[str, Any] = {"value": None if value is None else float(value), "outcome": outcome}
    if ci95 is not None:
        result["ci95"] = list(_interval(ci95, None if value is None else float(value)))
    if extra:
        result.update(dict(extra))
    checks = list(robustness)
    return VerdictRecord(
        id=id,
        statement=statement,
        source=source,
        klass="test",
        criterion=criterion,
        result=result,
        robustness=checks,
        uncertainty={"samples": int(samples), "method": method},
        verdict=combine(outcome, checks),
        notes=notes,
    )


def record_identity(
    *, id: str, statement: str, source: str, why: str, result: Mapping[str, Any] | None = None
) -> VerdictRecord:
    """A record of class ``identity``: true by construction (``why`` says which construction); kept as a
    code test, never counted as confirmation."""
    return VerdictRecord(
        id=id,
        statement=statement,
        source=source,
        klass="identity",
        result=dict(result or {}),
        verdict="identity",
        notes=why,
    )


def record_description(
    *, id: str, statement: str, source: str, result: Mapping[str, Any] | None = None, notes: str = ""
) -> VerdictRecord:
    """A record of class ``description``: numbers without a falsifiable statement (``statement`` says what
    they show)."""
    return VerdictRecord(
        id=id,
        statement=statement,
        source=source,
        klass="description",
        result=dict(result or {}),
        verdict="description",
        notes=notes,
    )


def read_records(summary: Mapping[str, Any], *, where: str = "summary.json") -> list[VerdictRecord]:
    """The verdict records of a study's summary (key ``"verdicts"``), validated.

    Raises
    ------
    VerdictError
        Naming the record and the rule it breaks.
    """
    raw = summary.get("verdicts")
    if not isinstance(raw, list):
        raise VerdictError(
            f"{where} has no list under 'verdicts': got {type(raw).__name__}; a study writes "
            "its records with VerdictRecord.to_json()"
        )
    out = []
    for i, r in enumerate(raw):
        try:
            out.append(VerdictRecord.model_validate(r))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "record"
            raise VerdictError(f"{where}: verdicts[{i}] {loc}: {first['msg']}") from None
    ids = Counter(r.id for r in out)
    dup = [k for k, m in ids.items() if m > 1]
    if dup:
        raise VerdictError(f"{where}: verdict ids must be unique: {dup} repeated")
    return out


def count_records(records: Iterable[VerdictRecord]) -> dict[str, dict[str, int]]:
    """Counts by class and, for tests, by verdict (``depends on ...`` counted as ``depends``)."""
    by_class: Counter = Counter()
    by_verdict: Counter = Counter()
    for r in records:
        by_class[r.klass] += 1
        if r.klass == "test":
            by_verdict["depends" if r.verdict.startswith("depends on") else r.verdict] += 1
    return {
        "class": {k: by_class.get(k, 0) for k in CLASSES},
        "verdict": {k: by_verdict.get(k, 0) for k in ("holds", "fails", "depends", "inconclusive")},
    }
