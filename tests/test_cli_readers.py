"""Every command that reads a directory on every kind attnflow writes (issue 31, "every command
understands every run"): a particle run, a PDE run, a training run, a sweep, a study, a reproduction and
a probe (issue 26).

Each reader either reads the kind (exit 0, and ``info`` says which kind it found) or refuses it with
exit 2 and one line that names the kind and a command that reads it; never a traceback, and ``info``
never calls a PDE or training run damaged. The directories are small real ones: the runs, the sweep and
the training run are made here (~25 s together); the study and the reproduction are copies of the
committed outputs in docs/studies (their study.json, summary.json and table.md).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from experiments_helpers import TINY
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.cli.kinds import KINDS, READERS, detect

runner = CliRunner()
DOCS = Path(__file__).resolve().parents[1] / "docs" / "studies"

PDE = {
    "name": "pde_s1",
    "model": "pde",
    "dynamics": {"direction": "ascent", "attention": "softmax", "beta": 1.0},
    "weights": {"process": "constant"},
    "heads": {"init": "identity", "H": 2, "scale": 1.0},
    "density": {"init": "von_mises_fisher", "d": 2, "centres": [[1.0, 0.0], [0.0, 1.0]], "kappa": 6.0},
    "pde": {"band_limit": 16},
    "integrator": {"dt": 0.02, "t1": 0.06},
    "record": {"every": 1},
}
TRAINING = {
    "name": "small",
    "seed": 1,
    "model": {"direction": "ascent", "beta": 1.0},
    "flow": {"d": 3, "layers": 1, "heads": 1, "t1": 1.0, "steps_per_layer": 1, "param": "dv"},
    "task": {"kind": "measure", "loss": "mmd", "paths": 4, "n": 4},
    "train": {
        "steps": 2,
        "lr": 0.05,
        "batch": 2,
        "gradient": "adjoint",
        "record_every": 1,
        "checkpoint_every": 1,
    },
}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, Path]:
    from attnflow.experiments.config import load_config
    from attnflow.experiments.pde_runs import run_pde
    from attnflow.experiments.store import run_experiment
    from attnflow.experiments.sweep import run_sweep
    from attnflow.experiments.training_run import run_training

    root = tmp_path_factory.mktemp("kinds")
    out = {kind: root / kind.replace(" ", "_") for kind in KINDS}
    run_experiment(load_config(TINY), out["particle run"])
    run_pde(PDE, out["pde run"])
    run_training(TRAINING, out["training run"])
    run_sweep(load_config(TINY), {"seed": [0]}, out["sweep"], workers=1)
    shutil.copytree(DOCS / "critical_beta", out["study"], ignore=shutil.ignore_patterns("*.png"))
    out["reproduction"].mkdir()
    for name in ("study.json", "summary.json", "table.md"):
        shutil.copy(DOCS / "massucco2026" / name, out["reproduction"] / name)
    out["probe"].mkdir()  # committed probe results: summary.json (the figures are left out for speed)
    shutil.copy(DOCS / "probe" / "minilm-l3" / "summary.json", out["probe"] / "summary.json")
    return out


def test_every_kind_is_recognised(dirs):
    for kind, path in dirs.items():
        assert detect(path) == kind, path


#: reader -> extra arguments that keep it quick
ARGS = {
    "info": [],
    "plot": [],
    "animate": ["--max-frames", "2", "--gif", "--output", "{d}/../{k}.gif"],
    "report": ["--max-frames", "2", "--max-tokens", "8", "--max-runs", "1", "--output", "{d}/../{k}.html"],
    "study show": [],
    "pde-plot": ["--out", "{d}/../{k}_pde_figs"],
}

#: what a reader that reads a kind prints (a phrase of its output)
READ = {
    ("info", "particle run"): "run ",
    ("info", "pde run"): "PDE run ",
    ("info", "training run"): "training run ",
    ("info", "sweep"): "sweep ",
    ("info", "study"): "study critical_beta",
    ("info", "reproduction"): "reproduction massucco2026",
    ("info", "probe"): "probe ",
    ("plot", "particle run"): "summary.png",
    ("plot", "sweep"): "sweep.png",
    ("animate", "particle run"): ".gif",
    ("report", "particle run"): ".html",
    ("report", "sweep"): ".html",
    ("report", "study"): ".html",
    ("report", "reproduction"): ".html",
    ("report", "probe"): ".html",
    ("study show", "study"): "study critical_beta",
    ("study show", "reproduction"): "reproduction massucco2026",
    ("pde-plot", "pde run"): "wrote ",
}

#: how the refusals name each kind
NAMED = {
    "particle run": "is a particle run directory",
    "pde run": "is a PDE run directory",
    "training run": "is a training run directory",
    "sweep": "is a sweep directory",
    "study": "is a study directory",
    "reproduction": "is a reproduction directory",
    "probe": "is a probe directory",
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reader", list(ARGS))
def test_each_reader_on_each_kind(dirs, reader, kind):
    d = dirs[kind]
    extra = [a.format(d=d, k=f"{reader.replace(' ', '_')}_{kind.replace(' ', '_')}") for a in ARGS[reader]]
    res = runner.invoke(app, [*reader.split(), str(d), *extra])
    out = res.output
    assert "Traceback" not in out and "damaged" not in out, out
    if (reader, kind) in READ:
        assert reader in READERS[kind] or reader == "pde-plot"
        assert res.exit_code == 0, out
        assert READ[reader, kind] in out, out
        assert not any(re.match(r"(?i)error:", line) for line in out.splitlines()), out
    else:
        assert res.exit_code == 2, out
        errors = [line for line in out.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, out
        assert NAMED[kind] in errors[0], out
        # it names the command it is and a command that reads the kind
        assert f"`attnflow {reader}`" in errors[0], out
        assert f"`attnflow {READERS[kind][0]} {d}`" in errors[0], out


def test_readers_table_matches_what_they_read():
    readers = {(r, k) for k in KINDS for r in READERS[k]}
    assert readers | {("pde-plot", "pde run")} == set(READ) | {("info", k) for k in KINDS}


def test_docs_table_is_the_readers_table():
    """docs/cli.md's table of which command reads what is READERS (plus pde-plot on PDE runs)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| directory (written by)"))
    commands = [c.strip().strip("`").removeprefix("attnflow ") for c in header.split("|")[2:-1]]
    names = {"particle run": "particle run", "PDE run": "pde run", "training run": "training run"}
    names |= {"sweep": "sweep", "study": "study", "reproduction": "reproduction", "probe": "probe"}
    seen = {}
    for line in text.splitlines():
        for label, kind in names.items():
            if line.startswith(f"| {label} ("):
                cells = [c.strip() for c in line.split("|")[2:-1]]
                seen[kind] = {c for c, v in zip(commands, cells, strict=True) if v == "yes"}
    assert seen == {k: set(READERS[k]) for k in KINDS}
