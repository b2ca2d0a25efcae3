"""The one layered resolution: flags over a config file over the command's base layer.

A layer is a `Layer(where, values)`: `where` says how a refused value is named (`flag`: by
the field's own flag; anything else: `<where>: field '<key>'`). The first layer that gives a
key wins. A refused value is named from pydantic's error location: the field it refused, and
the layer that gave it, never from the message's text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from replay.runspec.fields import INT64_MAX, MAX_DURATION_MIN, MAX_REPLICAS, flag_of

FLAGS = "flag"  # the layer of the command line's flags

M = TypeVar("M", bound=BaseModel)


class SpecError(ValueError):
    """A refused setting; the message names its flag, or its file and field."""


@dataclass(frozen=True)
class Layer:
    where: str  # FLAGS, or e.g. "--config run.yaml", "configs/workloads/default.yaml"
    values: dict[str, Any] = field(default_factory=dict)


def merged(layers: list[Layer]) -> tuple[dict[str, Any], dict[str, str]]:
    """The first value given for each key (None: not given), and the layer it came from."""
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for layer in layers:
        for key, value in layer.values.items():
            if value is not None and key not in values:
                values[key] = value
                source[key] = layer.where
    return values, source


def name_of(model: type[BaseModel], key: str, where: str) -> str:
    """How a setting is named: its flag when the flag gave it, else its file and field."""
    info = model.model_fields.get(key)
    flag = flag_of(info) if info is not None else None
    if where == FLAGS:
        return flag or f"--{key.replace('_', '-')}"
    return f"{where}: field '{key}'"


def _need(err: Any) -> str:
    """What the value must be, from the error's type (pydantic's own words otherwise)."""
    ctx = err.get("ctx") or {}
    kind = err["type"]
    if kind == "greater_than_equal":
        return (
            "must be at least 1"
            if ctx.get("ge") == 1
            else f"must be {_shown(ctx.get('ge'))} or more"
        )
    if kind == "greater_than":
        return (
            "must be positive"
            if ctx.get("gt") == 0
            else f"must be more than {_shown(ctx.get('gt'))}"
        )
    if kind == "less_than_equal":
        why = _LIMITS.get(ctx.get("le"), "")
        return f"must be at most {_shown(ctx.get('le'))}{why}"
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    return str(err["msg"]).removeprefix("Value error, ")


# Why an upper bound is what it is (replay.runspec.fields), said after it.
_LIMITS: dict[object, str] = {
    INT64_MAX: " (2^63 - 1: a run's files hold 64-bit whole numbers)",
    MAX_DURATION_MIN: " (a year of the trace's clock)",
    MAX_REPLICAS: " replicas (the most one engine's fleet may have)",
}


def _shown(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:g}"
    return str(value)


def refusal(e: ValidationError, model: type[BaseModel], source: dict[str, str]) -> str:
    """`--sessions -3: must be at least 1` for the first error (its field's flag, or
    `--config FILE: field 'sessions'` when the file gave it)."""
    err = e.errors()[0]
    key = str(err["loc"][0]) if err["loc"] else ""
    name = name_of(model, key, source.get(key, FLAGS))
    value = err.get("input")
    return f"{name} {_shown(value)}: {_need(err)}"


def build(model: type[M], layers: list[Layer]) -> M:
    """`model` from the layers; SpecError names the refused value's flag or field."""
    values, source = merged(layers)
    try:
        return model.model_validate(values)
    except ValidationError as e:
        raise SpecError(refusal(e, model, source)) from None


__all__ = ["FLAGS", "Layer", "SpecError", "build", "merged", "name_of", "refusal"]
