"""The workload from layers: the fields (`WorkloadSpec`), then the measured window, which
belongs to its layer's duration, then the replay rules' own checks (`replay.workload`)."""

from __future__ import annotations

from replay.presets import PresetError, get_preset
from replay.runspec.fields import WorkloadSpec
from replay.runspec.resolve import FLAGS, Layer, SpecError, build, merged, name_of
from replay.windows import WindowError, resolve_window_min
from replay.workload import WorkloadError

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
    the field's flag or layer. `clamp_warmup`: see `WorkloadSpec.config`. A preset's layer
    goes in first (`with_preset`)."""
    layers = with_preset(layers)
    _, source = merged(layers)
    rest = [Layer(x.where, {k: v for k, v in x.values.items() if k != "window"}) for x in layers]
    spec = build(WorkloadSpec, rest)
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
    try:
        spec.config(clamp_warmup=clamp_warmup)
    except WorkloadError as e:
        key = _SPEC_FIELD.get(e.field or "", e.field)
        name = name_of(WorkloadSpec, key, source.get(key, FLAGS)) if key else None
        raise SpecError(f"{e} (check {name or '--sessions, --duration-min, --window'})") from None
    return spec, used


__all__ = ["EMBEDDED", "PRESET", "with_preset", "workload"]
