"""Time of ``attnflow probe`` on the shipped 308-sentence corpus and all-MiniLM-L6-v2 (issue 26).

``python benchmarks/probe.py [--threads 1] [--nulls 3] [--json FILE]``

One probe of the trained model (``attnflow probe minilm --nulls 0``) after loading the model and
tokenising the corpus (reported separately), timed by part from the probe's own laps
(``ds.attrs["laps_trained"]``: wall and CPU seconds of the forward pass, each measure, the bootstrap, the
Jacobian forward passes and each spectral norm per length): ``per_measure``, summed into
``forward_measures_*`` (everything but the Jacobians) and ``jacobians_*``; then ``--nulls`` random
initialisations (3, the command's default).

The machine's load average is recorded before and after. On a shared machine the wall times are upper
bounds and the CPU time of the process (``time.process_time``, every thread) is the measure: with
``--threads 1`` it is what the probe would take on one idle core (an upper bound on the idle 2-core wall
time); with two threads under load it also counts the OpenMP threads spinning while their partner waits
for a core (measured: 17x the single-thread CPU for the same products at load 20), so compare CPU times at
one thread. ``target_met``: the trained probe's CPU seconds <= 30 (``target_s``).
``jacobians_vs_committed`` compares the trained model's per-layer spectral norms with those of the committed
probe (``docs/studies/probe/minilm/summary.json``, its config recorded beside): the relative difference
per length and layer; ``max_abs_diff_vs_committed`` the largest absolute difference of every other
per-layer measure.
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
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=str, default=None)
    ap.add_argument("--nulls", type=int, default=3, help="random inits timed after the trained model")
    ap.add_argument("--power-iterations", type=int, default=None, help="ProbeConfig.power_iterations")
    ap.add_argument("--power-vectors", type=int, default=None, help="ProbeConfig.power_vectors")
    ap.add_argument("--method", type=str, default=None, help="ProbeConfig.jacobian_method")
    ap.add_argument("--tol", type=float, default=None, help="ProbeConfig.jacobian_tol")
    ap.add_argument("--dtype", type=str, default=None, help="ProbeConfig.dtype")
    ap.add_argument("--summary", type=str, default=None, help="write the per-layer table here")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from attnflow.analysis.probe import ProbeConfig, load_probe_model, probe, random_like, summary_table
    from attnflow.studies.real_model import load_corpus

    load0 = os.getloadavg()
    t = _clock()
    pm = load_probe_model("minilm")
    sentences = [pm.encode(s) for s in load_corpus()]
    t_load, c_load = _since(t)
    c = ProbeConfig(null_seeds=tuple(range(args.nulls)))
    options = {"power_iterations": "power_iterations", "power_vectors": "power_vectors",
               "method": "jacobian_method", "tol": "jacobian_tol", "dtype": "dtype"}  # fmt: skip
    for opt, field in options.items():
        if getattr(args, opt) is not None:
            c = replace(c, **{field: getattr(args, opt)})
    t = _clock()
    ds = probe(pm.model, sentences, pm.special_ids, c, weights=pm.weights)
    t_trained, c_trained = _since(t)
    laps = json.loads(ds.attrs["laps_trained"])
    jac = [k for k in laps if k.startswith(("lip_attention", "jac_block", "jacobian"))]
    t = _clock()
    for s in c.null_seeds:
        probe(random_like(pm.model, s), sentences, pm.special_ids, c)
    t_nulls, c_nulls = _since(t)
    new = summary_table(ds)["trained"]
    compare, diffs = {}, {}
    try:
        committed = json.loads(COMMITTED.read_text())
        old = committed["per_layer"]["trained"]
        for key in ("lip_attention", "jac_block"):
            compare[key] = {
                n: [round(b / a - 1, 4) for a, b in zip(old[key][str(n)], new[key][n], strict=True)]
                for n in new[key]
                if str(n) in old[key]
            }
        compare["committed_config"] = committed["config"]
        for key, v in new.items():
            if key not in ("lip_attention", "jac_block") and key in old:
                diffs[key] = float(max(abs(a - b) for a, b in zip(old[key], v, strict=True)))
    except (OSError, KeyError, ValueError) as exc:
        compare = {"error": f"{exc.__class__.__name__}: {exc}"}
    products = {
        key: {int(n): ds[key + "_products"].sel(model="trained", length=n).values.ravel().tolist()
              for n in ds.length.values}
        for key in ("lip_attention", "jac_block")
    }  # fmt: skip
    result = {
        "benchmark": "probe",
        "model": "all-MiniLM-L6-v2",
        "sentences": len(sentences),
        "tokens": sum(len(s) for s in sentences),
        "threads": args.threads,
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "load_and_tokenise_s": round(t_load, 2),
        "load_and_tokenise_cpu_s": round(c_load, 2),
        "per_measure": {k: {"wall_s": v[0], "cpu_s": v[1]} for k, v in laps.items()},
        "forward_measures_s": round(sum(v[0] for k, v in laps.items() if k not in jac), 2),
        "forward_measures_cpu_s": round(sum(v[1] for k, v in laps.items() if k not in jac), 2),
        "jacobians_s": round(sum(laps[k][0] for k in jac), 2),
        "jacobians_cpu_s": round(sum(laps[k][1] for k in jac), 2),
        "probe_trained_s": round(t_trained, 2),
        "probe_trained_cpu_s": round(c_trained, 2),
        "nulls": args.nulls,
        "probe_with_nulls_s": round(t_trained + t_nulls, 2),
        "probe_with_nulls_cpu_s": round(c_trained + c_nulls, 2),
        "config": {
            "power_iterations": c.power_iterations,
            "power_vectors": c.power_vectors,
            "jacobian_method": c.jacobian_method,
            "jacobian_tol": c.jacobian_tol,
            "jacobian_lengths": list(c.jacobian_lengths),
            "dtype": c.dtype,
        },  # fmt: skip
        "jacobian_products": products,
        "jacobians_vs_committed": compare,
        "max_abs_diff_vs_committed": diffs,
        "target_s": 30,
        "target_met": bool(c_trained <= 30),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(summary_table(ds), f, indent=1)


if __name__ == "__main__":
    main()
