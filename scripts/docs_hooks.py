"""MkDocs hooks of the attnflow site (``mkdocs.yml``: ``hooks: [scripts/docs_hooks.py]``).

Tutorials are Python scripts in ``docs/tutorials/NN_name.py`` written in the "percent" cell format:
``# %% [markdown]`` starts a prose cell (its lines are ``# `` comments holding Markdown), ``# %%`` a code
cell. At every build each script is executed (in its own process, cell by cell, in one namespace, from a
fresh temporary working directory, matplotlib on Agg) and turned into the page ``tutorials/NN_name.md``:
prose, code, what each cell printed, and the figures it left open (PNG files next to the page). A cell
that raises fails the build with the tutorial's name, the cell and the traceback; so does a tutorial that
runs longer than ``ATTNFLOW_TUTORIAL_TIMEOUT`` seconds (default 600).

The same file is the runner: ``python scripts/docs_hooks.py run SCRIPT OUTDIR`` executes SCRIPT and writes
``OUTDIR/cells.json`` and the figures.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

CELL = re.compile(r"^# %%(.*)$", re.M)


def split_cells(source: str) -> list[tuple[str, str]]:
    """``[(kind, text)]`` with kind ``markdown`` or ``code`` (text before the first marker is a code cell)."""
    cells: list[tuple[str, str]] = []
    parts = CELL.split(source)
    head, rest = parts[0], parts[1:]
    if head.strip():
        cells.append(("code", head.strip("\n")))
    for tag, body in zip(rest[::2], rest[1::2], strict=True):
        if "[markdown]" in tag:
            lines = [
                ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in body.strip("\n").splitlines()
            ]
            cells.append(("markdown", "\n".join(lines).strip("\n")))
        elif body.strip():
            cells.append(("code", body.strip("\n")))
    return cells


# -- runner (a separate process per tutorial) --------------------------------------------------------
def _run(script: Path, outdir: Path) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    results = []
    namespace = {"__name__": "__main__", "__file__": str(script)}
    status = 0
    for i, (kind, text) in enumerate(split_cells(script.read_text())):
        cell = {"kind": kind, "text": text, "stdout": "", "figures": [], "seconds": 0.0}
        if kind == "code":
            buf = io.StringIO()
            t0 = time.perf_counter()
            try:
                with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                    exec(compile(text, f"{script.name} (cell {i})", "exec"), namespace)
            except BaseException:  # noqa: BLE001 - reported to the build, which fails
                cell["error"] = traceback.format_exc()
                status = 1
            cell["seconds"] = time.perf_counter() - t0
            cell["stdout"] = buf.getvalue()
            for k, num in enumerate(plt.get_fignums()):
                name = f"{script.stem}_cell{i}_{k}.png"
                plt.figure(num).savefig(outdir / name, dpi=90, bbox_inches="tight")
                cell["figures"].append(name)
            plt.close("all")
        results.append(cell)
        if status:
            break
    (outdir / "cells.json").write_text(json.dumps(results, indent=1))
    return status


# -- the build -----------------------------------------------------------------------------------------
def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def render(script: Path, cells: list[dict], seconds: float) -> str:
    """The Markdown page of an executed tutorial."""
    out = []
    for c in cells:
        if c["kind"] == "markdown":
            out.append(c["text"])
            continue
        out.append(_fence(c["text"], "python"))
        if c["stdout"].strip():
            out.append(
                '!!! note "output"\n\n'
                + "\n".join("    " + ln for ln in _fence(c["stdout"].rstrip()).splitlines())
            )
        for f in c["figures"]:
            out.append(f"![figure of {script.stem}]({f})")
    out.append(
        f"---\n*Executed when this site was built ({seconds:.1f} s); the source is "
        f"[{script.name}]({script.name}): `python docs/tutorials/{script.name}` runs it.*"
    )
    return "\n\n".join(out) + "\n"


def execute(script: Path, workdir: Path) -> tuple[list[dict], float]:
    """Run a tutorial in a fresh process (working directory ``workdir``); raise on failure."""
    outdir = workdir / "out"
    timeout = float(os.environ.get("ATTNFLOW_TUTORIAL_TIMEOUT", "600"))
    t0 = time.perf_counter()
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    try:
        res = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "run", str(script.resolve()), str(outdir)],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"tutorial {script.name} ran longer than {timeout:g} s (ATTNFLOW_TUTORIAL_TIMEOUT); make its "
            "settings quicker"
        ) from None
    seconds = time.perf_counter() - t0
    cells_file = outdir / "cells.json"
    if not cells_file.is_file():
        raise RuntimeError(f"tutorial {script.name} did not run: {res.stderr.strip()[-2000:]}")
    cells = json.loads(cells_file.read_text())
    failed = [c for c in cells if c.get("error")]
    if failed or res.returncode:
        err = failed[0]["error"] if failed else res.stderr[-2000:]
        raise RuntimeError(
            f"tutorial {script.name} failed in a cell:\n{failed[0]['text'] if failed else ''}\n{err}"
        )
    return cells, seconds


_WORK: list[tempfile.TemporaryDirectory] = []

#: the API reference: one page per public subpackage, rendered by mkdocstrings from the numpydoc docstrings
API_PAGES = {
    "attnflow": "The top-level package: model, tokens, heads, simulate.",
    "attnflow.geometry": "Token spaces: the sphere and flat space.",
    # attnflow.model has no __all__: its modules are rendered one by one
    "attnflow.model": (
        "Attention kinds, tokens, heads, weight processes, the transformer model.",
        [
            "attnflow.model.transformer",
            "attnflow.model.tokens",
            "attnflow.model.heads",
            "attnflow.model.weights",
            "attnflow.model.attention",
            "attnflow.model.registry",
        ],
    ),
    "attnflow.dynamics": "The attention field: backends, pair sums, one assembly.",
    "attnflow.integrators": "One class per time-stepping method.",
    "attnflow.simulation": "SimulationSpec, Simulator, the energy ledger, the driver loop, simulate.",
    "attnflow.observables": "Pure functions of tokens, heads and runs.",
    "attnflow.analysis": "Fits, the energy-identity audit, reduced models, theorem checks.",
    "attnflow.experiments": "Configs, the run store, sweeps, reproductions.",
    "attnflow.studies": "Registered studies: config, runs, analysis.",
    "attnflow.report": "HTML reports of runs, sweeps, studies and reproductions.",
    "attnflow.training": (
        "Differentiable flows, the adjoint, tasks, losses, AdamW training, the risk's first variation.",
        [
            "attnflow.training.flow",
            "attnflow.training.adjoint",
            "attnflow.training.tasks",
            "attnflow.training.losses",
            "attnflow.training.trainer",
            "attnflow.training.meanfield",
            "attnflow.training.residual",
            "attnflow.training.depth",
        ],
    ),
    "attnflow.pde": "The mean-field Transformer PDE (81): spectral grids, the density field, the solver.",
    "attnflow.bridge": "Trained transformers (MiniLM, BERT, GPT-2) as heads, Theta_t and a forward pass.",
}


def api_page(module: str, entry: str | tuple[str, list[str]]) -> str:
    """The Markdown of one API page (mkdocstrings' ``:::`` directive; a module without ``__all__`` is
    given as its blurb and the list of its modules)."""
    blurb, parts = (entry, [module]) if isinstance(entry, str) else entry
    return f"# `{module}`\n\n{blurb}\n\n" + "\n\n".join(f"::: {m}" for m in parts) + "\n"


def on_files(files, config, **kwargs):
    """Execute every tutorial and add its page and figures to the site."""
    from mkdocs.structure.files import File

    for module, blurb in API_PAGES.items():
        files.append(File.generated(config, f"api/{module}.md", content=api_page(module, blurb)))
    tut_dir = Path(config["docs_dir"]) / "tutorials"
    for script in sorted(tut_dir.glob("[0-9][0-9]_*.py")):
        tmp = tempfile.TemporaryDirectory(prefix=f"attnflow-tutorial-{script.stem}-")
        _WORK.append(tmp)  # kept until the build ends (the figures are copied from it)
        cells, seconds = execute(script, Path(tmp.name))
        print(f"INFO    -  tutorial {script.name} executed in {seconds:.1f} s", file=sys.stderr)
        page = File.generated(config, f"tutorials/{script.stem}.md", content=render(script, cells, seconds))
        files.append(page)
        for c in cells:
            for f in c["figures"]:
                files.append(
                    File.generated(config, f"tutorials/{f}", abs_src_path=str(Path(tmp.name) / "out" / f))
                )
    return files


def on_post_build(config, **kwargs):
    while _WORK:
        _WORK.pop().cleanup()


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "run":
        sys.exit("usage: python scripts/docs_hooks.py run SCRIPT OUTDIR")
    sys.exit(_run(Path(sys.argv[2]), Path(sys.argv[3])))
