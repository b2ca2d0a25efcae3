"""The one layered resolution: flags over a config file over the command's base layer.

A layer is a `Layer(where, values)`: `where` says how a refused value is named (`flag`: by
the field's own flag; anything else: `<where>: field '<key>'`). The first layer that gives a
key wins. A refused value is named from pydantic's error location: the field it refused, and
the layer that gave it, never from the message's text. Every layer is valid on its own: a
file's value that a flag overrides is checked all the same (`sessions: -3` in a config file
refused under `--sessions 2`, which used to pass in silence), so a file that runs today still
runs when the flag is dropped.

The workload from layers (`workload`): the fields (`WorkloadSpec`), a preset's layer
(`with_preset`), then the measured window, which belongs to its layer's duration, then the
replay rules' own checks (`replay.workload`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from replay.presets import PresetError, get_preset
from replay.runspec.fields import (
    INT64_MAX,
    MAX_DURATION_MIN,
    MAX_REPLICAS,
    WorkloadSpec,
    flag_of,
)
from replay.windows import WindowError, resolve_window_min
from replay.workload import WorkloadError

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
    value = err.get("input")
    if kind != "finite_number" and isinstance(value, float) and math.isnan(value):
        return "must be a number, not NaN"  # what every bound refuses it for
    if kind == "greater_than_equal":
        return (
            "must be at least 1"
            if ctx.get("ge") == 1
            else f"must be {_bound(ctx.get('ge'))} or more"
        )
    if kind == "greater_than":
        return (
            "must be positive"
            if ctx.get("gt") == 0
            else f"must be more than {_bound(ctx.get('gt'))}"
        )
    if kind == "less_than_equal":
        why = _LIMITS.get(ctx.get("le"), "")
        return f"must be at most {_bound(ctx.get('le'))}{why}"
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


def _bound(value: Any) -> str:
    """A field's bound as written on it: a whole one exactly (1048576, not 1.04858e+06)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return _shown(value)


def _shown(value: Any) -> str:
    if isinstance(value, bool):  # as YAML spells it
        return str(value).lower()
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
    """`model` from the layers; SpecError names the refused value's flag or field, the
    values a higher layer overrides included (`check_overridden`)."""
    values, source = merged(layers)
    try:
        built = model.model_validate(values)
    except ValidationError as e:
        raise SpecError(refusal(e, model, source)) from None
    check_overridden(model, layers)
    return built


def check_overridden(model: type[BaseModel], layers: list[Layer]) -> None:
    """SpecError naming the layer and field of a value that a higher layer overrides but its
    field refuses: each layer must be valid on its own (checked with the values in force
    around it, so only its own fields can be refused)."""
    values, source = merged(layers)
    for layer in layers:
        hidden = {
            k: v for k, v in layer.values.items() if v is not None and source.get(k) != layer.where
        }
        if not hidden:
            continue
        try:
            model.model_validate({**values, **hidden})
        except ValidationError as e:
            named = {**source, **dict.fromkeys(hidden, layer.where)}
            raise SpecError(refusal(e, model, named)) from None


# The workload from layers.
EMBEDDED = "the embedded default: configs/workloads/default.yaml"
PRESET = "--preset"
# WorkloadConfig's fields by the spec's (seconds there, minutes here).
_SPEC_FIELD = {"duration_s": "duration_min"}


def _window_layer(layers: list[Layer], minutes: float) -> Layer | None:
    """The layer whose window is measured: the first that names one; the embedded default's
    only with its own duration (its window belongs to it); None: the last two thirds."""
    for layer in layers:
        if layer.values.get("window") is None:
            continue
        if layer.where == EMBEDDED and layer.values.get("duration_min") != minutes:
            continue
        return layer
    return None


