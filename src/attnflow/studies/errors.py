"""Errors of the study layer: each names the rule, the value received and the fix."""

from __future__ import annotations

from ..experiments.config import ConfigError

__all__ = [
    "NotAStudyDirectoryError",
    "StudyConfigError",
    "StudyMismatchError",
    "StudyPlanError",
    "StudyResultError",
    "StudyRunError",
    "UnknownStudyError",
]


class StudyConfigError(ConfigError):
    """The parameters of a study break a rule (one line per problem: key, rule, value, fix)."""


class UnknownStudyError(ValueError):
    """No study of that name is registered."""


class StudyMismatchError(ValueError):
    """The output directory holds runs of other configs, so the study cannot resume there."""


class StudyRunError(RuntimeError):
    """Some runs of a study failed; their run directories keep the status and the traceback."""


class NotAStudyDirectoryError(FileNotFoundError):
    """The directory holds no study (no ``study.json``)."""


class StudyPlanError(ValueError):
    """A study's plan declares no task (all the work of a study runs as tasks on the run store)."""


class StudyResultError(ValueError):
    """An analysis returned a result that breaks a rule (a reserved summary key, a wrong type)."""
