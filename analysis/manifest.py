"""The manifest as analysis reads it: windows, engines, notes, scales, from the typed model.

Executors (live client, emulator, simulator) write `manifest.json` through
`replay.rundir_models.Manifest`, and `replay.rundir.read_manifest` validates it (older shapes
normalised there), so the accessors here read typed fields, without fallbacks:

- ``config.window``: the measured window in seconds from run start. Missing: the whole run.
- ``config.sessions``: concurrent sessions. Missing: the session slots in the records.
- ``config.seed`` (or the top-level ``seed``).
- ``engines``: ``gpus`` defaults to 1 (with a note) when missing; ``replicas`` to 1.
- ``spec.engines[].host_memory_gb`` / ``external_memory_gb``: an engine's cache tiers
  (issue 34), which its provider cost counts (`analysis.economics`). Missing: none.
- ``trace``: path and sha256.
- ``config.token_scale``: the trace's token lengths were divided by this; token throughputs
  are multiplied by it. Default 1.
- ``events``, ``emulator_restarts``, ``notes``: notes of the run (`manifest_notes`), and the
  workload preset its ``spec`` names (``spec.workload.preset``, `replay.presets`).
- ``workload.working_set_ratio`` (the simulator's) or ``config.working_set_ratio`` (a number
  or per engine): working set ÷ cache capacity. A per-engine value in ``summary.json``
  (``engines.<name>.working_set_ratio``) takes precedence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replay.rundir_models import Manifest


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
    replicas: int = 1  # replicas behind the engine (`gpus` counts all of them)
    # The cache tiers its spec gave it (issue 34), GiB per replica; 0: none.
    host_memory_gb: float = 0.0
    external_memory_gb: float = 0.0


def manifest_window(manifest: Manifest) -> Window | None:
    """The manifest's measured window (validated on read), or None when it has none."""
    win = manifest.config.window
    return None if win is None else Window(win[0], win[1], "manifest config.window")


def manifest_notes(manifest: Manifest) -> list[str]:
    """What the writer recorded about faults: engines down, emulators restarted, notes."""
    notes = list(manifest.notes)
    for ev in manifest.events:
        if ev.event != "engine_down":
            continue
        until = f"{ev.end_s:g} s" if ev.end_s is not None else "the end of the run"
        since = f"{ev.start_s:g} s" if ev.start_s is not None else "an unrecorded time"
        detail = f" ({ev.detail})" if ev.detail else ""
        if ev.engine_error:
            detail += f"; its log's last error: {ev.engine_error}"
        notes.append(f"{ev.engine}: engine down from {since} to {until}{detail}")
    for name, count in manifest.emulator_restarts.items():
        notes.append(
            f"{name}: the emulator died and the harness restarted it {count} time(s), "
            "with an empty cache"
        )
    return notes + _preset_notes(manifest)


def _preset_notes(manifest: Manifest) -> list[str]:
    """The workload preset the run's spec records (`--preset`): which rules it used and which
    of the peer's it does not apply (`replay.presets`)."""
    from replay.presets import preset_notes

    workload = (manifest.spec or {}).get("workload") or {}
    name = workload.get("preset") if isinstance(workload, dict) else None
    if not isinstance(name, str):
        return []
    minutes = workload.get("duration_min")
    return preset_notes(name, float(minutes) if isinstance(minutes, int | float) else None)


def manifest_sessions(manifest: Manifest) -> int | None:
    return manifest.config.sessions


def manifest_token_scale(manifest: Manifest) -> float:
    """``config.token_scale``: the replayed trace's token lengths were divided by this (≥ 1);
    1 when absent or unusable."""
    value = manifest.config.token_scale
    return float(value) if value is not None and value >= 1 else 1.0


def manifest_seed(manifest: Manifest) -> int | None:
    return manifest.config.seed if manifest.config.seed is not None else manifest.seed


def _tier_sizes(manifest: Manifest) -> dict[str, tuple[float, float]]:
    """Each engine's host-memory and external-store GiB (per replica) as the run's spec
    records them (``spec.engines[].host_memory_gb`` / ``external_memory_gb``, keyed by
    ``engine.name``); an engine whose spec gives none is absent."""
    engines = (manifest.spec or {}).get("engines")
    out: dict[str, tuple[float, float]] = {}
    for e in engines if isinstance(engines, list) else []:
        name = ((e.get("engine") or {}) if isinstance(e, dict) else {}).get("name")
        if not isinstance(name, str):
            continue
        sizes = [e.get(k) for k in ("host_memory_gb", "external_memory_gb")]
        host, ext = (float(v) if isinstance(v, int | float) and v > 0 else 0.0 for v in sizes)
        if host or ext:
            out[name] = (host, ext)
    return out


def manifest_engines(manifest: Manifest) -> dict[str, EngineInfo]:
    """Engines by name, in the manifest's order."""
    tiers = _tier_sizes(manifest)
    return {
        e.name: EngineInfo(
            name=e.name,
            gpus=e.gpus or 1,
            gpu_type=e.gpu_type,
            kind=e.kind,
            model=e.model,
            url=e.url,
            server_version=e.server_version,
            flags=list(e.flags),
            gpus_assumed=e.gpus is None,
            replicas=e.replicas or 1,
            host_memory_gb=tiers.get(e.name, (0.0, 0.0))[0],
            external_memory_gb=tiers.get(e.name, (0.0, 0.0))[1],
        )
        for e in manifest.engines
    }


def manifest_trace(manifest: Manifest) -> tuple[str | None, str | None]:
    """(trace path or id, sha256)."""
    t = manifest.trace
    return (t.path, t.sha256) if t is not None else (None, None)


def manifest_working_set_ratio(manifest: Manifest, engine: str) -> float | None:
    value = manifest.config.working_set_ratio
    if value is None and manifest.workload is not None:
        value = manifest.workload.working_set_ratio
    if isinstance(value, dict):
        value = value.get(engine)
    return None if value is None else float(value)


__all__ = [
    "EngineInfo",
    "Window",
    "manifest_engines",
    "manifest_notes",
    "manifest_seed",
    "manifest_sessions",
    "manifest_token_scale",
    "manifest_trace",
    "manifest_window",
    "manifest_working_set_ratio",
]
