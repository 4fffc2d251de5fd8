"""Review round 7, F1: per layer, the network's own MLP turn against the MLP flow's, for every family of the
six record directories, stored in each summary (``families.<f>.verdict_data.mlp_layers``) for the rule
``mlp_jump_factor`` of :func:`attnflow.studies.real_model_flows.records`.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round7/mlp_jump.py [ROOT] [--out FILE.json]

Each family: its study's own draw (config corpus_seed, sentences, max_tokens; the first ``sentences`` of
``family_task``'s draw), the null's weights as ``family_task`` builds them (null_seeds[0],
permuted_embeddings), one forward pass per sentence and the MLP flow alone for T = 1 at K = 64
(:func:`~attnflow.studies.real_model_flows.mlp_layer_table`). Prints the table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # review/: common
from common import draw_sentences, family_weights  # noqa: E402

DIRS = (".", "smollm2", "permuted", "random", "permuted_smollm2", "random_smollm2")


def family_ids(family: str, c):
    w, tokenize = family_weights(family, c)
    ids, _ = draw_sentences(tokenize, w.max_length, c.corpus_seed, c.max_tokens, c.sentences)
    return w, ids


def main(argv: list[str] | None = None) -> int:
    from attnflow.studies import get_study
    from attnflow.studies.real_model_flows import mlp_layer_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, default=Path("docs/studies/real_model_flows"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--dirs", default=",".join(DIRS))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    study = get_study("real_model_flows")
    out = {}
    for d in args.dirs.split(","):
        meta = json.loads((args.root / d / "study.json").read_text())
        fields = study.Config.model_fields
        c = study.Config.model_validate({k: v for k, v in meta["config"].items() if k in fields})
        p = args.root / d / "summary.json"
        text = p.read_text()
        s = json.loads(text)
        for fam in s["families"]:
            t0, cpu0 = time.perf_counter(), time.process_time()
            w, ids = family_ids(fam, c)
            tab = mlp_layer_table(w, ids, c.scale_estimator)
            tab["wall_s"], tab["cpu_s"] = time.perf_counter() - t0, time.process_time() - cpu0
            s["families"][fam]["verdict_data"]["mlp_layers"] = tab
            out[fam] = tab
            print(f"{fam} ({len(ids)} sentences, {tab['wall_s']:.0f} s wall, {tab['cpu_s']:.0f} s CPU)")
            print("layer  network_angle  flow_speed  ratio  flow_angle_T1")
            for l, (a, v, t1) in enumerate(
                zip(tab["network_angle"], tab["flow_speed"], tab["flow_angle_T1"], strict=True)
            ):
                print(f"{l:5d}  {a:13.3f}  {v:10.3f}  {v / a:5.2f}  {t1:13.3f}")
        lines = text.splitlines()
        indent = (len(lines[1]) - len(lines[1].lstrip(" "))) if len(lines) > 1 else 1
        p.write_text(json.dumps(s, indent=indent or 1) + ("\n" if text.endswith("\n") else ""))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
