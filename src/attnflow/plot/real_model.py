"""Figures of the study ``real_model`` (:mod:`attnflow.studies.real_model`): a trained transformer layer by
layer against the attention flow of its own heads.

``plot_real_model(data, out_dir) -> {key: file}`` is registered for the study in :mod:`attnflow.plot.studies`;
``data`` is the study's summary. Figures are :class:`matplotlib.figure.Figure` objects saved as PNGs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from .common import DPI, save_named as _save, write_figure

__all__ = ["plot_real_model", "plot_real_model_flows"]


def _band(ax, x, stat, label, style):
    m, s = np.asarray(stat["mean"], float), np.asarray(stat["sd"], float)
    line = ax.plot(x, m, style, label=label)[0]
    ax.fill_between(x, m - s, m + s, color=line.get_color(), alpha=0.2, lw=0)


def _text(data: dict, out_dir: Path) -> dict[str, str]:
    t, L = data["text"], data["model"]["layers"]
    depth, layer = np.arange(L + 1), np.arange(L)
    fig = Figure(figsize=(11, 6.5))
    axes = fig.subplots(2, 3)
    ax = axes[0, 0]
    ax.plot(depth, t["model"]["cos"], "o-", label="model")
    ax.plot(depth, t["flow"]["cos"], "s-", label="attention-only flow")
    ax.plot(depth, t["flow_one_step"]["cos"], "^--", label="flow, 1 step per layer")
    if "flow_mlp" in t:
        ax.plot(depth, t["flow_mlp"]["cos"], "d-", label="attention + MLP flow")
    ax.set(xlabel="depth l", ylabel="mean pairwise cosine", title="clustering")
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    ax.plot(depth, t["model"]["erank"], "o-", label="model")
    ax.plot(depth, t["flow"]["erank"], "s-", label="flow")
    if "flow_mlp" in t:
        ax.plot(depth, t["flow_mlp"]["erank"], "d-", label="attention + MLP flow")
    ax.set(xlabel="depth l", ylabel="effective rank", title="effective rank of the Gram matrix")
    ax.legend(fontsize=7)
    ax = axes[0, 2]
    ax.plot(depth[1:], t["model"]["w2"], "o-", label="model")
    ax.plot(depth[1:], t["flow"]["w2"], "s-", label="flow")
    ax.set(xlabel="depth l", ylabel="W2(l-1, l) [rad]", title="W2 between consecutive depths")
    ax.legend(fontsize=7)
    ax = axes[1, 0]
    ax.plot(layer, np.mean(t["entropy_model"], axis=1), "o-", label="model (with biases)")
    ax.plot(layer, np.mean(t["entropy_model_biasless"], axis=1), "v-", label="biasless heads, model tokens")
    ax.plot(layer, np.mean(t["entropy_flow"], axis=1), "s-", label="flow")
    ax.set(xlabel="layer l", ylabel="attention entropy [nats], mean over heads", title="attention entropy")
    ax.legend(fontsize=7)
    ax = axes[1, 1]
    ax.semilogy(layer, t["ledger_model"]["E"], "o-", label="E, model tokens")
    ax.semilogy(layer, t["ledger_flow"]["E"], "s-", label="E, flow tokens")
    ax.semilogy(layer, t["ledger_model"]["G2"], "o:", label="G^2, model tokens")
    ax.semilogy(layer, t["ledger_flow"]["G2"], "s:", label="G^2, flow tokens")
    ax.set(xlabel="layer l", title="energy and G^2 of layer l's heads")
    ax.legend(fontsize=7)
    ax = axes[1, 2]
    ax.plot(depth, t["agreement"], "s-", label="attention-only flow")
    if "agreement_mlp" in t:
        ax.plot(depth, t["agreement_mlp"], "d-", label="attention + MLP flow")
    ax.legend(fontsize=7)
    ax.set(xlabel="depth l", ylabel="mean <z_l,i, x_l,i>", title="token-wise agreement model / flow")
    fig.suptitle(f'{data["model"]["source"]}: "{t["sentence"][:70]}" ({t["tokens"]} tokens)', fontsize=9)
    return _save(fig, out_dir, "real_model_text.png")


def _sweep(data: dict, out_dir: Path) -> dict[str, str]:
    s, L = data["sweep"], data["model"]["layers"]
    depth = np.arange(L + 1)
    fig = Figure(figsize=(11, 3.6))
    axes = fig.subplots(1, 3)
    _band(axes[0], depth, s["model"]["cos"], f"model ({s['sentences']} sentences)", "o-")
    _band(axes[0], depth, s["flow"]["cos"], f"flow ({s['flow_sentences']} sentences)", "s-")
    if "flow_mlp" in s:
        _band(axes[0], depth, s["flow_mlp"]["cos"], "attention + MLP flow", "d-")
    axes[0].set(
        xlabel="depth l", ylabel="mean pairwise cosine", title="clustering over the corpus (mean ± sd)"
    )
    axes[0].legend(fontsize=7)
    _band(axes[1], depth, s["model"]["erank"], "model", "o-")
    _band(axes[1], depth, s["flow"]["erank"], "flow", "s-")
    if "flow_mlp" in s:
        _band(axes[1], depth, s["flow_mlp"]["erank"], "attention + MLP flow", "d-")
    axes[1].set(xlabel="depth l", ylabel="effective rank")
    axes[1].legend(fontsize=7)
    thr = np.asarray(data["thresholds"], float)
    for i in sorted({0, L // 2, L}):
        axes[2].plot(thr, np.asarray(s["model"]["clusters"]["mean"])[i], "o-", label=f"model, depth {i}")
        axes[2].plot(thr, np.asarray(s["flow"]["clusters"]["mean"])[i], "s--", label=f"flow, depth {i}")
    axes[2].set(xlabel="threshold [rad]", ylabel="mean cluster count", title="threshold sensitivity")
    axes[2].legend(fontsize=6)
    return _save(fig, out_dir, "real_model_sweep.png")


def _extrapolation(data: dict, out_dir: Path) -> dict[str, str]:
    s, L = data["sweep"], data["model"]["layers"]
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    _band(ax, np.arange(L + 1), s["model_on_flow_sentences"]["cos"], "model", "o-")
    _band(ax, np.arange(L + 1), s["flow"]["cos"], "flow with the model's heads", "s-")
    if "flow_mlp" in s:
        _band(ax, np.arange(L + 1), s["flow_mlp"]["cos"], "attention + MLP flow", "d-")
    for beyond, style in (("frozen", "s--"), ("repeat", "s:")):
        key = f"extrapolation_{beyond}"
        if key in s:
            e = s[key]["cos"]
            _band(ax, L + np.arange(len(e["mean"])), e, f"flow past depth {L}, {beyond}", style)
    ax.axvline(L, color="0.5", lw=0.8)
    ax.set(xlabel="depth (layers)", ylabel="mean pairwise cosine", title="continuous-depth extrapolation")
    ax.legend(fontsize=7)
    return _save(fig, out_dir, "real_model_extrapolation.png")


def _entropy(data: dict, out_dir: Path) -> dict[str, str]:
    s = data["sweep"]
    keys = (("entropy_model", "model (with biases)"), ("entropy_model_biasless", "biasless heads"),
            ("entropy_flow", "flow"))  # fmt: skip
    mats = [np.asarray(s[k]["mean"], float) for k, _ in keys]
    lo, hi = min(m.min() for m in mats), max(m.max() for m in mats)
    fig = Figure(figsize=(11, 3.4))
    axes = fig.subplots(1, 3)
    for ax, m, (_, title) in zip(axes, mats, keys, strict=True):
        im = ax.imshow(m, aspect="auto", vmin=lo, vmax=hi, cmap="viridis")
        ax.set(xlabel="head h", ylabel="layer l", title=f"attention entropy: {title}")
    fig.colorbar(im, ax=axes, shrink=0.8, label="nats (mean over sentences and tokens)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_figure(fig, out_dir / "real_model_entropy.png", dpi=DPI, root=out_dir)
    return {"real_model_entropy": "real_model_entropy.png"}


def plot_real_model(data: dict, out_dir: Path) -> dict[str, str]:
    """Figures of the sentence ``text``, the corpus sweep, the extrapolation and per-head entropy."""
    files: dict[str, str] = {}
    for draw in (_text, _sweep, _extrapolation, _entropy):
        files.update(draw(data, out_dir))
    return files


#: styles of the model, the no-MLP network (n) and the flows (a)-(g) of ``real_model_flows``
_FLOW_STYLES = (
    ("model", "model", "ko-"),
    ("no_mlp", "(n) no-MLP network", "k:"),
    ("attention", "(a) bias-free attention", "s-"),
    ("biases", "(b) biases + LN shift", "v--"),
    ("fitted_time", "(c) fitted time (report half)", "^-"),
    ("model_scores", "(d) model's scores", "x:"),
    ("mlp", "(e) attention + MLP", "d-"),
    ("frames", "(f) attention + LN frames", "P-"),
    ("frames_mlp", "(g) (f) + MLP", "*-"),
)


def _ci_band(ax, x, stat, label, style):
    m = np.asarray(stat["mean"], float)
    line = ax.plot(x, m, style, label=label, ms=3)[0]
    ax.fill_between(x, np.asarray(stat["lo"], float), np.asarray(stat["hi"], float), color=line.get_color(),
                    alpha=0.15, lw=0)  # fmt: skip


def plot_real_model_flows(data: dict, out_dir: Path) -> dict[str, str]:
    """One figure per family of ``real_model_flows``: the model and the five flows per depth (mean cosine of
    sphere tokens and of hidden states, clusters, effective rank, agreement with 95% bootstrap bands),
    and the fitted times with the special-token attention mass per layer."""
    files: dict[str, str] = {}
    thr = data["thresholds"]
    k = thr.index(min(thr, key=lambda t: abs(t - data["cluster_threshold"])))
    for fam, s in data["families"].items():
        L = s["model"]["layers"]
        depth = np.arange(L + 1)
        fig = Figure(figsize=(13, 7))
        axes = fig.subplots(2, 3)
        panels = (
            (axes[0, 0], "sphere", "cos", "mean cosine, sphere tokens"),
            (axes[0, 1], "hidden", "cos", "mean cosine, hidden states"),
            (axes[0, 2], "sphere", "clusters", f"clusters at {thr[k]:g} rad, sphere tokens"),
            (axes[1, 0], "sphere", "erank", "effective rank, sphere tokens"),
            (axes[1, 1], "sphere", "agree", "agreement <z_model, x_flow>, sphere tokens"),
        )
        for ax, rep, key, title in panels:
            for src, label, style in _FLOW_STYLES:
                if (key == "agree" and src == "model") or src not in s["per_depth"][rep]:
                    continue
                st = s["per_depth"][rep][src][key]
                if key == "clusters":
                    st = {q: np.asarray(st[q], float)[:, k] for q in ("mean", "lo", "hi")}
                _ci_band(ax, depth, st, label, style)
            mr = s["model_on_report_half"][rep].get(key)
            if mr is not None:
                mr = np.asarray(mr, float)
                y = mr[:, k] if key == "clusters" else mr
                ax.plot(depth, y, "k--", lw=0.8, label="model, report half")
            ax.set(xlabel="depth l", title=title)
        axes[0, 0].legend(fontsize=7)
        ax = axes[1, 2]
        layer = np.arange(L)
        sk = s["sink"]
        ax.plot(layer, sk["model"], "ko-", ms=3, label="sink mass: model")
        ax.plot(layer, sk["heads_biasfree"], "s-", ms=3, label="sink mass: bias-free heads (model tokens)")
        ax.plot(layer, sk["flow_attention"], "s:", ms=3, label="sink mass: flow (a)")
        ax.set(xlabel="layer l", ylabel="attention on special tokens", ylim=(0, 1))
        ax2 = ax.twinx()
        ax2.plot(layer, s["fitted_times"][0]["times"], "^-", color="tab:red", ms=3, label="fitted T_l")
        ax2.set_ylabel("fitted T_l", color="tab:red")
        ax.legend(fontsize=6, loc="upper left")
        ax.set_title("special-token attention; fitted time")
        fig.suptitle(f"{fam}: {s['model']['name']}, {s['sentences']} sentences (95% bootstrap bands)")
        files.update(_save(fig, out_dir, f"real_model_flows_{fam}.png"))
    return files
