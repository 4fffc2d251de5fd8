"""The helpers of the review script docs/studies/real_model_flows/review/round11/null_seeds.py (review
round 9, F3: the permuted MiniLM-L6 null over 10 permutation seeds): the over-cluster quantity over chosen
depths, the paired trained - null bootstrap and the seed spread, each against a plain NumPy reference on fake
arrays."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

_PATH = Path(__file__).resolve().parents[1] / "docs/studies/real_model_flows/review/round11/null_seeds.py"
_spec = importlib.util.spec_from_file_location("null_seeds_review", _PATH)
ns = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ns)


def _arrays(seed: int, S: int = 9, L: int = 6):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.0, 1.0, size=(S, L + 1)) for _ in range(4)]


def _over(m, f, depths):
    """Independent reference: mean over ``depths`` of (flow's per-depth mean - model's per-depth mean)."""
    return float(np.mean([f[:, d].mean() - m[:, d].mean() for d in depths]))


def test_over_depths_is_the_mean_excess_over_the_chosen_depths():
    m, f, _, _ = _arrays(0)
    for depths in ([1, 2, 3], [1, 2, 3, 4, 5, 6], [2]):
        np.testing.assert_allclose(ns.over_depths(depths)(m, f), _over(m, f, depths), rtol=0, atol=1e-12)


def test_over_depths_over_all_depths_is_the_study_quantity():
    from attnflow.studies.real_model_flows import _quantity

    m, f, _, _ = _arrays(1)
    np.testing.assert_allclose(ns.over_depths(list(range(1, 7)))(m, f), _quantity("over")(m, f), atol=1e-12)


def test_over_depths_rejects_depth_zero():
    with pytest.raises(ValueError, match="depths must be a non-empty list of depths >= 1"):
        ns.over_depths([0, 1])


def test_paired_diff_resamples_the_four_arrays_together():
    m1, f1, m2, f2 = _arrays(2)
    B, seed, d = 200, 7, [1, 2, 3]
    got = ns.paired_diff(ns.over_depths(d), m1, f1, m2, f2, B, seed)
    # reference: the same resample indices drawn by hand, one index set per replicate for all four arrays
    idx = np.random.default_rng(seed).integers(0, len(m1), size=(B, len(m1)))
    vals = [_over(m1[i], f1[i], d) - _over(m2[i], f2[i], d) for i in idx]
    lo, hi = np.percentile(vals, [2.5, 97.5])
    v = _over(m1, f1, d) - _over(m2, f2, d)
    np.testing.assert_allclose(got["value"], v, atol=1e-12)
    np.testing.assert_allclose(got["ci95"], [min(lo, v), max(hi, v)], atol=1e-12)
    # unpaired resampling (independent index sets) would give a different interval on these arrays
    idx2 = np.random.default_rng(seed + 1).integers(0, len(m1), size=(B, len(m1)))
    unpaired = [_over(m1[i], f1[i], d) - _over(m2[j], f2[j], d) for i, j in zip(idx, idx2, strict=True)]
    assert not np.allclose(got["ci95"], np.percentile(unpaired, [2.5, 97.5]), atol=1e-6)


def test_paired_diff_rejects_arrays_of_different_shapes():
    m1, f1, m2, f2 = _arrays(3)
    with pytest.raises(ValueError, match="four arrays of one shape"):
        ns.paired_diff(ns.over_depths([1]), m1, f1, m2[:-1], f2[:-1], 10, 0)


def test_spread_counts_the_seeds_whose_upper_ci_is_below_the_trained_lower_ci():
    vals, ups = [0.1, 0.3, 0.2, 0.05], [0.15, 0.36, 0.24, 0.09]
    sp = ns.spread(vals, ups, trained_value=0.4, trained_lower=0.35)
    assert sp["seeds_upper_ci_below_trained_lower_ci"] == 3
    assert sp["seed_positions_below"] == [0, 2, 3]
    np.testing.assert_allclose([sp["min"], sp["median"], sp["max"]], [0.05, 0.15, 0.3])
    np.testing.assert_allclose(sp["sd"], np.sqrt(np.sum((np.array(vals) - 0.1625) ** 2) / 3))
    np.testing.assert_allclose(sp["trained_minus_max_null"], 0.1)


def test_spread_rejects_mismatched_bounds():
    with pytest.raises(ValueError, match="one upper CI per value"):
        ns.spread([0.1, 0.2], [0.3], 0.5, 0.4)
