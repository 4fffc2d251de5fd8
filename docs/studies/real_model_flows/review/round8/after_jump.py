"""Review round 8 (issue #26; review round 7, F1 (ii)): SmolLM2's flows (e) and (g) with the jump layer(s)
taken from the network, and the claim "adding the MLP closes the gap" on the layers after the jump.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round8/after_jump.py [ROOT] [--sentences all|report]
        [--steps 4,16,64] [--out FILE.json]

Per family (SmolLM2 trained, ``smollm2``, from ROOT/smollm2; its permuted null, ``smollm2-permuted``, from
ROOT/permuted_smollm2; each with its own study.json config, read through the study's Config so that rules
added since (``mlp_jump_factor``, the round-5..7 control rules) take their declared defaults):

* the sentences: the study's own draw (``family_task``: corpus order from ``corpus_seed``, sentences of
  3..min(max_tokens, model maximum) tokens, the first ``sentences``); ``--sentences report``: only the
  report half of the study's main split (``_halves(S, split_seeds[0])[1]``, 12 of 24), to bound the CPU time;
* the jump layers: ``mlp_jumps(mlp_layer_table(w, ids, scale_estimator, K=0), mlp_jump_factor)`` on the
  sentences used, beside the stored table of round 7 (``verdict_data.mlp_layers``, all 24 sentences);
* per sentence: the model's sphere tokens (``forward``), the no-MLP network (n), flow (a) (plain, every layer
  a flow), and flows (e) ``mlp`` and (g) ``frames_mlp`` with ``network_layers`` = the jump layers
  (``layer_flow(..., network_layers=..., model_tokens=...)``): at a jump layer the tokens after it are the
  model's own and the flow goes on from them; rho_l by the config's scale estimator; at every K of
  ``--steps`` (flow (a) only at the K the study's step rule chose for it, stored step_ladder.chosen);
* depths s..L, s = 1 + the last layer of the leading run of jump layers (2 for jump layers [0]): mean
  cosine and effective rank (sphere tokens, mean over sentences) of every column; the gap |flow - model| in
  mean cosine and the relative gap in effective rank, averaged over depths s..L (the quantities of mlp-cos
  and mlp-erank, config criterion_cos_gap / criterion_rel_gap, restricted to depths s..L); and the
  round-5..7 scoring of those two records (``real_model_flows.scored``: bootstrap interval, the
  stand-still and collapse controls with their paired tests, the config's margins and rules) on the arrays
  of depths s-1..L, whose first column (depth s - 1, where the after-jump flow is the model's own tokens)
  plays depth 0: the stand-still holds the model's depth s - 1;
* the step rule (config step_tolerance_share x the criterion's threshold; the round-4 amendment: the
  outcome must not change either) between consecutive K.

Descriptive: no record is changed. Prints a table and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # review/: common
from common import draw_sentences, family_weights  # noqa: E402

FAMILIES = (("smollm2", "smollm2"), ("smollm2-permuted", "permuted_smollm2"))
RECORDS = (("mlp-cos", "cos", "gap", "criterion_cos_gap"), ("mlp-erank", "erank", "rel", "criterion_rel_gap"))


def draw(family: str, c):
    """The weights and the sentences of ``family`` as ``real_model_flows.family_task`` draws them."""
    w, tokenize = family_weights(family, c)
    return (w, *draw_sentences(tokenize, w.max_length, c.corpus_seed, c.max_tokens, c.sentences))


def start_depth(jumps: list[int]) -> int:
    """1 + the last layer of the leading run 0, 1, ..., j of jump layers (1 when layer 0 is no jump)."""
    s = 0
    while s in jumps:
        s += 1
    return s + 1


def family_run(family: str, c, which: str, steps: list[int], stored: dict, limit: int | None = None) -> dict:
    from attnflow.bridge import forward, layer_flow
    from attnflow.bridge.flows import stream_scales, without_mlp
    from attnflow.observables import gram_effective_rank, mean_pairwise_inner_product
    from attnflow.studies.real_model_flows import _halves, mlp_jumps, mlp_layer_table

    t0, c0 = time.perf_counter(), time.process_time()
    w, ids, idx = draw(family, c)
    used = list(range(len(ids))) if which == "all" else _halves(len(ids), c.split_seeds[0])[1]
    used = used[:limit] if limit else used
    ids = [ids[i] for i in used]
    table = mlp_layer_table(w, ids, c.scale_estimator, K=0)
    jumps = mlp_jumps(table, c.mlp_jump_factor)
    jumps_stored = mlp_jumps(stored.get("mlp_layers"), c.mlp_jump_factor)
    s = start_depth(jumps)
    w0 = without_mlp(w)
    a_steps = [int(stored["step_ladder"]["chosen"]["attention"])]  # the K the study's step rule chose for (a)
    cols = ["model", "no_mlp", *[f"attention_K{K}" for K in a_steps]]
    cols += [f"{v}_after_jump_K{K}" for K in steps for v in ("mlp", "frames_mlp")]
    stats = {col: {"cos": [], "erank": []} for col in cols}
    cpu = dict.fromkeys(cols, 0.0)
    with torch.no_grad():
        for t in ids:
            fp = forward(w, t)
            rho = stream_scales(w, fp.hidden_states, c.scale_estimator) if w.arch == "pre_ln" else None
            xs = {"model": fp.tokens, "no_mlp": forward(w0, t).tokens}
            for col in cols[2:]:
                v, K = col.rsplit("_K", 1)
                net = jumps if v.endswith("_after_jump") else ()
                c1 = time.process_time()
                xs[col] = layer_flow(w, fp.tokens[0], variant=v.removesuffix("_after_jump"),
                                     steps_per_layer=int(K), residual_norms=rho, network_layers=net,
                                     model_tokens=fp.tokens)  # fmt: skip
                cpu[col] += time.process_time() - c1
            for col, x in xs.items():
                stats[col]["cos"].append(mean_pairwise_inner_product(x).numpy())
                stats[col]["erank"].append(gram_effective_rank(x).numpy())
            print(f"  {family}: sentence {len(stats['model']['cos'])}/{len(ids)} "
                  f"({time.process_time() - c0:.0f} s CPU)", flush=True)  # fmt: skip
    arr = {col: {k: np.stack(v) for k, v in d.items()} for col, d in stats.items()}  # (S, L + 1)
    return {
        "family": family, "sentences_used": which, "corpus_index": [idx[i] for i in used],
        "split_positions": used, "n_sentences": len(ids), "jump_layers": jumps,
        "jump_layers_stored_table_24": jumps_stored, "start_depth": s,
        "jump_table": {k: table[k] for k in ("network_angle", "flow_speed")},
        "jumps_at_layers_ge_1": [j for j in jumps if j >= 1], "steps": steps, "attention_steps": a_steps,
        "arrays": arr, "cpu_s_per_flow": cpu,
        "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
    }  # fmt: skip


def evaluate(run: dict, c) -> dict:
    """Per-depth means, the gaps over depths s..L and the records' scoring (module docstring)."""
    from attnflow.analysis.verdicts import Criterion
    from attnflow.studies.real_model_flows import _MARGIN, _quantity, controls_of, scored

    arr, s = run["arrays"], run["start_depth"]
    model = arr["model"]
    per_depth = {col: {k: a.mean(0).tolist() for k, a in d.items()} for col, d in arr.items()}
    gaps, scoring, steps = {}, {}, {}
    for col, d in arr.items():
        if col == "model":
            continue
        gaps[col] = {
            "cos_gap": float(np.mean(np.abs(d["cos"].mean(0)[s:] - model["cos"].mean(0)[s:]))),
            "erank_rel_gap": _quantity("rel")(model["erank"][:, s - 1 :], d["erank"][:, s - 1 :]),
        }
    for vid, stat, kind, field in RECORDS:
        thr = float(getattr(c, field))
        crit = Criterion(quantity=f"{kind} of {stat} over depths {s}..L", op="<=", threshold=thr,
                         declared_in=f"config: {field}")  # fmt: skip
        margin = float(getattr(c, _MARGIN[kind])) if c.stand_still_control else None
        cpair = c.collapse_outcome and kind in ("gap", "rel")
        kw = {"kind": kind, "margin": margin, "rule": c.control_paired_rule, "collapse_pair": cpair,
              "collapse_eps": c.step_tolerance_share * margin
              if cpair and c.collapse_symmetric and margin is not None else None}  # fmt: skip
        q = _quantity(kind)
        m = model[stat][:, s - 1 :]
        scoring[vid] = {}
        for col in arr:
            if col == "model":
                continue
            r = scored(
                q, m, arr[col][stat][:, s - 1 :], crit, c.bootstrap, c.seed, controls_of(kind, c), **kw
            )
            scoring[vid][col] = {k: r[k] for k in ("value", "ci95", "outcome", "outcome_flow", "measured",
                                                    "blocked_by") if k in r} | {
                "controls": {n: {x: y for x, y in ctl.items() if x in ("value", "outcome", "paired")}
                             for n, ctl in r["controls"].items()}}  # fmt: skip
        tol = c.step_tolerance_share * thr
        for v in ("mlp", "frames_mlp"):
            Ks, moves = run["steps"], {}
            for a, b in zip(Ks, Ks[1:], strict=False):
                ra, rb = scoring[vid][f"{v}_after_jump_K{a}"], scoring[vid][f"{v}_after_jump_K{b}"]
                mv = abs(rb["value"] - ra["value"])
                moves[f"{a}->{b}"] = {"move": mv, "tolerance": tol, "below_tolerance": mv < tol,
                                      "outcome_same": ra["outcome"] == rb["outcome"],
                                      "converged": mv < tol and ra["outcome"] == rb["outcome"]}  # fmt: skip
            steps.setdefault(v, {})[vid] = moves
    for recs in steps.values():  # the flow's K: the smallest whose move to the next converges for both
        Ks = run["steps"]
        ok = [a for a, b in zip(Ks, Ks[1:], strict=False) if all(r[f"{a}->{b}"]["converged"]
                                                                  for r in recs.values())]  # fmt: skip
        recs["chosen_K"] = ok[0] if ok else None
        recs["converged"] = bool(ok)
    return {"per_depth": per_depth, "gaps_depths_s_to_L": gaps, "scoring": scoring, "step_rule": steps}


