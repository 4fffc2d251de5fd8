"""The tasks of ``pde_particles`` (issue 27): particle blocks per (n, replicates), assembly, threads."""

from __future__ import annotations

import json

import numba
import pytest

from attnflow.studies import get_study, pde_particles as pp

TINY = dict(
    s1_n=[100, 150, 200],
    s1_replicates=[2, 1, 1],
    s1_L=16,
    s2_n=[60, 80, 100],
    s2_replicates=[1, 1, 2],
    s2_L=10,
    s2_w2_max_n=80,
    t1=0.1,
    dt_pde=0.05,
    dt_particles=0.05,
    closed_form_degrees=[1],
)


def test_blocks_cover_every_replicate_once_within_the_target():
    st = get_study("pde_particles")
    for cfg in (st.config({}), st.config({}, quick=True)):
        blocks = pp.particle_blocks(cfg)
        for part in ("s1", "s2"):
            ns, reps = getattr(cfg, f"{part}_n"), getattr(cfg, f"{part}_replicates")
            for n, R in zip(ns, reps, strict=True):
                got = [r for p, m, b, _ in blocks if p == part and m == n for r in range(*b)]
                assert got == list(range(R)), (part, n, got)
        # a block holds one replicate or stays within the target (the cost model's seconds)
        for _, _, (lo, hi), cost in blocks:
            assert hi - lo == 1 or cost <= pp.BLOCK_TARGET_S, (lo, hi, cost)
    # the full config is spread: its largest n on S^1 (2 replicates of ~23 s) is two tasks
    full = pp.particle_blocks(st.config({}))
    assert [b for p, n, b, _ in full if p == "s1" and n == 100000] == [(0, 1), (1, 2)]
    plan = st.plan(st.config({}))
    costs = [t.cost_s for t in plan.values()]
    assert costs == sorted(costs, reverse=True)  # longest first: the runner submits in plan order
    assert {"s1", "s2", "closed_forms", "ledger_order", "sht_ducc0"} <= set(plan)


def _strip(m: dict) -> str:
    return json.dumps({k: v for k, v in m.items() if k not in ("pde_seconds", "particle_seconds")})


def test_blocks_give_the_numbers_of_one_task_per_manifold():
    """The rows of replicates run in separate blocks are those of one block with every replicate, bit for
    bit (each replicate is seeded by (n, rep); the PDE is solved again in each block), and the tasks leave
    numba's thread count as they found it."""
    c = pp.PdeParticlesConfig(**TINY)
    cfg = c.model_dump(mode="json")
    before = numba.get_num_threads()
    for part, ns, reps in (("s1", c.s1_n, c.s1_replicates), ("s2", c.s2_n, c.s2_replicates)):
        pde = {"d": 2 if part == "s1" else 3, "L": 8, "band_min": 8, "nodes": 1, "pde_seconds": 0.0}
        whole = [pp.pde_task(part, cfg, n=n, reps=[0, R])["result"] for n, R in zip(ns, reps, strict=True)]
        # the n with two replicates, in two blocks; the others as whole
        split = [
            pp.pde_task(part, cfg, n=n, reps=[r, r + 1])["result"]
            for n, R in zip(ns, reps, strict=True)
            if R == 2
            for r in range(2)
        ]
        split += [w for w, R in zip(whole, reps, strict=True) if R == 1]
        a, b = pp._assemble(pde, split[::-1], ns), pp._assemble(pde, whole, ns)  # any block order
        assert _strip(a) == _strip(b)
        assert [(r["n"], r["rep"]) for r in a["rows"]] == [
            (n, r) for n, R in zip(ns, reps, strict=True) for r in range(R)
        ]
        assert set(a["fits"]) == ({"l2_0", "l2_T", "w2_0", "w2_T"})
        w2_rows = [r["n"] for r in a["rows"] if "w2_T" in r]
        assert w2_rows == ([r["n"] for r in a["rows"]] if part == "s1" else [60, 80])
        assert numba.get_num_threads() == before


def test_task_refuses_bad_parts_and_blocks():
    cfg = pp.PdeParticlesConfig(**TINY).model_dump(mode="json")
    with pytest.raises(ValueError, match="unknown part 's3' of pde_particles; valid: s1, s2"):
        pp.pde_task("s3", cfg)
    with pytest.raises(
        ValueError, match="part 'closed_forms' of pde_particles takes no particle count: got n = 100"
    ):
        pp.pde_task("closed_forms", cfg, n=100, reps=[0, 1])
    with pytest.raises(
        ValueError, match=r"particle block n = 120, reps = \[0, 1\] of part 's1' is not in the config"
    ):
        pp.pde_task("s1", cfg, n=120, reps=[0, 1])
    with pytest.raises(ValueError, match=r"reps = \[2, 4\] of part 's1' .* within its replicate count"):
        pp.pde_task("s1", cfg, n=100, reps=[2, 4])
    with pytest.raises(ValueError, match=r"reps = None of part 's2'"):
        pp.pde_task("s2", cfg, n=60)
