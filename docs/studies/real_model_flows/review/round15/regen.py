"""Regenerate every real_model_flows record directory after review round 14 (F2, F3, F6), the nulls first.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round15/regen.py [ROOT] [--before F] [--after F] [--tables]

First two committed descriptive checks are written into the summaries they concern (no record is changed by
writing them; the records read them when regenerated):

* ``families["smollm2"].time_cap_check`` (R14 F3, R15 F5): the fitted-time refits with the time grid's cap
  at 16 beside the same fits at the declared cap 8 (which reproduce the committed fits), declared estimator:
  at the run's step K = 4 (``review/round11/fit_scale_check_K4[_T16].json``) and at the main value's K = 16
  (``review/round15/fit_scale_check_K16[_T16].json``);
* ``families["smollm2-permuted"].null_seeds_check`` (R14 F2): the permuted null's record
  frames-follows-network-cos over permutation seeds 0..9, each scored by the study's own rules
  (``review/round15/null_seeds_smollm2.json``; declared first in ``null_seeds_smollm2_declared.md``).

Then round 11's procedure (``review/round11/regen.py``: the scale check, then round 8's chain) runs. No flow
is run.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
R11 = HERE.parent / "round11"


def _write(root: Path, d: str, fam: str, key: str, value: dict) -> None:
    p = root / d / "summary.json"
    text = p.read_text()
    s = json.loads(text)
    if fam not in s["families"]:
        raise SystemExit(f"{p}: no family {fam!r}")
    s["families"][fam][key] = value
    lines = text.splitlines()
    indent = (len(lines[1]) - len(lines[1].lstrip(" "))) if len(lines) > 1 else 1
    p.write_text(json.dumps(s, indent=indent or 1) + ("\n" if text.endswith("\n") else ""))
    print(f"{p}: {key} written")


def _refit(K: int, folder: Path, base: str) -> dict:
    """One refit with a wider time grid beside the same fit at the declared grid (same K, split seed 0
    A->B, declared estimator), from the committed fit_scale_check outputs."""
    a = json.loads((folder / f"{base}.json").read_text())
    b = json.loads((folder / f"{base}_T16.json").read_text())
    ea, eb = a["estimators"]["mean"], b["estimators"]["mean"]
    if ea.get("step1_max_abs_diff", 1.0) > 1e-6:
        raise SystemExit(f"{base}.json did not reproduce the committed fit; not written")
    if (a["K"], a["fit_half"], a["report_half"]) != (b["K"], b["fit_half"], b["report_half"]) or a["K"] != K:
        raise SystemExit(f"{base}: the two fits are not on the same step and halves; not written")
    rel = folder.relative_to(HERE.parent.parent).as_posix()
    return {
        "source": f"{rel}/{base}_T16.json (declared cap: {base}.json)",
        "fit": "split seed 0 A->B (fitted on half A, scored on half B), declared estimator 'mean'",
        "K": K, "declared_max_time": a["max_time"], "max_time": b["max_time"],
        "times": eb["times"], "times_declared_cap": ea["times"],
        "value_declared_cap": {k: ea["fitted"][k] for k in ("value", "ci95", "outcome")},
        "value": {k: eb["fitted"][k] for k in ("value", "ci95", "outcome")},
        "rule": "review round 14, F3; round 15, F5: the reading cites the committed refits in place of "
        "'not refitted'",
    }  # fmt: skip


def time_cap(root: Path) -> list:
    """The refits with a wider time grid: at the run's step K = 4 and at the main value's K = 16."""
    tc = [_refit(4, R11, "fit_scale_check_K4"), _refit(16, HERE, "fit_scale_check_K16")]
    _write(root, "smollm2", "smollm2", "time_cap_check", tc)
    return tc


def _seeds_check(path: Path) -> dict:
    """A null record over more permutation seeds, each scored by the study's rules (a committed check)."""
    x = json.loads(path.read_text())
    if not x["step1_match"]["ok"]:
        raise SystemExit(f"{path.name} did not reproduce the committed record; not written")
    per_K = {}
    for K, r in x["per_K"].items():
        per_K[K] = {
            "seeds": [p["choice_value"] for p in r["per_seed"]],
            "outcomes": [p["outcome"] if p["measured"] else
                         "void for lack of room" if p.get("no_headroom") else "void by the collapse control"
                         for p in r["per_seed"]],
            "values": [p["value"] for p in r["per_seed"]],
            "all_depths": [e["all_depths"] for e in r["per_seed_depths"]],
            "counts": r["counts"], "combined": r["combined"],
        }  # fmt: skip
    return {
        "record": x["record"].split(f"flows-{x['family']}-", 1)[1], "check": "permutation seed",
        "source": f"review/round15/{path.name}", "K_main": 16, "per_K": per_K, "threshold": x["threshold"],
        "rule": "review round 14, F2 (declared before the data, null_seeds_smollm2_declared.md): the trained "
        "record's null line counts the null as failing (holding) only if every seed at K = 16 and at K = 4 "
        "is a measured fail (hold); otherwise it names the counts at each K",
    }  # fmt: skip


def null_seeds(root: Path) -> None:
    """The permuted nulls' records checked over permutation seeds 0..9 at K = 16 and 4 (R14 F2, R15 F3)."""
    x = json.loads((HERE / "null_seeds_smollm2.json").read_text())
    if x["n_sentences"] != 24:
        raise SystemExit("null_seeds_smollm2.json: not the committed 24 sentences; not written")
    sm = _seeds_check(HERE / "null_seeds_smollm2.json")
    sm["source"] += " (declared: null_seeds_smollm2_declared.md)"
    _write(root, "permuted_smollm2", "smollm2-permuted", "null_seeds_check", [sm])
    mi = _seeds_check(HERE / "null_seeds_minilm_fitted.json")
    mi["source"] += " (declared: null_seeds_minilm_fitted_declared.md)"
    _write(root, "permuted", "minilm-permuted", "null_seeds_check", [mi])


if __name__ == "__main__":
    argv = sys.argv[1:]
    flags = ("--before", "--after")
    pos = [a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] not in flags)]
    root = Path(pos[0]) if pos else Path("docs/studies/real_model_flows")
    time_cap(root)
    null_seeds(root)
    sys.argv = [str(R11 / "regen.py"), *argv]
    sys.path.insert(0, str(R11))
    runpy.run_path(str(R11 / "regen.py"), run_name="__main__")
