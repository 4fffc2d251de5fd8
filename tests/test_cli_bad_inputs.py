"""Every command on a table of bad inputs (issues 29 section 3 and 30): the exit status of the one
error-to-exit mapping (``attnflow.cli.errors``), exactly one ``error:`` line naming the problem, no
traceback, and a message under 2000 characters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from experiments_helpers import TINY
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.cli.errors import MAX_ERROR_CHARS, exit_code, message_of

runner = CliRunner()


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    """A directory of bad inputs: a file, a corrupt study, an empty directory, configs."""
    root = tmp_path_factory.mktemp("bad")
    (root / "afile").write_text("not a directory\n")
    (root / "cfg.yaml").write_text(yaml.safe_dump(TINY))
    (root / "bad.yaml").write_text("name: [unclosed\n")
    (root / "unknown_key.yaml").write_text(yaml.safe_dump({**TINY, "sigma": 1}))
    (root / "train_bad.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "small",
                "flow": {"d": 3, "layers": 0, "heads": 2},
                "task": {"kind": "measure", "loss": "mmd", "paths": 8, "n": 8},
            }
        )
    )
    (root / "corrupt_study").mkdir()
    (root / "corrupt_study" / "study.json").write_text("{bad json")
    (root / "empty").mkdir()
    (root / "runlike").mkdir()  # a particle run as far as the readers can tell (config.yaml only)
    (root / "runlike" / "config.yaml").write_text(yaml.safe_dump(TINY))
    return root


# (arguments with {w} for the workspace, exit status, a phrase the error line must hold)
CASES = [
    # config
    (["config", "check", "{w}/missing.yaml"], 2, "missing.yaml"),
    (["config", "check", "{w}/bad.yaml"], 2, "YAML"),
    (["config", "check", "{w}/unknown_key.yaml"], 2, "sigma"),
    # run
    (["run", "{w}/missing.yaml", "--out", "{w}/o1"], 2, "missing.yaml"),
    (["run", "{w}/bad.yaml", "--out", "{w}/o1"], 2, "YAML"),
    (["run", "{w}/cfg.yaml", "--out", "{w}/afile"], 2, "this is a file, not a directory"),
    (["run", "{w}/cfg.yaml", "--out", "{w}/afile/sub"], 2, "is a file, so no directory can be created"),
    (["run", "{w}/cfg.yaml", "--out", "{w}/o1", "--device", "gpu"], 2, "--device"),
    (["run", "{w}/cfg.yaml"], 2, "--out"),  # click's usage error: "Error: Missing option"
    # sweep
    (["sweep", "{w}/cfg.yaml", "--grid", "heads.H", "--out", "{w}/s1"], 2, "key=v1,v2"),
    (["sweep", "{w}/cfg.yaml", "--grid", "seed=0", "--out", "{w}/afile"], 2, "this is a file"),
    (["sweep", "{w}/cfg.yaml", "--grid", "seed=0", "--out", "{w}/s1", "-j", "0"], 2, "--workers"),
    # readers
    (["info", "{w}/nothere"], 2, "does not exist"),
    (["info", "{w}/afile"], 2, "is a file"),
    (["info", "{w}/empty"], 2, "holds nothing attnflow writes"),
    (["info", "{w}/corrupt_study"], 1, "is corrupt"),
    (["plot", "{w}/nothere"], 2, "does not exist"),
    (["plot", "{w}/empty"], 2, "holds nothing attnflow writes"),
    (["plot", "{w}/runlike"], 2, "holds no data"),
    (["plot", "{w}/runlike", "--output", "{w}/nodir/x.png"], 2, "does not exist; create it first"),
    (["animate", "{w}/nothere"], 2, "does not exist"),
    (["animate", "{w}/runlike", "--fps", "0"], 2, "--fps"),
    (["animate", "{w}/runlike"], 2, "holds no data"),
    (["pde-plot", "{w}/nothere"], 2, "does not exist"),
    (["pde-plot", "{w}/runlike"], 2, "`attnflow pde-plot` draws PDE runs"),
    (["report", "{w}/nothere"], 2, "does not exist; give a directory written by attnflow"),
    (["report", "{w}/empty"], 2, "holds nothing attnflow writes"),
    (["report", "{w}/runlike", "--theory-checks", "{w}/none.md"], 2, "--theory-checks"),
    (["report", "{w}/runlike", "--output", "{w}/nodir/r.html"], 2, "does not exist; create it first"),
    (["report", "{w}/corrupt_study"], 1, "is corrupt"),
    # studies
    (["study", "show", "{w}/corrupt_study"], 1, "is corrupt"),
    (["study", "show", "{w}/empty"], 2, "is not a study directory: study.json not found"),
    (["study", "show", "{w}/runlike"], 2, "`attnflow study show` shows study and reproduction"),
    (["study", "run", "nosuchstudy", "--out", "{w}/st"], 2, "nosuchstudy"),
    (["study", "run", "critical_beta", "--out", "{w}/st", "--set", "novalue"], 2, "key=value"),
    (["study", "run", "critical_beta", "--out", "{w}/afile"], 2, "this is a file"),
    (["study", "run", "critical_beta", "--out", "{w}/st", "--device", "gpu"], 2, "--device"),
    (["reproduce", "nosuchpaper", "--out", "{w}/rp"], 2, "unknown reproduction 'nosuchpaper'"),
    (["reproduce", "massucco2026", "--out", "{w}/afile/x"], 2, "is a file"),
    # training
    (["train"], 2, "needs a CONFIG and --out"),
    (["train", "{w}/cfg.yaml", "--out", "{w}/afile"], 2, "this is a file, not a directory"),
    (["train", "{w}/cfg.yaml", "--out", "{w}/afile/sub"], 2, "is a file, so no directory can be created"),
    (["train", "{w}/missing.yaml", "--out", "{w}/t1"], 2, "missing.yaml"),
    (["train", "{w}/train_bad.yaml", "--out", "{w}/t1"], 2, "invalid training config"),
    # theory checks
    (["check-edi", "--quick", "--json", "{w}/nodir/a.json"], 2, "--json"),
    (["check-edi", "--quick", "--device", "gpu"], 2, "--device"),
    (["critical-noise", "--beta", "1", "--d", "100000"], 2, "leaves float64"),
    (["critical-noise", "--beta", "1", "--d", "1"], 2, "d must be an integer >= 2"),
    (["critical-noise", "--beta", "1", "--n", "0"], 2, "n must be an integer >= 2"),
    (["critical-noise", "--beta", "1", "--n", "1"], 2, "n must be an integer >= 2"),
    (["critical-noise", "--beta", "1", "--attention", "bogus"], 2, "bogus"),
    (["critical-noise", "--beta", "0", "--d", "3"], 2, "beta"),
]


def _ids(case) -> str:
    return " ".join(a.replace("{w}/", "") for a in case[0])[:60]


@pytest.mark.parametrize(("args", "code", "phrase"), CASES, ids=[_ids(c) for c in CASES])
def test_bad_input_gives_one_error_line_and_its_exit_status(ws, args, code, phrase):
    argv = [a.replace("{w}", str(ws)) for a in args]
    res = runner.invoke(app, argv)
    out = res.output
    assert res.exit_code == code, out
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out
    errors = [line for line in out.splitlines() if re.match(r"(?i)error:", line)]
    assert len(errors) == 1, out
    assert phrase in out, out
    assert len(errors[0]) <= len("error: ") + MAX_ERROR_CHARS
    # the command line's words, not Python's
    assert "scheduler=None" not in out and "resume=False" not in out and "None (mean field)" not in out


def test_training_errors_are_not_called_experiment_config_errors(ws):
    res = runner.invoke(app, ["train", str(ws / "train_bad.yaml"), "--out", str(ws / "t2")])
    assert res.exit_code == 2 and "invalid training config" in res.output
    assert "experiment config" not in res.output


def test_report_on_a_missing_directory_does_not_suggest_creating_it(ws):
    res = runner.invoke(app, ["report", str(ws / "nothere")])
    assert res.exit_code == 2 and "create it" not in res.output


def test_version():
    from attnflow import __version__

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"attnflow {__version__}"


def test_the_mapping_is_one_table():
    from attnflow.cli.errors import CliError
    from attnflow.experiments.errors import ConfigError
    from attnflow.experiments.files import CorruptFileError

    assert exit_code(CliError("x", 3)) == 3
    assert exit_code(ConfigError("x")) == 2
    assert exit_code(CorruptFileError("x")) == 1
    assert exit_code(KeyboardInterrupt()) == 130
    assert exit_code(FileNotFoundError(2, "No such file or directory", "f")) == 2
    assert exit_code(PermissionError(13, "Permission denied", "f")) == 1
    assert exit_code(ValueError("x")) == 2 and exit_code(ValueError("x"), values_are_input=False) == 1
    assert exit_code(RuntimeError("x")) == 1
    # messages: one line for unexpected errors, capped; OS errors name the file
    long = message_of(RuntimeError("a\nb " * 5000), "doing x")
    assert long.startswith("doing x: RuntimeError: a b") and "\n" not in long
    assert len(long) == MAX_ERROR_CHARS and long.endswith("...")
    assert (
        message_of(PermissionError(13, "Permission denied", "/x"), "writing")
        == "writing: Permission denied: /x"
    )
    # a later line of a multi-line message never reads as a second error line
    assert message_of(ConfigError("invalid:\nerror: nested"), "a").splitlines()[1] == "  error: nested"
    assert (
        message_of(ValueError("run locally with scheduler=None"), "a")
        == "run locally (leave out --scheduler)"
    )
