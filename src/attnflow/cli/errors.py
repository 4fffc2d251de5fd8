"""The one error-to-exit mapping of the command line.

Every command runs its body inside :func:`reported`. An exception that reaches it becomes exactly one line
``error: ...`` on stderr (a config error lists its problems on the lines after it), never a traceback, and
an exit status taken from :data:`EXIT_CODES`:

* 0 success;
* 1 a run or a task failed, or a directory cannot be used (in use by another process, corrupt, another
  run's, not created by attnflow), or an unexpected error (its type and message are printed);
* 2 bad input: an invalid config, option or grid, a missing file or directory, a path that is a file;
* 130 interrupted (Ctrl-C): the run store checkpointed, rerunning the same command resumes.

Library messages speak Python (``resume=False``, ``out_dir``); :func:`for_cli` replaces them by the flags
that set the same thing. Messages are capped at :data:`MAX_ERROR_CHARS` characters.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator

import click
import typer

__all__ = [
    "CLI_PHRASES",
    "EXIT_CODES",
    "MAX_ERROR_CHARS",
    "CliError",
    "exit_code",
    "fail",
    "for_cli",
    "message_of",
    "reported",
]

#: The longest message printed after ``error:``.
MAX_ERROR_CHARS = 2000

#: Library phrase -> command-line phrase, applied in this order by :func:`for_cli`.
CLI_PHRASES: tuple[tuple[str, str], ...] = (
    ("run_experiment(config, out_dir)", "`attnflow run CONFIG --out DIR`"),
    ("pass resume=False", "pass --no-resume"),
    ("rerun with resume=False", "rerun with --no-resume"),
    ("another out_dir", "another --out"),
    ("an empty or new out_dir", "an empty or new --out"),
    (
        "start from EXAMPLE_TRAINING_YAML in attnflow.experiments.training_config",
        "write one like `attnflow train --example`",
    ),
    ("attnflow.experiments.sweep_info describes it", "`attnflow info` describes it"),
    ("attnflow.experiments.run_info describes it", "`attnflow info` describes it"),
    ("attnflow.studies.available_studies() lists them", "`attnflow study list` describes them"),
    ("available_studies()", "`attnflow study list`"),
    ("run_study(name, out_dir)", "`attnflow study run NAME --out DIR`"),
    ("tokens or None (mean field)", "tokens (leave out --n for the mean field)"),
    ("run locally with scheduler=None", "run locally (leave out --scheduler)"),
    ("scheduler=None", "no --scheduler"),
)


class CliError(Exception):
    """A refusal decided by a command: ``message`` (the rule, the value, the fix) and the exit ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


#: Exception class (module, name) -> exit code and whether its message is shown as it is (the library's
#: own errors name the rule, the value and the fix) or after the command's ``action`` and the type (an
#: OS error, an unexpected error). The first class the exception is an instance of wins: subclasses come
#: before their bases. A class whose module was never imported cannot have been raised, so the table
#: imports nothing.
EXIT_CODES: tuple[tuple[str, str, int, bool], ...] = (
    ("attnflow.cli.errors", "CliError", -1, True),  # its own code
    ("builtins", "KeyboardInterrupt", 130, True),
    ("attnflow.experiments.errors", "ConfigError", 2, True),  # StudyConfigError, training config errors
    ("attnflow.studies.errors", "UnknownStudyError", 2, True),
    ("attnflow.studies.errors", "NotAStudyDirectoryError", 2, True),
    ("attnflow.report.page", "NotReportableError", 2, True),
    ("attnflow.experiments.files", "CorruptFileError", 1, True),  # CorruptRunError
    ("attnflow.experiments.files", "UnsafePathError", 1, True),
    ("attnflow.experiments.locking", "DirectoryLockedError", 1, True),
    ("attnflow.experiments.store", "RunConfigMismatchError", 1, True),
    ("attnflow.experiments.sweep", "SweepMismatchError", 1, True),
    ("attnflow.experiments.sweep", "SchedulerError", 1, True),
    ("attnflow.studies.errors", "StudyMismatchError", 1, True),
    ("attnflow.studies.errors", "StudyRunError", 1, True),
    ("attnflow.training.trainer", "NonFiniteLossError", 1, True),
    ("attnflow.report.browser", "BrowserError", 1, True),
    ("json", "JSONDecodeError", 1, False),  # a file attnflow wrote that no longer parses
    ("builtins", "FileNotFoundError", 2, False),
    ("builtins", "NotADirectoryError", 2, False),  # a path under a file
    ("builtins", "IsADirectoryError", 2, False),
    ("builtins", "FileExistsError", 2, False),  # a directory asked for where a file is
    ("builtins", "OSError", 1, False),
    ("builtins", "ValueError", 2, True),  # a library's check of its arguments (commands may opt out)
    ("builtins", "Exception", 1, False),
)