def with_preset(layers: list[Layer]) -> list[Layer]:
    """The layers with the preset's (`--preset NAME`, from the flags or a config file) put
    after the user's (flags, config files) and before the command's base layer, so it fills
    in only the fields the user did not give. Its window `None` is the whole run, whatever
    duration the layers settle on."""
    values, _ = merged(layers)
    name = values.get("preset")
    if name is None:
        return layers
    try:
        preset = get_preset(str(name))
    except PresetError as e:
        raise SpecError(str(e)) from None
    user = 0
    while user < len(layers) and (
        layers[user].where == FLAGS or layers[user].where.startswith("--config")
    ):
        user += 1
    given = dict(preset.values)
    if "window" in given and given["window"] is None:
        every, _ = merged([*layers[:user], Layer(PRESET, given), *layers[user:]])
        minutes = every.get("duration_min", WorkloadSpec().duration_min)
        given["window"] = (0.0, float(minutes))
    return [*layers[:user], Layer(f"{PRESET} {preset.name}", given), *layers[user:]]


def workload(layers: list[Layer], clamp_warmup: bool = False) -> tuple[WorkloadSpec, str]:
    """The workload from the layers, and the line saying which window it measures. The
    window is checked on its field (`WorkloadSpec.window`) as given by its one layer, then
    against the run's length; the replay rules' cross-field checks (`WorkloadConfig`) name
    the field's flag or layer. `clamp_warmup`: see `WorkloadSpec.config` (the spec then
    holds the warm-up as cut). A preset's layer goes in first (`with_preset`)."""
    layers = with_preset(layers)
    _, source = merged(layers)
    rest = [Layer(x.where, {k: v for k, v in x.values.items() if k != "window"}) for x in layers]
    spec = build(WorkloadSpec, rest)
    for x in layers:  # each layer's window as written, the one not measured too
        if x.values.get("window") is not None:
            build(WorkloadSpec, [Layer(x.where, {"window": x.values["window"]})])
    chosen = _window_layer(layers, spec.duration_min)
    if chosen is not None:
        spec = build(
            WorkloadSpec, [Layer(chosen.where, {"window": chosen.values["window"]}), *rest]
        )
    flag = "--window"
    if chosen is not None and chosen.where not in (FLAGS, EMBEDDED):
        flag = f"{chosen.where}: field 'window'"
    try:
        lo, hi, used = resolve_window_min(spec.window, spec.duration_min, flag)
    except WindowError as e:
        raise SpecError(str(e)) from None
    spec = spec.model_copy(update={"window": (lo, hi)})
    if spec.duration_min / spec.time_scale > MAX_DURATION_MIN:  # `--time-scale 1e-9`
        scale = name_of(WorkloadSpec, "time_scale", source.get("time_scale", FLAGS))
        raise SpecError(
            f"{scale} {spec.time_scale:g}: a {spec.duration_min:g}-minute run would take "
            f"{spec.duration_min / spec.time_scale:.3g} minutes of wall time, over a year "
            f"({MAX_DURATION_MIN:,.0f} minutes); give at least {spec.duration_min / MAX_DURATION_MIN:.3g}"
        )
    if clamp_warmup and spec.warmup_s > spec.duration_min * 30:
        # The spec holds the warm-up the run replays, not the one asked for (a timed
        # replay's default, 120 s, is cut to half of a short run).
        spec = spec.model_copy(update={"warmup_s": spec.duration_min * 30})
    try:
        spec.config(clamp_warmup=clamp_warmup)
    except WorkloadError as e:
        key = _SPEC_FIELD.get(e.field or "", e.field)
        name = name_of(WorkloadSpec, key, source.get(key, FLAGS)) if key else None
        raise SpecError(f"{e} (check {name or '--sessions, --duration-min, --window'})") from None
    return spec, used


__all__ = [
    "EMBEDDED",
    "FLAGS",
    "PRESET",
    "Layer",
    "SpecError",
    "build",
    "check_overridden",
    "merged",
    "name_of",
    "refusal",
    "with_preset",
    "workload",
]
