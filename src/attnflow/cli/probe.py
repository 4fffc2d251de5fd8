"""``attnflow probe``: per-layer and per-head measurements of a real model read from its own forward pass,
beside random-initialisation nulls of the same architecture (issue 26; the logic is
:mod:`attnflow.analysis.probe`, the figures :mod:`attnflow.plot.probe`, the guide docs/probe.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import app
from .errors import fail, reported


@app.command("probe")
def probe_command(
    model: Annotated[
        str,
        typer.Argument(help="minilm, minilm-l3, smollm2, a Hugging Face folder, an .onnx or a .gguf file."),
    ] = "minilm",
    out: Annotated[Path, typer.Option("--out", help="New directory: probe.zarr, summary, figures.")] = Path(
        "out/probe"
    ),
    corpus: Annotated[
        Path | None, typer.Option("--corpus", help="Text file, a sentence a line (default: shipped corpus).")
    ] = None,
    random_init: Annotated[
        int | None, typer.Option("--random-init", help="Probe the architecture at random init (seed).")
    ] = None,
    nulls: Annotated[int, typer.Option("--nulls", help="Random initialisations drawn as the null.")] = 3,
    sentences: Annotated[int, typer.Option("--sentences", help="First N sentences (0 = all).")] = 0,
    lengths: Annotated[str, typer.Option("--lengths", help="Lengths of the Jacobians.")] = "8,32,128",
    iterations: Annotated[int, typer.Option("--iterations", help="Most products Jv per spectral norm.")] = 24,
    method: Annotated[str, typer.Option("--method", help="Spectral norms: lanczos or power.")] = "lanczos",
    tol: Annotated[float, typer.Option("--tol", help="Lanczos stops below this relative rise.")] = 1e-3,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples over sentences.")] = 1000,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Sentences per forward pass.")] = 64,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap and the power iterations.")] = 0,
    no_figures: Annotated[bool, typer.Option("--no-figures", help="Skip the PNG figures.")] = False,
) -> None:
    """Per-layer and per-head measurements of a real model and of its random-init nulls (docs/probe.md)."""
    with reported(f"cannot probe {model}"):
        from ..analysis.probe import ProbeConfig, run_probe

        if nulls < 0 or sentences < 0:
            raise fail(f"--nulls and --sentences must be >= 0: got {nulls}, {sentences}", 2)
        try:
            lens = tuple(int(x) for x in lengths.split(",") if x.strip())
            config = ProbeConfig(
                batch_size=batch_size, bootstrap=bootstrap, seed=seed, null_seeds=tuple(range(nulls)),
                jacobian_lengths=lens, power_iterations=iterations, jacobian_method=method, jacobian_tol=tol,
            )  # fmt: skip
        except ValueError as exc:
            raise fail(f"{exc}", 2) from None
        if corpus is None:
            from ..studies.real_model import load_corpus

            texts = load_corpus()
        else:
            if not corpus.is_file():
                raise fail(f"--corpus {corpus}: no such file; give a text file, one sentence a line", 2)
            texts = [line.strip() for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
        texts = texts[:sentences] if sentences else texts
        figures = None
        if not no_figures:
            from ..plot.probe import plot_probe as figures
        try:
            summary = run_probe(
                model, texts, out, config, random_init=random_init, figures=figures,
                progress=lambda m: typer.echo(m, err=True),
            )  # fmt: skip
        except ValueError as exc:
            raise fail(str(exc), 2) from None
        typer.echo(f"{out}: {summary['model']}, {summary['sentences']} sentences, {summary['seconds']} s")
