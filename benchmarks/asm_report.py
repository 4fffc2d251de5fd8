"""Machine code of the fused kernel's hot loops: vector width (zmm / ymm / xmm), stack spills, CPU.

``python benchmarks/asm_report.py [--json FILE] [--time]``

Compiles (or loads from the cache) the symmetric half pass and the full pass of
:mod:`attnflow.dynamics.numba_kernel` for float32 and float64 and counts, in numba's emitted assembly,

* instructions that use 512-bit (``zmm``), 256-bit (``ymm``) and 128-bit (``xmm``) registers;
* spills and reloads: vector moves to or from the stack (``(%rsp)`` / ``(%rbp)`` operands);
* the CPU name and feature string LLVM compiled for (``llvmlite.binding.get_host_cpu_name`` /
  ``numba.config.CPU_FEATURES``), and ``/proc/cpuinfo``'s model name.

With ``--time`` it also times one call of each pass at the paper's size on one thread (CPU seconds per
pair). Run it once as is and once with ``NUMBA_CPU_FEATURES`` set to the host features plus
``-prefer-256-bit`` (and ``NUMBA_CACHE_DIR`` pointing to an empty directory) to compare the 512-bit code
LLVM emits when it is allowed to (numba's default for this CPU prefers 256-bit vectors).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import cpu_info, make_inputs  # noqa: E402

from attnflow.dynamics import numba_kernel as nk, numba_passes  # noqa: E402

SPILL = re.compile(r"\bv?mov\w*\s+.*\((%rsp|%rbp)\)")


def count(asm: str) -> dict:
    lines = [ln for ln in asm.splitlines() if ln.startswith("\t") and not ln.lstrip().startswith(".")]
    vec = [ln for ln in lines if "mm" in ln]
    return {
        "instructions": len(lines),
        "zmm": sum("%zmm" in ln for ln in lines),
        "ymm": sum("%ymm" in ln for ln in lines),
        "xmm": sum("%xmm" in ln for ln in lines),
        "vector_spills": sum(bool(SPILL.search(ln)) and ("mm" in ln) for ln in vec),
        "exp_fma_zmm": sum(ln.lstrip().startswith("vfmadd") and "%zmm" in ln for ln in lines),
        "exp_fma_ymm": sum(ln.lstrip().startswith("vfmadd") and "%ymm" in ln for ln in lines),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--time", action="store_true", help="also time each pass (one thread)")
    args = parser.parse_args(argv)
    import numba

    numba.set_num_threads(1)
    x, D = make_inputs(4, 300, 100)
    out = {
        "cpu": cpu_info(),
        "numba": numba.__version__,
        "NUMBA_CPU_FEATURES": os.environ.get("NUMBA_CPU_FEATURES"),
        "platform": platform.platform(),
        "passes": {},
    }
    pairs = x.shape[0] * D.shape[1] * x.shape[1] ** 2
    for dt in (np.float32, np.float64):
        xa, Da = x.astype(dt), D.astype(dt)
        for name, kw in (("half", {}), ("full", {"_full": True})):
            best = []
            for _ in range(5 if args.time else 1):
                t = time.process_time()
                nk.pair_sums(xa, Da, 1.0, **kw)
                best.append(time.process_time() - t)
            fn = numba_passes.half_pass if name == "half" else numba_passes.accumulate_pass
            sig = fn.signatures[[s[0].dtype for s in fn.signatures].index(numba.from_dtype(dt))]
            rec = count(fn.inspect_asm(sig))
            if args.time:
                rec["cpu_ns_per_pair"] = 1e9 * float(np.median(best[1:])) / pairs
            out["passes"][f"{name}_{dt.__name__}"] = rec
    for key, rec in out["passes"].items():
        print(key, json.dumps(rec))
    print("cpu:", json.dumps(out["cpu"])[:300])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
