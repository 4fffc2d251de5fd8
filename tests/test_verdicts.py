"""The verdict machinery (attnflow.analysis.verdicts): a criterion decides with its interval, robustness
checks can only weaken a verdict, and a record whose verdict does not follow from its numbers is refused."""

import json

import pytest

from attnflow.analysis.verdicts import (
    Criterion,
    RobustnessCheck,
    VerdictError,
    VerdictRecord,
    combine,
    count_records,
    read_records,
    record_description,
    record_identity,
    record_test,
)

LE = Criterion(quantity="error", op="<=", threshold=0.1, declared_in="config: tol")
BAND = Criterion(quantity="exponent", op="within", threshold=(-1.2, -0.8), declared_in="config: band")


@pytest.mark.parametrize(
    ("crit", "value", "ci", "want"),
    [
        (LE, 0.05, None, "holds"),
        (LE, 0.2, None, "fails"),
        (LE, 0.05, (0.01, 0.09), "holds"),
        (LE, 0.05, (0.01, 0.3), "inconclusive"),  # the interval straddles the threshold
        (LE, 0.5, (0.3, 0.7), "fails"),
        (BAND, -1.0, (-1.1, -0.9), "holds"),
        (BAND, -1.0, (-1.5, -0.5), "inconclusive"),  # wider than the band: both sides possible
        (BAND, -0.5, (-0.6, -0.4), "fails"),
        (BAND, -0.79, (-0.85, -0.7), "inconclusive"),
        (LE, None, None, "inconclusive"),
    ],
)
def test_criterion_decides_with_its_interval(crit, value, ci, want):
    assert crit.decide(value, ci) == want


def test_outside_and_strict_ops():
    out = Criterion(quantity="q", op="outside", threshold=(0.0, 1.0), declared_in="config: q")
    assert out.decide(2.0, (1.5, 2.5)) == "holds" and out.decide(0.5, (0.4, 0.6)) == "fails"
    gt = Criterion(quantity="q", op=">", threshold=1.0, declared_in="config: q")
    assert gt.decide(1.0) == "fails" and gt.decide(1.0 + 1e-12) == "holds"


def test_criterion_refuses_bad_definitions_and_intervals():
    with pytest.raises(ValueError, match="op 'within' takes a band"):
        Criterion(quantity="q", op="within", threshold=1.0, declared_in="config: q")
    with pytest.raises(ValueError, match="takes one number"):
        Criterion(quantity="q", op="<=", threshold=(0.0, 1.0), declared_in="config: q")
    with pytest.raises(ValueError, match="lo <= hi"):
        Criterion(quantity="q", op="within", threshold=(1.0, 0.0), declared_in="config: q")
    with pytest.raises(VerdictError, match="must contain the value"):
        LE.decide(0.5, (0.0, 0.1))
    with pytest.raises(VerdictError, match="must not be NaN"):
        LE.decide(float("nan"))
    with pytest.raises(VerdictError, match="pair"):
        LE.decide(0.05, (0.0,))


def test_robustness_and_combination_only_weaken():
    ok = RobustnessCheck.from_values(LE, "dt", [0.01, 0.005], [0.05, 0.04])
    mixed = RobustnessCheck.from_values(LE, "N", [8, 64], [0.05, 0.5])
    unsure = RobustnessCheck.from_values(LE, "seed", [0, 1], [0.05, 0.05], ci95=[(0.0, 0.09), (0.0, 0.2)])
    assert ok.verdict == "holds" and mixed.verdict == "depends on N" and unsure.verdict == "inconclusive"
    assert combine("holds", [ok]) == "holds"
    assert combine("holds", [ok, mixed]) == "depends on N"
    assert combine("holds", [ok, unsure]) == "inconclusive"
    assert combine("fails", [RobustnessCheck.from_values(LE, "dt", [0.01], [0.05])]) == "depends on dt"
    assert combine("fails", []) == "fails"
    # an inconclusive main outcome: checks that hold in one place and fail in another make it depend on
    # them (review round 3 of real_model_flows: such a record said "inconclusive")
    fail_rep = RobustnessCheck.from_values(LE, "representation", ["hidden"], [0.5])
    hold_len = RobustnessCheck.from_values(LE, "sentence length", [3], [0.05])
    vague = RobustnessCheck.from_values(LE, "seed", [1], [0.05], ci95=[(0.0, 0.2)])
    assert (
        combine("inconclusive", [vague, fail_rep, hold_len]) == "depends on representation, sentence length"
    )
    assert combine("inconclusive", [vague, hold_len]) == "inconclusive"
    # review round 5 (F7): only the check whose own values disagree is named
    assert combine("inconclusive", [ok, mixed]) == "depends on N"
    assert combine("inconclusive", [fail_rep, hold_len]) == "depends on representation, sentence length"
    with pytest.raises(ValueError, match="does not follow from the outcomes"):
        RobustnessCheck(choice="dt", values=[1], results=[0.05], outcomes=["holds"], verdict="fails")
    with pytest.raises(ValueError, match="len"):
        RobustnessCheck(choice="dt", values=[1, 2], results=[0.05], outcomes=["holds"], verdict="holds")


