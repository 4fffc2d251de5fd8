"""Wall time of ``attnflow probe`` on the shipped 308-sentence corpus and all-MiniLM-L6-v2 (issue 26).

``python benchmarks/probe.py [--threads 2] [--json FILE]``

Times, in one process after loading the model and tokenising the corpus (reported separately):

* ``forward_measures_s``: the batched forward pass of the trained model with every per-sentence measure
  (hidden-state and sphere-token cosines, anisotropy, both effective ranks, attention entropy, sinks,
  value-norm-weighted sinks, doubly-stochastic distance) and their bootstrap intervals (1000 resamples);
* ``jacobians_s``: the attention Lipschitz constants and block Jacobian norms at n = 8, 32, 128
  (one sequence per length, 8 power iterations), the probe's defaults;
* ``probe_trained_s``: both, i.e. ``attnflow probe minilm --nulls 0``;
* ``probe_with_nulls_s``: with ``--nulls`` random initialisations (3, the command's default).

The machine's load average is recorded before and after: on a shared machine the times are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import replace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=str, default=None)
    ap.add_argument("--nulls", type=int, default=3, help="random inits timed after the trained model")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from attnflow.analysis.probe import ProbeConfig, load_probe_model, probe, random_like
    from attnflow.studies.real_model import load_corpus

    load0 = os.getloadavg()
    t = time.perf_counter()
    pm = load_probe_model("minilm")
    sentences = [pm.encode(s) for s in load_corpus()]
    t_load = time.perf_counter() - t
    c = ProbeConfig(null_seeds=tuple(range(args.nulls)))
    t = time.perf_counter()
    probe(pm.model, sentences, pm.special_ids, replace(c, jacobian_lengths=()), weights=pm.weights)
    t_measures = time.perf_counter() - t
    t = time.perf_counter()
    probe(pm.model, sentences, pm.special_ids, c, weights=pm.weights)
    t_trained = time.perf_counter() - t
    t = time.perf_counter()
    for s in c.null_seeds:
        probe(random_like(pm.model, s), sentences, pm.special_ids, c)
    t_nulls = time.perf_counter() - t
    result = {
        "benchmark": "probe",
        "model": "all-MiniLM-L6-v2",
        "sentences": len(sentences),
        "tokens": sum(len(s) for s in sentences),
        "threads": args.threads,
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "load_and_tokenise_s": round(t_load, 2),
        "forward_measures_s": round(t_measures, 2),
        "jacobians_s": round(t_trained - t_measures, 2),
        "probe_trained_s": round(t_trained, 2),
        "nulls": args.nulls,
        "probe_with_nulls_s": round(t_trained + t_nulls, 2),
        "target_s": 30,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
