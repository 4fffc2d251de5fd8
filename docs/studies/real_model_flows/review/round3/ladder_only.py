"""The step rule's ladder alone (no records) on the first S drawn sentences of a family: a measurement.

Usage (repository root): PYTHONPATH=src python docs/studies/real_model_flows/review/round3/ladder_only.py
FAMILY S OUT.json. Run by flows5 for SmolLM2 on 6 sentences (smollm2_ladder_6.json), whose full rerun under
the rule did not fit the session; the same functions as family_task (_ladder_level, step_values, choose_step).
"""

import json
import sys
import time
from pathlib import Path

import torch

from attnflow.bridge import forward
from attnflow.bridge.flows import stream_scales, without_mlp
from attnflow.studies.multihead_common import jsonable, one_thread
from attnflow.studies.real_model_flows import (
    FlowsConfig,
    _halves,
    _ladder_level,
    _profile,
    _stack,
    choose_step,
    load_family,
    step_tolerances,
    step_values,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # review/: common
from common import draw_sentences  # noqa: E402

fam, S, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = FlowsConfig(families=["smollm2"], sentences=S, split_seeds=[0])
t0 = time.perf_counter()
with one_thread(), torch.no_grad():
    w, tokenize, _ = load_family(fam, 0)
    ids, _ = draw_sentences(tokenize, w.max_length, c.corpus_seed, c.max_tokens, S)
    fps = [forward(w, t) for t in ids]
    pre = w.arch == "pre_ln"
    rhos = [stream_scales(w, fp.hidden_states, c.scale_estimator) if pre else None for fp in fps]
    wn = without_mlp(w)
    refs = {
        "model": _stack([_profile(fp.tokens, fp.tokens, c.thresholds) for fp in fps]),
        "no_mlp": _stack(
            [_profile(forward(wn, t).tokens, fp.tokens, c.thresholds) for t, fp in zip(ids, fps, strict=True)]
        ),
    }
    A, B = _halves(S, 0)
    levels = {}
    probe = {"tokens": [len(t) for t in ids], "stats": {"sphere": refs}, "step_ladder": {"levels": levels}}
    tol = step_tolerances(c)
    for K in c.step_candidates:
        levels[str(K)] = _ladder_level(w, fps, rhos, c, K, A, B)
        vals = {int(x): step_values(probe, c, int(x)) for x in levels}
        print(K, f"{levels[str(K)]['cpu_s']:.0f} s", {k: round(v, 3) for k, v in vals[K].items()}, flush=True)
        pick = choose_step(vals, tol, c.step_candidates)
        json.dump(
            jsonable(
                {
                    "family": fam,
                    "sentences": S,
                    "values": vals,
                    "cpu_s": {k: v["cpu_s"] for k, v in levels.items()},
                    "pick": pick,
                    "wall_s": time.perf_counter() - t0,
                }
            ),
            open(out, "w"),
            indent=1,
        )
        if pick is not None:
            break
print("chosen", pick["chosen"], "converged", pick["converged"])