def test_a_claim_that_is_false_gets_fails_and_survives_a_json_round_trip():
    # the synthetic world where the claim is false: the error is large under every choice
    rec = record_test(
        id="synthetic",
        statement="the error is small",
        source="derived: docs/theory_checks.md#x",
        criterion=LE,
        value=0.4,
        ci95=(0.35, 0.45),
        samples=1000,
        method="Wilson interval",
        robustness=[RobustnessCheck.from_values(LE, "dt", [0.01, 0.005], [0.4, 0.41])],
    )
    assert rec.verdict == "fails"
    back = read_records(json.loads(json.dumps({"verdicts": [rec.to_json()]})))
    assert back == [rec] and rec.to_json()["class"] == "test"


def test_records_whose_verdict_does_not_follow_are_refused():
    rec = record_test(
        id="a",
        statement="s",
        source="2605.18870, eq. (127)",
        criterion=LE,
        value=0.05,
        samples=3,
        method="none: deterministic",
    )
    data = rec.to_json()
    data["verdict"] = "fails"
    with pytest.raises(VerdictError, match=r"verdicts\[0\].*does not follow"):
        read_records({"verdicts": [data]})
    with pytest.raises(VerdictError, match="unique"):
        read_records({"verdicts": [rec.to_json(), rec.to_json()]})
    with pytest.raises(VerdictError, match="no list under 'verdicts'"):
        read_records({})
    with pytest.raises(ValueError, match="source must locate the claim"):
        record_identity(id="b", statement="s", source="the paper", why="chain rule")
    with pytest.raises(ValueError, match="needs a criterion"):
        VerdictRecord.model_validate({**data, "verdict": "holds", "criterion": None})
    with pytest.raises(ValueError, match="uncertainty"):
        VerdictRecord.model_validate({**rec.to_json(), "uncertainty": {}})
    with pytest.raises(ValueError, match="the verdict of an identity is 'identity'"):
        VerdictRecord.model_validate(
            {
                **record_identity(id="c", statement="s", source="derived: x", why="sum of squares").to_json(),
                "verdict": "holds",
            }
        )


def test_counts_by_class_and_verdict():
    recs = [
        record_test(
            id="t1",
            statement="s",
            source="2605.18870 Sec. 6",
            criterion=LE,
            value=0.05,
            samples=1,
            method="none: deterministic",
        ),
        record_test(
            id="t2",
            statement="s",
            source="2605.18870 Sec. 6",
            criterion=LE,
            value=0.05,
            samples=1,
            method="none: deterministic",
            robustness=[RobustnessCheck.from_values(LE, "N", [1, 2], [0.05, 0.5])],
        ),
        record_identity(id="i", statement="s", source="derived: x", why="chain rule"),
        record_description(id="d", statement="s", source="2605.18870 Fig. 2"),
    ]
    c = count_records(recs)
    assert c["class"] == {"test": 2, "identity": 1, "description": 1}
    assert c["verdict"] == {"holds": 1, "fails": 0, "depends": 1, "inconclusive": 0}
