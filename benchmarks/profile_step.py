"""Where the time of one step of the paper's run goes (what bounds the full reproduction's wall time).

``python benchmarks/profile_step.py [--steps 10] [--preset massucco2026_s2_ou.yaml] [--loop python|fused]
[--out FILE]``

Builds the preset's run at the paper's size (n = 300, H = 100, 20 paths, float32, ledger on) through the
config builder, takes one warm-up step, then ``--steps`` steps under ``cProfile`` and prints the wall time
per step and the functions with the largest cumulative and own times; ``--out`` writes the text too.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--preset", default="massucco2026_s2_ou.yaml")
    parser.add_argument("--H", type=int, default=100)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--loop",
        choices=("python", "fused"),
        default="python",
        help="python (default): the step loop whose pieces (kernel, assembly, updates) the profile can see; "
        "fused: the compiled multi-step loop (one opaque call per block)",
    )
    args = parser.parse_args(argv)
    from run import cpu_info

    import attnflow
    from attnflow.experiments.config import build, load_config

    preset = Path(attnflow.__file__).parent / "experiments" / "presets" / args.preset
    cfg = load_config(preset)
    cfg = cfg.model_copy(update={"heads": cfg.heads.model_copy(update={"H": args.H})})
    import dataclasses

    from attnflow.simulation import Simulator

    sim = Simulator.from_spec(dataclasses.replace(build(cfg), loop=args.loop))
    sim.step()  # warm-up (kernels from the cache)
    prof = cProfile.Profile()
    load = os.getloadavg()
    t = time.perf_counter()
    prof.enable()
    k = 0
    while k < args.steps:  # blocks up to each record, as the driver takes them
        block = min(args.steps - k, cfg.record.every - sim.step_index % cfg.record.every)
        sim.advance(block)
        k += block
        if sim.step_index % cfg.record.every == 0:
            sim.record()
    prof.disable()
    wall = (time.perf_counter() - t) / args.steps
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(15)
    head = (
        f"{args.preset} H={args.H} n={cfg.tokens.n} paths={cfg.paths} {cfg.precision} loop={sim.loop}: "
        f"{wall:.3f} s per step (wall, {args.steps} steps, load {load[0]:.1f}); "
        f"steps per run {round(cfg.integrator.t1 / cfg.integrator.dt)} -> "
        f"{wall * cfg.integrator.t1 / cfg.integrator.dt:.0f} s per run\ncpu: {cpu_info().get('model_name')}\n"
    )
    text = head + buf.getvalue()
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
