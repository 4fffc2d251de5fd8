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

The machine's load average is recorded before and after: on a shared machine the times are upper bounds,
so the CPU time of the process (``time.process_time``, both threads) is recorded beside every wall time
(``*_cpu_s``; on an idle 2-core machine the wall time is about the CPU time / 2 when both threads are busy).
``jacobians_vs_committed`` compares the trained model's per-layer spectral norms with those of the committed
probe (``docs/studies/probe/minilm/summary.json``, made with the earlier method: plain power iteration with
the double-backward product, 6 iterations): the relative difference per length and layer.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import replace
from pathlib import Path

COMMITTED = Path(__file__).resolve().parent.parent / "docs" / "studies" / "probe" / "minilm" / "summary.json"


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t0: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - t0[0], time.process_time() - t0[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=str, default=None)
    ap.add_argument("--nulls", type=int, default=3, help="random inits timed after the trained model")
    ap.add_argument("--power-iterations", type=int, default=None, help="ProbeConfig.power_iterations")
    ap.add_argument("--power-vectors", type=int, default=None, help="ProbeConfig.power_vectors")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from attnflow.analysis.probe import ProbeConfig, load_probe_model, probe, random_like, summary_table
    from attnflow.studies.real_model import load_corpus

    load0 = os.getloadavg()
    t = time.perf_counter()
    pm = load_probe_model("minilm")
    sentences = [pm.encode(s) for s in load_corpus()]
    t_load = time.perf_counter() - t
    c = ProbeConfig(null_seeds=tuple(range(args.nulls)))
    if args.power_iterations is not None:
        c = replace(c, power_iterations=args.power_iterations)
    if args.power_vectors is not None:
        c = replace(c, power_vectors=args.power_vectors)
    t = _clock()
    probe(pm.model, sentences, pm.special_ids, replace(c, jacobian_lengths=()), weights=pm.weights)
    t_measures, c_measures = _since(t)
    t = _clock()
    ds = probe(pm.model, sentences, pm.special_ids, c, weights=pm.weights)
    t_trained, c_trained = _since(t)
    t = _clock()
    for s in c.null_seeds:
        probe(random_like(pm.model, s), sentences, pm.special_ids, c)
    t_nulls, c_nulls = _since(t)
    compare = {}
    try:
        old = json.loads(COMMITTED.read_text())["per_layer"]["trained"]
        new = summary_table(ds)["trained"]
        for key in ("lip_attention", "jac_block"):
            compare[key] = {
                n: [round(b / a - 1, 4) for a, b in zip(old[key][str(n)], new[key][n], strict=True)]
                for n in new[key]
                if str(n) in old[key]
            }
        compare["committed_config"] = json.loads(COMMITTED.read_text())["config"]
    except (OSError, KeyError, ValueError) as exc:
        compare = {"error": f"{exc.__class__.__name__}: {exc}"}
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
        "forward_measures_cpu_s": round(c_measures, 2),
        "jacobians_cpu_s": round(c_trained - c_measures, 2),
        "probe_trained_cpu_s": round(c_trained, 2),
        "nulls": args.nulls,
        "probe_with_nulls_s": round(t_trained + t_nulls, 2),
        "probe_with_nulls_cpu_s": round(c_trained + c_nulls, 2),
        "config": {
            "power_iterations": c.power_iterations,
            "power_vectors": c.power_vectors,
            "jacobian_lengths": list(c.jacobian_lengths),
        },  # fmt: skip
        "jacobians_vs_committed": compare,
        "target_s": 30,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
