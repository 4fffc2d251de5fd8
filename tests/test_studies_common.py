"""Helpers shared by the studies: run-name tags, the whole-step rule, and the study directory lock."""

from __future__ import annotations

import pytest

from attnflow.experiments.locking import DirectoryLock, DirectoryLockedError
from attnflow.studies import run_study
from attnflow.studies.common import value_tag, whole_steps


def test_value_tags_are_distinct_and_file_name_safe() -> None:
    values = [1e-3, 1.2e-3, 1.5e-3, 2e-3, 1e-6, 1e-5, 0.5, 5.0]
    tags = [value_tag(v) for v in values]
    assert len(set(tags)) == len(values), tags
    assert all(ch.isalnum() for tag in tags for ch in tag), tags


def test_whole_steps_uses_the_core_rule_and_names_the_keys() -> None:
    assert whole_steps(1.0, 0.25) == 4
    with pytest.raises(
        ValueError, match=r"sec6_t1 / sec6_dt: \(t1 - t0\)/dt must be a whole number.*or choose sec6_dt = "
    ):
        whole_steps(1.0, 0.3, "sec6_")


def test_a_study_directory_in_use_is_refused(tmp_path) -> None:
    out = tmp_path / "study"
    out.mkdir()
    with DirectoryLock(out, "study directory"), pytest.raises(DirectoryLockedError, match="study directory"):
        run_study("stability_weights", out, quick=True)


def test_distinct_and_positive_parameters_name_the_value_and_the_fix() -> None:
    from attnflow.studies.common import distinct_sorted, positive_distinct

    assert distinct_sorted([3, 1, 2], "head counts") == [1, 2, 3]
    with pytest.raises(
        ValueError, match=r"the head counts must be distinct: got \[2\] more than once in \[1, 2, 2\]"
    ):
        distinct_sorted([1, 2, 2], "head counts")
    with pytest.raises(
        ValueError, match=r"every eta must be > 0 \(eta = 0 is no perturbation\): got \[0.0\]; give e.g."
    ):
        positive_distinct([0.0, 1e-3], "eta", "etas", "eta = 0 is no perturbation", "[1e-6, 1e-3]")


def test_fit_order_interval_covers_and_two_points_are_exact() -> None:
    """fit_order: exact two-point slope without an interval; with noisy points, the 95% interval
    covers the true order and shrinks with more points."""
    import numpy as np

    from attnflow.studies.multihead_common import fit_order

    two = fit_order([1.0, 4.0], [2.0, 32.0])
    assert two["order"] == pytest.approx(2.0, abs=1e-12) and two["order_ci"] is None
    rng = np.random.default_rng(0)
    x = np.logspace(-3, -1, 8)
    y = 3.0 * x**1.5 * np.exp(0.05 * rng.standard_normal(x.size))
    f = fit_order(x, y)
    lo, hi = f["order_ci"]
    assert lo < 1.5 < hi and hi - lo < 0.3 and f["points"] == 8
    assert fit_order([1.0, 2.0], [0.0, -1.0])["order"] is None


def test_weight_regimes_are_fresh_copies_and_an_unknown_one_is_named() -> None:
    from attnflow.studies.common import WEIGHT_REGIMES, weight_regime

    w = weight_regime("ou")
    assert w == {"process": "ornstein_uhlenbeck", "sigma2": 1.0, "F": "identity"}
    w["sigma2"] = 2.0  # a study changing its copy leaves the shared table alone
    assert WEIGHT_REGIMES["ou"]["sigma2"] == 1.0
    with pytest.raises(ValueError, match=r"unknown weight regime 'osc'.*\['frozen', 'osc_per_head'"):
        weight_regime("osc")