def for_cli(message: str) -> str:
    """A library message with its Python arguments replaced by the flags of the command line.

    >>> for_cli("choose another out_dir or pass resume=False to overwrite it")
    'choose another --out or pass --no-resume to overwrite it'
    """
    for python, flag in CLI_PHRASES:
        message = message.replace(python, flag)
    return message


def _classes() -> Iterator[tuple[type, int, bool]]:
    for module, name, code, own in EXIT_CODES:
        mod = sys.modules.get(module)
        if mod is None and module == "builtins":
            mod = importlib.import_module(module)
        cls = getattr(mod, name, None) if mod is not None else None
        if isinstance(cls, type):
            yield cls, code, own


def _entry(exc: BaseException, values_are_input: bool) -> tuple[int, bool]:
    for cls, code, own in _classes():
        if cls is ValueError and not values_are_input:
            continue
        if isinstance(exc, cls):
            return (getattr(exc, "code", 2) if code == -1 else code), own
    return 1, False


def exit_code(exc: BaseException, *, values_are_input: bool = True) -> int:
    """The exit status of ``exc`` (:data:`EXIT_CODES`)."""
    return _entry(exc, values_are_input)[0]


def _cap(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def message_of(exc: BaseException, action: str, *, values_are_input: bool = True) -> str:
    """The text after ``error:`` for ``exc`` raised while doing ``action`` (one line, or a config error's
    list of problems), in the command line's words, at most :data:`MAX_ERROR_CHARS` characters."""
    _, own = _entry(exc, values_are_input)
    if isinstance(exc, KeyboardInterrupt):
        text = str(exc).strip() or "interrupted (Ctrl-C)"
        if "rerun" not in text:
            text += "; rerun the same command to resume"
    elif own:
        text = str(exc)
    elif isinstance(exc, OSError) and exc.errno is None:  # raised by attnflow with its own message
        text = str(exc)
    elif isinstance(exc, OSError):
        what = exc.strerror or str(exc)
        where = f": {exc.filename}" if exc.filename else ""
        text = f"{action}: {what}{where}"
    else:
        text = f"{action}: {type(exc).__name__}: {' '.join(str(exc).split())}"
    # no line after the first may itself read as an error line
    lines = [
        ln if i == 0 or not ln.lower().startswith("error:") else "  " + ln
        for i, ln in enumerate(text.splitlines())
    ]
    return _cap(for_cli("\n".join(lines) or type(exc).__name__))


def fail(message: str, code: int = 2) -> CliError:
    """A refusal to raise from a command: ``raise fail("--out x: ...", 2)``."""
    return CliError(message, code)


_PASS_THROUGH = (typer.Exit, typer.Abort, click.exceptions.Exit, click.exceptions.Abort, click.ClickException)


@contextlib.contextmanager
def reported(
    action: str,
    *,
    values_are_input: bool = True,
    note: Callable[[BaseException], str] | None = None,
) -> Iterator[None]:
    """Run a command's body: any exception becomes one ``error:`` line and its exit status.

    Parameters
    ----------
    action : str
        What the command was doing, for messages that do not say it themselves ("the run runs/x failed").
    values_are_input : bool
        Whether a ``ValueError`` is a bad input (exit 2, its message as it is) or, inside a run that
        started, an unexpected failure (exit 1, after ``action``).
    note : callable, optional
        Text appended to the message of an unexpected failure (exit 1), e.g. where its traceback is kept.
    """
    try:
        yield
    except _PASS_THROUGH:
        raise
    except BaseException as exc:  # noqa: BLE001 - the CLI prints no traceback; the library keeps the details
        if isinstance(exc, (SystemExit, GeneratorExit)):
            raise
        code = exit_code(exc, values_are_input=values_are_input)
        text = message_of(exc, action, values_are_input=values_are_input)
        if note is not None and code == 1 and not isinstance(exc, CliError):
            extra = note(exc)
            text = _cap(f"{text}{extra}") if extra else text
        typer.echo(f"error: {text}", err=True)
        raise typer.Exit(code) from None
