"""The workload from layers: the fields (`WorkloadSpec`), then the measured window, which
belongs to its layer's duration, then the replay rules' own checks (`replay.workload`)."""

from __future__ import annotations

from replay.runspec.fields import WorkloadSpec
from replay.runspec.resolve import FLAGS, Layer, SpecError, build, merged, name_of
from replay.windows import WindowError, resolve_window_min
from replay.workload import WorkloadError

EMBEDDED = "the embedded default: configs/workloads/default.yaml"
# WorkloadConfig's fields by the spec's (seconds there, minutes here).
_SPEC_FIELD = {"duration_s": "duration_min"}


def _window(layers: list[Layer], minutes: float) -> tuple[tuple[float, float], str]:
    """The measured window (minutes): the first layer's that names one; the embedded
    default's only with its own duration; else the last two thirds of the run."""
    text, flag = None, "--window"
    for layer in layers:
        given = layer.values.get("window")
        if given is None:
            continue
        own = layer.values.get("duration_min")
        if layer.where == EMBEDDED and own != minutes:
            continue  # the default's window belongs to its duration
        text = given
        flag = "--window" if layer.where == FLAGS else layer.where
        if layer.where not in (FLAGS, EMBEDDED):
            flag = f"{layer.where}: field 'window'"
        break
    try:
        lo, hi, used = resolve_window_min(text, minutes, flag)
    except WindowError as e:
        raise SpecError(str(e)) from None
    return (lo, hi), used


def workload(layers: list[Layer], clamp_warmup: bool = False) -> tuple[WorkloadSpec, str]:
    """The workload from the layers, and the line saying which window it measures; the
    replay rules' cross-field checks (`WorkloadConfig`) name the field's flag or layer.
    `clamp_warmup`: see `WorkloadSpec.config`."""
    _, source = merged(layers)
    spec = build(
        WorkloadSpec,
        [Layer(x.where, {k: v for k, v in x.values.items() if k != "window"}) for x in layers],
    )
    win, used = _window(layers, spec.duration_min)
    spec = spec.model_copy(update={"window": win})
    try:
        spec.config(clamp_warmup=clamp_warmup)
    except WorkloadError as e:
        key = _SPEC_FIELD.get(e.field or "", e.field)
        name = name_of(WorkloadSpec, key, source.get(key, FLAGS)) if key else None
        raise SpecError(f"{e} (check {name or '--sessions, --duration-min, --window'})") from None
    return spec, used


__all__ = ["EMBEDDED", "workload"]
