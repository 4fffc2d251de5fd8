"""Errors of experiment configs: :class:`ConfigError` and its messages.

Every message names the dotted key, the value received and the allowed values, and suggests the
closest known key or value for a misspelt one::

    unknown key 'sigma' in weights; did you mean 'sigma2'?
    model.attention: got 'softmx'; allowed values: 'softmax', 'usa', ...; did you mean 'softmax'?

The functions here know nothing of the schema itself: they read the pydantic models they are given
(:mod:`attnflow.experiments.schema` passes its root model and its tagged unions).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any, get_args

from pydantic import BaseModel

__all__ = [
    "ROOT",
    "ConfigError",
    "Unions",
    "format_choices",
    "format_error",
    "invalid_config",
    "union_tags",
    "unknown_keys",
]

#: How the messages call the top level of a config.
ROOT = "the config"

#: Tagged unions of the root model: section -> (tag key, the section models). A section model's tag
#: field is a one-value ``Literal`` (``process: Literal["constant"]``).
Unions = Mapping[str, tuple[str, tuple[type[BaseModel], ...]]]


class ConfigError(ValueError):
    """An experiment config is invalid; the message names the key, the value and the fix."""


def format_choices(allowed: Iterable[Any]) -> str:
    """``'a', 'b' or 'c'``: allowed values as pydantic writes those of a ``Literal``."""
    items = [repr(a) for a in allowed]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _suggest(value: Any, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(value), list(candidates), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def union_tags(unions: Unions, section: str) -> dict[str, type[BaseModel]]:
    """Tag value -> section model of one tagged union."""
    tag, classes = unions[section]
    return {get_args(c.model_fields[tag].annotation)[0]: c for c in classes}


def _section_class(model_cls: type[BaseModel], name: str) -> type[BaseModel] | None:
    ann = model_cls.model_fields[name].annotation
    for cand in (ann, *get_args(ann)):
        if isinstance(cand, type) and issubclass(cand, BaseModel):
            return cand
    return None


def unknown_keys(
    data: dict, model_cls: type[BaseModel], unions: Unions | None = None, where: str = ROOT
) -> list[str]:
    """One message per unknown key, with a difflib suggestion, recursing into sections.

    Run before pydantic, so that a misspelt key is reported as such (and not as a missing one).
    ``unions`` are the tagged unions of ``model_cls``: their keys are checked against the section
    model that the tag selects.
    """
    errors: list[str] = []
    allowed = list(model_cls.model_fields)
    for key, value in data.items():
        if key not in allowed:
            hint = _suggest(key, allowed) or f"; allowed keys: {', '.join(allowed)}"
            errors.append(f"unknown key {key!r} in {where}{hint}")
            continue
        if not isinstance(value, dict):
            continue
        sub_where = key if where == ROOT else f"{where}.{key}"
        if unions and key in unions:
            tag = unions[key][0]
            cls = union_tags(unions, key).get(value.get(tag))
            if cls is None:
                continue  # the tag itself is wrong or missing: pydantic reports it
            allowed_here = list(cls.model_fields)
            for sub in value:
                if sub not in allowed_here:
                    errors.append(
                        f"unknown key {sub!r} in {sub_where}{_suggest(sub, allowed_here)} (allowed keys for "
                        f"{tag} {value.get(tag)!r}: {', '.join(allowed_here)})"
                    )
            continue
        sub_cls = _section_class(model_cls, key)
        if sub_cls is not None:
            errors.extend(unknown_keys(value, sub_cls, None, sub_where))
    return errors


def format_error(err: dict, unions: Unions, tags: Mapping[str, Any]) -> str:
    """One line of a pydantic error (``ValidationError.errors()`` item) naming the dotted key.

    ``tags`` are the tag values the data gave for each union (they appear in pydantic's locations).
    """
    loc = [str(p) for p in err["loc"]]
    # discriminated unions insert the tag value into the location: drop it
    if len(loc) >= 2 and loc[0] in unions and loc[1] == tags.get(loc[0]):
        loc = [loc[0], *loc[2:]]
    key = ".".join(loc) or ROOT
    typ, value = err["type"], err.get("input")
    if typ == "missing":
        return f"missing required key {key!r}"
    if typ in ("union_tag_invalid", "union_tag_not_found"):
        section = loc[0]
        tag = unions[section][0]
        allowed = list(union_tags(unions, section))
        if typ == "union_tag_not_found":
            return f"missing required key '{section}.{tag}'; allowed values: {', '.join(map(repr, allowed))}"
        got = value.get(tag) if isinstance(value, dict) else value
        hint = _suggest(got, allowed)
        return f"{section}.{tag}: got {got!r}; allowed values: {', '.join(map(repr, allowed))}{hint}"
    if typ == "literal_error":
        allowed = (err.get("ctx") or {}).get("expected", "")
        hint = _suggest(value, re.findall(r"'([^']*)'", allowed))
        return f"{key}: got {value!r}; allowed values: {allowed}{hint}"
    if typ == "extra_forbidden":
        return f"unknown key {loc[-1]!r} in {'.'.join(loc[:-1]) or ROOT}"
    msg = err["msg"].replace("Input should be", "must be")
    if typ == "value_error":
        msg = msg.removeprefix("Value error, ")
        return msg if key == ROOT or msg.startswith(key) else f"{key}: {msg}"
    return f"{key} {msg}: got {value!r} ({type(value).__name__})"


def invalid_config(source: str, errors: Iterable[str]) -> ConfigError:
    """The ConfigError listing every problem of a config, one per line."""
    lines = "\n  ".join(errors)
    return ConfigError(f"invalid experiment config ({source}):\n  {lines}")
