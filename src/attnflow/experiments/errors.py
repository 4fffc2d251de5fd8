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
import reprlib
from collections.abc import Iterable, Mapping
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

__all__ = [
    "validate_mapping",
    "MAX_MESSAGE_CHARS",
    "ROOT",
    "ConfigError",
    "Unions",
    "format_choices",
    "format_error",
    "invalid_config",
    "short_message",
    "short_repr",
    "union_tags",
    "unknown_keys",
]

#: How the messages call the top level of a config.
ROOT = "the config"

#: The longest message of a :class:`ConfigError` (a hostile config cannot make an error of megabytes).
MAX_MESSAGE_CHARS = 2000

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to a few dozen characters (nested containers and long strings elided)."""
    return _REPR.repr(value)


def short_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 60]} ... [{len(text) - limit + 60} more characters cut]"


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
    if not isinstance(value, (str, int, float)) or len(str(value)) > 100:
        return ""
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
            errors.append(f"unknown key {short_repr(key)} in {where}{hint}")
            continue
        if not isinstance(value, dict):
            continue
        sub_where = key if where == ROOT else f"{where}.{key}"
        if unions and key in unions:
            tag = unions[key][0]
            tag_value = value.get(tag)
            cls = union_tags(unions, key).get(tag_value) if isinstance(tag_value, str) else None
            if cls is None:
                continue  # the tag itself is wrong or missing: pydantic reports it
            allowed_here = list(cls.model_fields)
            for sub in value:
                if sub not in allowed_here:
                    errors.append(
                        f"unknown key {short_repr(sub)} in {sub_where}{_suggest(sub, allowed_here)} (allowed "
                        f"keys for {tag} {tag_value!r}: {', '.join(allowed_here)})"
                    )
            continue
        sub_cls = _section_class(model_cls, key)
        if sub_cls is not None:
            errors.extend(unknown_keys(value, sub_cls, None, sub_where))
    return errors


#: pydantic's bound errors: type -> (the ctx key of the bound, the relation in words)
_BOUNDS = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "greater than or equal to"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "less than or equal to"),
}


def format_error(err: dict, unions: Unions, tags: Mapping[str, Any]) -> str:
    """One line of a pydantic error (``ValidationError.errors()`` item) naming the dotted key.

    ``tags`` are the tag values the data gave for each union (they appear in pydantic's locations).
    """
    loc = [str(p)[:60] for p in err["loc"]]
    # discriminated unions insert the tag value into the location: drop it
    if len(loc) >= 2 and loc[0] in unions and loc[1] == str(tags.get(loc[0]))[:60]:
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
        allowed_text = ", ".join(map(repr, allowed))
        return f"{section}.{tag}: got {short_repr(got)}; allowed values: {allowed_text}{hint}"
    if typ == "literal_error":
        allowed = (err.get("ctx") or {}).get("expected", "")
        hint = _suggest(value, re.findall(r"'([^']*)'", allowed))
        return f"{key}: got {short_repr(value)}; allowed values: {allowed}{hint}"
    if typ == "extra_forbidden":
        return f"unknown key {loc[-1]!r} in {'.'.join(loc[:-1]) or ROOT}"
    if typ in _BOUNDS and isinstance((err.get("ctx") or {}).get(_BOUNDS[typ][0]), (int, float)):
        name, relation = _BOUNDS[typ]
        bound = err["ctx"][name]
        text = f"{bound:.6g}"
        text = text if float(text) == bound else repr(bound)  # pydantic writes 1e-150 with 150 zeros
        return f"{key} must be {relation} {text}: got {short_repr(value)} ({type(value).__name__})"
    msg = short_message(err["msg"].replace("Input should be", "must be"), 400)
    if typ == "value_error":
        msg = msg.removeprefix("Value error, ")
        return msg if key == ROOT or msg.startswith(key) else f"{key}: {msg}"
    return f"{key} {msg}: got {short_repr(value)} ({type(value).__name__})"


def invalid_config(source: str, errors: Iterable[str]) -> ConfigError:
    """The ConfigError listing every problem of a config, one per line."""
    lines = "\n  ".join(short_message(e, 500) for e in errors)
    return ConfigError(short_message(f"invalid experiment config ({short_message(source, 200)}):\n  {lines}"))


def validate_mapping(data: Any, model: type[BaseModel], unions: Unions, source: str, what: str, label: str):
    """Validate a config mapping against ``model``: unknown keys first (with the closest valid key), then
    pydantic's rules, every problem reported at once.

    Parameters
    ----------
    data : the parsed YAML (anything: a non-mapping is refused)
    model : the pydantic model of the config
    unions : the tagged sections of ``model`` (:func:`unknown_keys`)
    source : where the config came from, for a non-mapping's message
    what : the kind of config, e.g. ``"experiment config"``
    label : the name :func:`invalid_config` gives the config

    Raises
    ------
    ConfigError
        One line per problem: the key, the rule, the value received.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"invalid {what} ({source}): expected a mapping of keys, got {type(data).__name__}")
    errors = unknown_keys(data, model, unions)
    if not errors:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            tags = {k: data[k].get(tag) for k, (tag, _) in unions.items() if isinstance(data.get(k), dict)}
            for e in exc.errors():
                m = format_error(e, unions, tags)
                if m not in errors:
                    errors.append(m)
    raise invalid_config(label, errors)
