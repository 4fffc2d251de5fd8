"""Pair-interaction throughput of the attention field: kernel vs baselines, and memory.

``python benchmarks/run.py --json FILE [--quick] [--device cuda]``

For each cell (n tokens, H heads, P paths) and each method, one field evaluation with the
ledger is timed; methods are interleaved within every repeat round (so that load drift on a
shared machine hits all of them alike) and the median over rounds is reported as
``pairs/s = P H n^2 / seconds``. Methods:

* ``numba_f32``, ``numba_f64``: :func:`attnflow.dynamics.numba_backend.fused_field` on the
  paper's symmetric heads: the symmetric half pass (each unordered pair once, issue 12), ledger with
  the Ito sums (the OU runs of the paper);
* ``full_f32``, ``full_f64``: the same with ``_full=True``: the symmetric pass over ordered pairs
  (the kernel before issue 12, with its Ito sums in a separate loop);
* ``noito_f32``, ``noito_f64``: the half pass without the Ito sums (``ito=False``: what a run with
  deterministic weights, g = 0, computes);
* ``tiled_f32``, ``tiled_f64``: the tiled PyTorch path for CUDA (``dynamics.torch_tiled``) run on
  the CPU (with ``--device cuda``: on the GPU);
* ``numba_gen_f32``, ``numba_gen_f64``: the same kernel with non-symmetric heads
  (``D_h`` plus 0.5 in entry (0, 1)), i.e. its general path with column sums;
* ``sdpa_f32``, ``sdpa_f64``: the peer a PyTorch user would pick,
  ``torch.nn.functional.scaled_dot_product_attention`` with queries ``beta x D_h``, keys and values ``x``:
  the per-head softmax means ``sum_j A_ij x_j`` only (the velocity before the tangent projection and the
  head sum, which cost O(P H n d));
* ``sdpa_ledger_f32``, ``sdpa_ledger_f64``: the same plus the ledger's extra sums done in PyTorch: the row
  log-sum-exps and the Ito sums ``sum_j A_ij <x_i, x_j>^2`` from the materialised score matrices (what the
  kernel's ``ledger=True`` call returns beyond the velocity, for symmetric heads);
* ``keops_f32``, ``keops_f64``: KeOps (``pykeops``) ``LazyTensor`` softmax reduction on the CPU
  (``sumsoftmaxweight``: the per-head softmax means, velocity only), or ``not available: <reason>`` in
  the notes and the table when it cannot be imported or compiled;
* ``torch_f32``, ``torch_f64``: the PyTorch reference path ``attnflow.dynamics.field.evaluate``
  with ``backend="torch"`` (skipped with a message when it cannot be imported);
* ``numpy_f32``, ``numpy_f64``: the dense NumPy baseline (``benchmarks/numpy_baseline.py``);
* ``exp2_f32``, ``exp2_f64``: ``numpy.exp`` on two threads (``benchmarks/exp_ceiling.py``),
  in exponentials per second: the 2-core ceiling of one library ``exp`` per pair;
* ``steps_fused_f32``, ``steps_fused_f64``, ``steps_python_f32``, ``steps_python_f64``: whole simulation
  steps (field, ledger, OU weight update, Euler step) of :class:`attnflow.simulation.Simulator` on the
  numba kernel, ``STEPS_PER_CALL`` per timed call: the compiled multi-step loop (``loop="fused"``, one
  ``advance`` call) against the Python loop (``loop="python"``, one ``step()`` per step); rates in pairs
  of a step per second.

The full Sec. 6 reproduction's wall time is read from ``--reproduction-summary`` (default: the committed
``docs/studies/massucco2026/summary.json``) and compared with the 5-minute target. The payload records
the CPU (model name, AVX-512 flags, the CPU and features LLVM compiles for) and
the load average before and after. A method whose predicted time for one call (from its rate in the
previous cell) exceeds ``--max-seconds`` is skipped and reported as such. A memory check runs one
kernel call at n = 50,000, H = 4, d = 3 in a subprocess and reports its peak RSS above the RSS after import.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from exp_ceiling import exp_throughput  # noqa: E402
from numpy_baseline import numpy_field  # noqa: E402

from attnflow.dynamics.numba_backend import fused_field  # noqa: E402

FULL_CELLS = [(n, h) for n in (300, 3000, 30000) for h in (1, 10, 100)]
QUICK_CELLS = [(300, 10), (300, 100), (3000, 1)]
TARGET_PAIRS = 2e8  # P is chosen so that one kernel call takes ~0.2-2 s
PAPER = (300, 100)


def cpu_info() -> dict:
    """CPU name and features: ``/proc/cpuinfo``'s model name and flags, and what LLVM compiles for."""
    info: dict = {"machine": platform.machine(), "processor": platform.processor(), "cores": os.cpu_count()}
    try:
        text = Path("/proc/cpuinfo").read_text()
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                info["model_name"] = value.strip()
            if key.strip() == "flags":
                flags = value.split()
                info["avx512"] = sorted(f for f in flags if f.startswith("avx512"))
                info["avx2"] = "avx2" in flags
                info["fma"] = "fma" in flags
                break
    except OSError:
        pass
    try:
        import llvmlite.binding as llvm

        info["llvm_cpu_name"] = llvm.get_host_cpu_name()
        info["llvm_features_enabled"] = sorted(
            f[1:] for f in llvm.get_host_cpu_features().flatten().split(",") if f.startswith("+")
        )
    except Exception as exc:  # noqa: BLE001 - informative only
        info["llvm_error"] = repr(exc)
    return info