def main(argv: list[str] | None = None) -> int:
    from attnflow.studies import get_study

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, default=Path("docs/studies/real_model_flows"))
    ap.add_argument("--sentences", choices=("all", "report"), default="all")
    ap.add_argument("--steps", default="16,64")
    ap.add_argument("--families", default=",".join(f for f, _ in FAMILIES))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None, help="only the first N sentences (a timing run)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    steps = sorted(int(k) for k in args.steps.split(","))
    study = get_study("real_model_flows")
    out = {"sentences": args.sentences, "steps": steps, "families": {}}
    for fam, d in FAMILIES:
        if fam not in args.families.split(","):
            continue
        meta = json.loads((args.root / d / "study.json").read_text())
        fields = study.Config.model_fields
        c = study.Config.model_validate({k: v for k, v in meta["config"].items() if k in fields})
        summ = json.loads((args.root / d / "summary.json").read_text())
        stored = summ["families"][fam]["verdict_data"]
        run = family_run(fam, c, args.sentences, steps, stored, args.limit)
        ev = evaluate(run, c)
        run.pop("arrays")
        res = {**run, **ev, "config": {k: getattr(c, k) for k in (
            "sentences", "corpus_seed", "max_tokens", "split_seeds", "scale_estimator", "mlp_jump_factor",
            "step_tolerance_share", "criterion_cos_gap", "criterion_rel_gap", "bootstrap", "seed",
            "null_seeds", "permuted_embeddings", "control_margin_cos_gap", "control_margin_rel_gap",
            "control_paired_rule", "collapse_outcome", "collapse_symmetric")}}  # fmt: skip
        out["families"][fam] = res
        s, L = res["start_depth"], len(ev["per_depth"]["model"]["cos"]) - 1
        print(f"{fam}: {res['n_sentences']} sentences, jump layers {res['jump_layers']} (stored table, 24 "
              f"sentences: {res['jump_layers_stored_table_24']}), depths {s}..{L}; "
              f"{res['wall_s']:.0f} s wall, {res['cpu_s']:.0f} s CPU")  # fmt: skip
        cols = list(ev["per_depth"])
        print("depth " + " ".join(f"{col[:22]:>22s}" for col in cols))
        for k in range(L + 1):
            print(f"{k:5d} " + " ".join(f"{ev['per_depth'][col]['cos'][k]:22.3f}" for col in cols))
        for col, g in ev["gaps_depths_s_to_L"].items():
            sc = {vid: ev["scoring"][vid][col]["outcome"] for vid, *_ in RECORDS}
            print(f"  {col:26s} cos gap {g['cos_gap']:.3f}  erank rel gap {g['erank_rel_gap']:.3f}  {sc}")
        print("  step rule:", json.dumps(ev["step_rule"]))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
