# -- stability_weights (study 3) --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilons": [0.0, 1e-3, 1e-2]}, r"every eps must be > 0.*got \[0.0\]"),
        ({"epsilons": [1e-3, 1e-2]}, "epsilons: List should have at least 3 items"),
        ({"epsilons": [1e-3, 1e-3, 1e-2]}, "epsilons must be distinct"),
        ({"kinds": ["bias"]}, "kinds.0"),
        ({"t1": 1.0, "dt": 0.3}, "whole number of steps"),
    ],
)
def test_stability_weights_refuses_bad_parameters(params, match):
    with pytest.raises(StudyConfigError, match=match):
        get_study("stability_weights").config(params, quick=True)


def test_stability_weights_quick_study_has_linear_rates(tmp_path):
    s = run_study(
        "stability_weights",
        tmp_path / "sw",
        quick=True,
        params={"inputs_dir": str(tmp_path / "in")},
        workers=1,
    )
    for kind in ("heads", "noise"):
        f = s["kinds"][kind]["fits"]
        for q in ("abs_dE_T", "W2_T"):
            # eps in [1e-3, 1e-1] at T = 0.5: the linear term dominates, b within 0.1 of 1
            assert abs(f[q]["b"] - 1) < 0.1, (kind, q, f[q]["b"])
    # frozen heads: no weight-driven change of the energy
    assert all(v["abs_d_dtE_T"]["mean"] == 0 for v in s["kinds"]["heads"]["per_eps"].values())
