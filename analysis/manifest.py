"""The manifest keys analysis reads, in one place, with their fallbacks.

Executors (live client, emulator, simulator) write `manifest.json`; analysis reads only these
keys, so this module is the contract between them:

- ``config.window``: ``[start_s, end_s]``, the measured window in seconds from run start
  (also accepted: top-level ``window``, or ``config.window_s``). Missing: the whole run.
- ``config.sessions``: the number of concurrent sessions (also top-level ``sessions``).
  Missing: the number of distinct session slots in the records.
- ``config.seed`` (or top-level ``seed``).
- ``engines``: a list of ``{name, kind, url, model, gpus, gpu_type, server_version, flags}``;
  ``gpus`` defaults to 1 (with a note) when an engine is missing or has no ``gpus``.
- ``trace``: ``{path, sha256}`` (also top-level ``trace_path`` / ``trace_sha256``).
- ``harness_version``, ``run_id``, ``status``, ``command``, ``start``, ``end``.
- ``config.token_scale``: the trace's token lengths were divided by this (the bundled sample
  replayed against emulators scaled alike); token throughputs are multiplied by it. Default 1.
- ``events``: ``[{event: "engine_down", engine, start_s, end_s, detail}]`` (live runs);
  ``emulator_restarts``: ``{engine: count}``; ``notes``: lines the writer left. All become
  notes of the run (`manifest_notes`).
- ``working_set_ratio``: a number, or ``{engine: number}`` (also under ``config``); the
  simulator's working set divided by cache capacity. A per-engine value in ``summary.json``
  (``engines.<name>.working_set_ratio``) takes precedence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Window:
    """A measured window in seconds from run start; `source` says where it came from."""

    start_s: float
    end_s: float
    source: str = "argument"

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def as_list(self) -> list[float]:
        return [self.start_s, self.end_s]


@dataclass(frozen=True)
class EngineInfo:
    """One engine as the manifest describes it."""

    name: str
    gpus: int = 1
    gpu_type: str | None = None
    kind: str | None = None
    model: str | None = None
    url: str | None = None
    server_version: str | None = None
    flags: list[str] = field(default_factory=list)
    gpus_assumed: bool = False  # True when the manifest did not say; gpus defaulted to 1


def _config(manifest: dict[str, Any]) -> dict[str, Any]:
    cfg = manifest.get("config")
    return cfg if isinstance(cfg, dict) else {}


def _lookup(manifest: dict[str, Any], *names: str) -> Any:
    """The first of `names` found in `config`, then at the top level."""
    cfg = _config(manifest)
    for name in names:
        if name in cfg and cfg[name] is not None:
            return cfg[name]
    for name in names:
        if name in manifest and manifest[name] is not None:
            return manifest[name]
    return None


def parse_window(value: Any, where: str) -> Window:
    """A window from `[a, b]`, `(a, b)` or "A-B" (seconds); ValueError names `where`."""
    pair: Any = value
    if isinstance(value, str):
        pair = value.replace(",", "-").split("-")
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        raise ValueError(f"{where}: a window is [start_s, end_s], got {value!r}")
    try:
        start, end = float(pair[0]), float(pair[1])
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: window bounds must be numbers, got {value!r}") from e
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start or start < 0:
        raise ValueError(f"{where}: window must have 0 <= start < end, got {value!r}")
    return Window(start, end, where)


def manifest_window(manifest: dict[str, Any]) -> Window | None:
    """The manifest's measured window, or None when it has none. ValueError if malformed."""
    cfg = _config(manifest)
    for where, value in (
        ("manifest config.window", cfg.get("window")),
        ("manifest config.window_s", cfg.get("window_s")),
        ("manifest window", manifest.get("window")),
    ):
        if value is not None:
            return parse_window(value, where)
    return None


def manifest_notes(manifest: dict[str, Any]) -> list[str]:
    """What the writer recorded about faults: engines down, emulators restarted, notes."""
    notes = [str(n) for n in manifest.get("notes") or [] if isinstance(n, str)]
    for ev in manifest.get("events") or []:
        if not isinstance(ev, dict) or ev.get("event") != "engine_down":
            continue
        start, end = ev.get("start_s"), ev.get("end_s")
        until = f"{end:g} s" if isinstance(end, int | float) else "the end of the run"
        since = f"{start:g} s" if isinstance(start, int | float) else "an unrecorded time"
        detail = f" ({ev['detail']})" if ev.get("detail") else ""
        notes.append(f"{ev.get('engine')}: engine down from {since} to {until}{detail}")
    restarts = manifest.get("emulator_restarts")
    if isinstance(restarts, dict):
        for name, count in restarts.items():
            notes.append(
                f"{name}: the emulator died and the harness restarted it {count} time(s), "
                "with an empty cache"
            )
    return notes


def manifest_sessions(manifest: dict[str, Any]) -> int | None:
    value = _lookup(manifest, "sessions")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def manifest_token_scale(manifest: dict[str, Any]) -> float:
    """``config.token_scale``: the replayed trace's token lengths were divided by this (≥ 1);
    1 when absent or unusable."""
    value = _lookup(manifest, "token_scale")
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 1:
        return 1.0
    return float(value)


def manifest_seed(manifest: dict[str, Any]) -> int | None:
    value = _lookup(manifest, "seed")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def manifest_engines(manifest: dict[str, Any]) -> dict[str, EngineInfo]:
    """Engines by name. Entries may be dicts with `name`, or plain names."""
    raw = manifest.get("engines")
    out: dict[str, EngineInfo] = {}
    if not isinstance(raw, list):
        return out
    for item in raw:
        if isinstance(item, str):
            out[item] = EngineInfo(name=item, gpus_assumed=True)
            continue
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        gpus = item.get("gpus")
        ok = isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0
        count = gpus if ok and isinstance(gpus, int) else 1
        flags = item.get("flags") or item.get("server_flags") or []
        if isinstance(flags, str):
            flags = flags.split()
        elif isinstance(flags, dict):  # the simulator's policy options
            flags = [f"{k}={v}" for k, v in sorted(flags.items())]
        out[item["name"]] = EngineInfo(
            name=item["name"],
            gpus=count,
            gpu_type=_str(item.get("gpu_type")),
            kind=_str(item.get("kind")),
            model=_str(item.get("model")),
            url=_str(item.get("url")),
            server_version=_str(item.get("server_version")),
            flags=[str(f) for f in flags] if isinstance(flags, list) else [],
            gpus_assumed=not ok,
        )
    return out


def manifest_trace(manifest: dict[str, Any]) -> tuple[str | None, str | None]:
    """(trace path or id, sha256)."""
    trace = manifest.get("trace")
    if isinstance(trace, dict):
        return _str(trace.get("path") or trace.get("source")), _str(trace.get("sha256"))
    if isinstance(trace, str):
        return trace, _str(manifest.get("trace_sha256"))
    return _str(manifest.get("trace_path")), _str(manifest.get("trace_sha256"))


def manifest_working_set_ratio(manifest: dict[str, Any], engine: str) -> float | None:
    value = _lookup(manifest, "working_set_ratio")
    if isinstance(value, dict):
        value = value.get(engine)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


__all__ = [
    "EngineInfo",
    "Window",
    "manifest_engines",
    "manifest_seed",
    "manifest_sessions",
    "manifest_trace",
    "manifest_window",
    "manifest_working_set_ratio",
    "parse_window",
]