def paths_for(n: int, heads: int, quick: bool) -> int:
    if n == 300:
        return 4 if quick else 20
    return max(1, round(TARGET_PAIRS / (heads * n * n) / (8 if quick else 1)))


def make_inputs(npaths: int, n: int, heads: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Octahedral tokens with N(0, 0.05^2) noise and heads Z + Z^T (NOTES section 2)."""
    rng = np.random.default_rng(seed)
    axes = np.concatenate([np.eye(3), -np.eye(3)])
    x = axes[rng.integers(0, 6, size=(npaths, n))] + 0.05 * rng.normal(size=(npaths, n, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    z = rng.normal(size=(npaths, heads, 3, 3))
    return x, z + np.swapaxes(z, -1, -2)


def nonsymmetric(D: np.ndarray) -> np.ndarray:
    """``D`` with 0.5 added to entry (0, 1) of every head: same scale, not symmetric."""
    out = D.copy()
    out[..., 0, 1] += 0.5
    return out


def torch_method(dtype_name: str, device: str):
    """A callable timing the torch reference path, or the reason it is unavailable."""
    try:
        import torch

        from attnflow.dynamics.field import evaluate
        from attnflow.model.transformer import TransformerModel
    except ImportError as exc:  # the reference path is written by the lead
        return None, f"attnflow.dynamics.field.evaluate unavailable ({exc})"
    if device == "cuda" and not torch.cuda.is_available():
        return None, "torch reports no CUDA device"
    torch.set_num_threads(os.cpu_count() or 1)
    model = TransformerModel(direction="ascent", beta=1.0, geometry="sphere", backend="torch")
    tdtype = getattr(torch, dtype_name)

    def prepare(x, D):
        return torch.as_tensor(x, dtype=tdtype, device=device), torch.as_tensor(
            D, dtype=tdtype, device=device
        )

    def call(xt, Dt):
        evaluate(model, xt, Dt, None, 0.0, ledger=True)
        if device == "cuda":
            torch.cuda.synchronize()

    return (prepare, call), None


def tiled_method(dtype_name: str, device: str):
    """The tiled PyTorch path (``dynamics.torch_tiled``) plus the assembly, or why it is unavailable."""
    import torch

    from attnflow.dynamics.assembly import assemble
    from attnflow.dynamics.torch_tiled import pair_sums_tiled
    from attnflow.geometry import get_geometry

    if device == "cuda" and not torch.cuda.is_available():
        return None, "torch reports no CUDA device"
    tdtype = getattr(torch, dtype_name)
    geo = get_geometry("sphere")

    def prepare(x, D):
        return torch.as_tensor(x, dtype=tdtype, device=device), torch.as_tensor(
            D, dtype=tdtype, device=device
        )

    def call(xt, Dt):
        assemble(pair_sums_tiled(xt, Dt, 1.0), xt, Dt, Dt, 1.0, geo)
        if device == "cuda":
            torch.cuda.synchronize()

    return (prepare, call), None


def _sdpa_qkv(x, D, tdtype, device):
    """Queries ``beta x D_h`` (beta = 1), keys = values = ``x`` as (P, H, n, d) tensors for SDPA."""
    import torch

    xt = torch.as_tensor(x, dtype=tdtype, device=device)
    Dt = torch.as_tensor(D, dtype=tdtype, device=device)
    q = torch.einsum("pnd,phde->phne", xt, Dt).contiguous()  # <x_i, D x_j> = (D^T x_i) . x_j
    kv = xt[:, None].expand_as(q).contiguous()
    return q, kv


def sdpa_method(dtype_name: str, device: str, ledger: bool):
    """``scaled_dot_product_attention`` (velocity only, or with the ledger's extra sums in PyTorch)."""
    import torch
    import torch.nn.functional as F

    if device == "cuda" and not torch.cuda.is_available():
        return None, "torch reports no CUDA device"
    torch.set_num_threads(os.cpu_count() or 1)
    tdtype = getattr(torch, dtype_name)

    def prepare(x, D):
        return _sdpa_qkv(x, D, tdtype, device)

    def call(q, kv):
        with torch.no_grad():
            mean = F.scaled_dot_product_attention(q, kv, kv, scale=1.0)
            if ledger:
                s = q @ kv.transpose(-1, -2)  # scores (P, H, n, n)
                lse = torch.logsumexp(s, dim=-1)
                g2 = (kv[:, :1] @ kv[:, :1].transpose(-1, -2)).square()  # <x_i, x_j>^2, (P, 1, n, n)
                row_q = (torch.exp(s - lse[..., None]) * g2).sum(-1)
                del row_q
        if device == "cuda":
            torch.cuda.synchronize()
        return mean

    return (prepare, call), None


def keops_method(dtype_name: str):
    """KeOps ``LazyTensor`` softmax reduction on the CPU (velocity only), or why it is not available."""
    try:
        import torch
        from pykeops.torch import LazyTensor
    except Exception as exc:  # noqa: BLE001 - any import failure is reported in the table
        return None, f"not available: pykeops import failed ({exc.__class__.__name__}: {exc})".splitlines()[0]
    tdtype = getattr(torch, dtype_name)

    def prepare(x, D):
        q, kv = _sdpa_qkv(x, D, tdtype, "cpu")
        return LazyTensor(q[:, :, :, None, :]), LazyTensor(kv[:, :, None, :, :]), kv[:, :, None, :, :]

    def call(q_i, k_j, v_j):
        s_ij = q_i | k_j  # scores, (P, H, n, n, 1) symbolic
        return s_ij.sumsoftmaxweight(LazyTensor(v_j), dim=3)

    try:  # compile (and check) on a tiny input so that a broken toolchain is a note, not a crash
        rng = np.random.default_rng(0)
        xs = rng.normal(size=(1, 5, 3))
        Ds = rng.normal(size=(1, 2, 3, 3))
        got = call(*prepare(xs, Ds)).double().numpy()
        s = np.einsum("pnd,phde,pme->phnm", xs, Ds, xs)
        a = np.exp(s - s.max(-1, keepdims=True))
        want = np.einsum("phnm,pmd->phnd", a / a.sum(-1, keepdims=True), xs)
        tol = 1e-4 if dtype_name == "float32" else 1e-10  # float32 sums of 5 terms; float64 round-off
        if not np.allclose(got, want, atol=tol):
            return None, f"not available: KeOps result differs from NumPy by {np.abs(got - want).max():.2g}"
    except Exception as exc:  # noqa: BLE001 - compiler or runtime failure: recorded, not raised
        return (
            None,
            f"not available: KeOps compile/run failed ({exc.__class__.__name__}: {exc})".splitlines()[0],
        )
    return (prepare, call), None


STEPS_PER_CALL = 8  # steps per timed call of the simulation-loop methods


def step_method(dtype_name: str, loop: str):
    """``STEPS_PER_CALL`` steps of a :class:`attnflow.simulation.Simulator` on the numba kernel (OU weights,
    sigma^2 = 1, ledger on, nothing recorded): the compiled multi-step loop (``loop="fused"``, one call of
    ``advance``) or the Python loop (``loop="python"``, one ``step()`` per step)."""
    import torch

    import attnflow as af
    from attnflow.simulation import Simulator

    model = af.TransformerModel(
        direction="descent", beta=1.0, weights=af.OrnsteinUhlenbeck(), backend="numba"
    )

    def prepare(x, D):
        return (
            Simulator(
                model, torch.from_numpy(x), torch.from_numpy(D), dt=0.01, seed=0, dtype=dtype_name, loop=loop
            ),
        )

    def call(sim):
        if loop == "fused":
            sim.advance(STEPS_PER_CALL)
        else:
            for _ in range(STEPS_PER_CALL):
                sim.step()

    return prepare, call


def build_methods(device: str):
    methods, notes = {}, {}
    for name, dtype in (("f32", np.float32), ("f64", np.float64)):
        for loop in ("fused", "python"):
            methods[f"steps_{loop}_{name}"] = step_method("float32" if name == "f32" else "float64", loop)
        methods[f"numba_{name}"] = (
            lambda x, D, dt=dtype: (x.astype(dt), D.astype(dt)),
            lambda x, D: fused_field(x, D, None, 1.0, ledger=True),
        )
        methods[f"full_{name}"] = (
            lambda x, D, dt=dtype: (x.astype(dt), D.astype(dt)),
            lambda x, D: fused_field(x, D, None, 1.0, ledger=True, _full=True),
        )
        methods[f"noito_{name}"] = (
            lambda x, D, dt=dtype: (x.astype(dt), D.astype(dt)),
            lambda x, D: fused_field(x, D, None, 1.0, ledger=True, ito=False),
        )
        found, why = tiled_method("float32" if name == "f32" else "float64", device)
        if found is None:
            notes[f"tiled_{name}"] = why
        else:
            methods[f"tiled_{name}"] = found
        methods[f"numba_gen_{name}"] = (
            lambda x, D, dt=dtype: (x.astype(dt), nonsymmetric(D).astype(dt)),
            lambda x, D: fused_field(x, D, None, 1.0, ledger=True),
        )
        methods[f"numpy_{name}"] = (
            lambda x, D, dt=dtype: (x.astype(dt), D.astype(dt)),
            lambda x, D: numpy_field(x, D, None, 1.0, ledger=True),
        )
        found, why = torch_method("float32" if name == "f32" else "float64", device)
        if found is None:
            notes[f"torch_{name}"] = why
        else:
            methods[f"torch_{name}"] = found
        for key, found_why in (
            (f"sdpa_{name}", sdpa_method("float32" if name == "f32" else "float64", device, ledger=False)),
            (
                f"sdpa_ledger_{name}",
                sdpa_method("float32" if name == "f32" else "float64", device, ledger=True),
            ),
            (f"keops_{name}", keops_method("float32" if name == "f32" else "float64")),
        ):
            if found_why[0] is None:
                notes[key] = found_why[1]
            else:
                methods[key] = found_why[0]
    return methods, notes


def run_cell(n, heads, npaths, methods, rates, args):
    """Interleaved repeats of every method on one cell; returns medians and skip notes."""
    x, D = make_inputs(npaths, n, heads)
    pairs = npaths * heads * n * n
    active, result = {}, {"n": n, "H": heads, "P": npaths, "pairs": pairs, "rates": {}, "skipped": {}}
    for name, (prepare, call) in methods.items():
        work = pairs * (STEPS_PER_CALL if name.startswith("steps_") else 1)
        predicted = work / rates[name] if name in rates else 0.0
        if predicted > args.max_seconds:
            result["skipped"][name] = f"predicted {predicted:.0f} s > --max-seconds {args.max_seconds:g}"
            continue
        inputs = prepare(x, D)
        call(*inputs)  # warm-up (JIT, allocator, thread pools)
        active[name] = (inputs, call, [], work)
    exp_samples = {"exp2_f32": [], "exp2_f64": []}
    for _ in range(args.repeats):
        for inputs, call, times, _ in active.values():
            start = time.perf_counter()
            call(*inputs)
            times.append(time.perf_counter() - start)
        for key, dt in (("exp2_f32", np.float32), ("exp2_f64", np.float64)):
            exp_samples[key].append(exp_throughput(dt, workers=2, size=2**20, rounds=3, repeats=1))
    for name, (_, _, times, work) in active.items():
        rates[name] = result["rates"][name] = work / float(np.median(times))
        result.setdefault("seconds", {})[name] = float(np.median(times))
    for key, samples in exp_samples.items():
        result["rates"][key] = float(np.median(samples))
    rate = result["rates"]
    for dt in ("f32", "f64"):
        kernel = rate.get(f"numba_{dt}")
        others = (f"numpy_{dt}", f"torch_{dt}", f"exp2_{dt}", f"full_{dt}", f"tiled_{dt}")
        others += (f"sdpa_{dt}", f"sdpa_ledger_{dt}", f"keops_{dt}")
        for other in others:
            if kernel and rate.get(other):
                result.setdefault("ratios", {})[f"numba_{dt}/{other}"] = kernel / rate[other]
        fused_rate, python_rate = rate.get(f"steps_fused_{dt}"), rate.get(f"steps_python_{dt}")
        if fused_rate and python_rate:
            result.setdefault("ratios", {})[f"steps_fused_{dt}/steps_python_{dt}"] = fused_rate / python_rate
        if fused_rate and rate.get(f"numpy_{dt}"):
            result.setdefault("ratios", {})[f"steps_fused_{dt}/numpy_{dt}"] = fused_rate / rate[f"numpy_{dt}"]
    return result


def memory_child() -> None:
    """Subprocess body: peak RSS of one kernel call at n = 50,000, H = 4, d = 3 (float64)."""
    import psutil

    proc = psutil.Process()
    rss_import = proc.memory_info().rss
    x, D = make_inputs(1, 50_000, 4)
    fused_field(x[:, :64], D, None, 1.0)  # compile or load the cache
    rss_ready = proc.memory_info().rss
    peak = [rss_ready]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    fused_field(x, D, None, 1.0)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    peak[0] = max(peak[0], proc.memory_info().rss)
    print(
        json.dumps(
            {
                "n": 50_000,
                "H": 4,
                "d": 3,
                "dtype": "float64",
                "seconds": seconds,
                "peak_above_import_MiB": (peak[0] - rss_import) / 2**20,
                "peak_above_ready_MiB": (peak[0] - rss_ready) / 2**20,
                "rss_import_MiB": rss_import / 2**20,
            }
        )
    )


def memory_check() -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--memory-child"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def format_table(cells, notes, memory) -> str:
    cols = ["numba_f32", "numba_f64", "full_f32", "full_f64", "noito_f32", "noito_f64"]
    cols += ["numba_gen_f32", "numba_gen_f64", "tiled_f32", "tiled_f64", "torch_f32", "torch_f64"]
    cols += ["sdpa_f32", "sdpa_f64", "sdpa_ledger_f32", "sdpa_ledger_f64", "keops_f32", "keops_f64"]
    cols += ["numpy_f32", "numpy_f64", "exp2_f32", "exp2_f64"]
    cols += ["steps_fused_f32", "steps_fused_f64", "steps_python_f32", "steps_python_f64"]
    ratio_cols = ["numba_f32/numpy_f32", "numba_f64/numpy_f64", "numba_f32/full_f32", "numba_f64/full_f64"]
    ratio_cols += ["numba_f32/exp2_f32", "numba_f64/exp2_f64", "numba_f64/torch_f64", "numba_f64/tiled_f64"]
    ratio_cols += ["numba_f32/sdpa_f32", "numba_f64/sdpa_f64", "numba_f32/sdpa_ledger_f32"]
    ratio_cols += ["numba_f64/sdpa_ledger_f64", "numba_f32/keops_f32", "numba_f64/keops_f64"]
    ratio_cols += ["steps_fused_f32/steps_python_f32", "steps_fused_f64/steps_python_f64"]
    ratio_cols += ["steps_fused_f32/numpy_f32"]

    def short(c: str) -> str:
        return (
            c.replace("numba_gen_", "gen_")
            .replace("steps_fused_", "sfus_")
            .replace("steps_python_", "spy_")
            .replace("sdpa_ledger_", "sdpaL_")
        )

    head = f"{'n':>6} {'H':>4} {'P':>3} " + " ".join(f"{short(c):>10}" for c in cols)
    head += " | " + " ".join(f"{short(c).replace('numba_', 'k'):>13}" for c in ratio_cols)
    lines = [
        "pairs/s (median; exp2 = numpy.exp on 2 threads, exp/s; sfus/spy = simulation steps, fused or Python "
        "loop, pairs of a step per second) and ratios",
        head,
    ]
    for cell in cells:
        row = f"{cell['n']:>6} {cell['H']:>4} {cell['P']:>3} "
        row += " ".join(
            f"{cell['rates'][c]:>10.3g}" if c in cell["rates"] else f"{'n/a' if c in notes else 'skip':>10}"
            for c in cols
        )
        ratios = cell.get("ratios", {})
        row += " | " + " ".join(f"{ratios[c]:>13.2f}" if c in ratios else f"{'-':>13}" for c in ratio_cols)
        lines.append(row)
    for cell in cells:
        for name, why in cell["skipped"].items():
            lines.append(f"  n={cell['n']} H={cell['H']}: {name} skipped: {why}")
    for name, why in notes.items():
        lines.append(f"  {name}: skipped everywhere: {why}")
    if "error" in memory:
        lines.append(f"memory check failed: {memory['error']}")
    else:
        lines.append(
            f"memory: n=50000 H=4 d=3 float64, one call {memory['seconds']:.1f} s, peak RSS "
            f"{memory['peak_above_import_MiB']:.1f} MiB above import "
            f"({memory['peak_above_ready_MiB']:.1f} MiB above the warmed-up process); target < 1024 MiB"
        )
    return "\n".join(lines)


def reproduction_wall(path: Path) -> dict:
    """Wall time of a full Sec. 6 reproduction read from its ``summary.json`` (target: 5 min on 2 cores)."""
    try:
        summary = json.loads(Path(path).read_text())
        wall = float(summary["wall_time_s"])
    except (OSError, KeyError, TypeError, ValueError) as exc:
        return {"path": str(path), "line": f"reproduction: no wall time in {path} ({exc.__class__.__name__})"}
    quick = bool(summary.get("quick"))
    verdict = "met" if wall <= 300 and not quick else "missed"
    line = (
        f"reproduction ({path}): wall {wall:.0f} s = {wall / 60:.1f} min"
        f"{' (quick variant)' if quick else ''}; target <= 300 s: {verdict}"
    )
    return {"path": str(path), "wall_time_s": wall, "quick": quick, "line": line}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--quick", action="store_true", help="a tiny subset of cells")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="torch path device")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 5, quick 3)")
    parser.add_argument("--max-seconds", type=float, default=20.0, help="skip longer single calls")
    parser.add_argument("--no-memory", action="store_true", help="skip the n = 50,000 memory check")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--reproduction-summary",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "docs" / "studies" / "massucco2026" / "summary.json",
        help="summary.json of a full Sec. 6 reproduction: its wall time goes into the output",
    )
    parser.add_argument(
        "--cells",
        default=None,
        help="comma-separated n:H (or n:H:P) cells to run instead of the default set, e.g. 300:100,32:4:4",
    )
    args = parser.parse_args(argv)
    if args.memory_child:
        memory_child()
        return
    if args.json is None:
        parser.error("--json FILE is required")
    args.repeats = args.repeats or (3 if args.quick else 5)
    methods, notes = build_methods(args.device)
    rates: dict[str, float] = {}
    cells = []
    chosen = QUICK_CELLS if args.quick else FULL_CELLS
    if args.cells:
        chosen = [tuple(int(v) for v in c.split(":")) for c in args.cells.split(",")]
    load_before = os.getloadavg()
    for cell in chosen:
        n, heads = cell[:2]
        npaths = cell[2] if len(cell) > 2 else paths_for(n, heads, args.quick)
        cells.append(run_cell(n, heads, npaths, methods, rates, args))
        print(f"done n={n} H={heads} P={npaths}", flush=True)
    memory = {"skipped": True} if args.no_memory else memory_check()
    table = format_table(cells, notes, memory if not args.no_memory else {"error": "skipped"})
    reproduction = reproduction_wall(args.reproduction_summary)
    table += "\n" + reproduction["line"]
    print(table)
    payload = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load": os.getloadavg(),
            "cpu": cpu_info(),
        },
        "repeats": args.repeats,
        "cells": cells,
        "notes": notes,
        "memory": memory,
        "reproduction": reproduction,
        "table": table,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
