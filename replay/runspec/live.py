"""`replay run`'s spec: its engines (flags, a config file or a resumed manifest), its workload
(flags over the config file over the embedded default or the workload config's defaults), its
limits and SLO, resolved once into a `RunSpec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replay.client.config import (
    ConfigError,
    EngineSpec,
    FileConfig,
    engines_from_flags,
    load_config_file,
)
from replay.redact import MASK, redact_url
from replay.runspec.fields import EngineShape
from replay.runspec.model import EngineRun, LimitsSpec, RunSpec, WorkloadSpec
from replay.runspec.resolve import EMBEDDED, FLAGS, Layer, SpecError, build, merged, workload

if TYPE_CHECKING:
    from replay.emulator.config import EmulatorConfig

EMULATED_KINDS = ("vllm", "flashstate", "sglang")


@dataclass
class RunFlags:
    """What `replay run` was given (None: not given)."""

    engines: str | None = None
    endpoint: list[str] = field(default_factory=list)
    config: Path | None = None
    resume: Path | None = None
    workload: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    slo: str | None = None
    out: Path | None = None
    capacity_blocks: int | None = None  # --capacity-blocks: the emulated engines' cache
    # --host-memory-gb, --host-bandwidth-gbs: the emulated engines' host-memory tier
    host_memory_gb: float | None = None
    host_bandwidth_gbs: float | None = None
    # --external-memory-gb, --external-bandwidth-gbs, --external-store: a store behind it
    external_memory_gb: float | None = None
    external_bandwidth_gbs: float | None = None
    external_store: str | None = None

    @property
    def host_tier(self) -> dict[str, Any]:
        return {
            "host_memory_gb": self.host_memory_gb,
            "host_bandwidth_gbs": self.host_bandwidth_gbs,
            "external_memory_gb": self.external_memory_gb,
            "external_bandwidth_gbs": self.external_bandwidth_gbs,
            "external_store": self.external_store,
        }


@dataclass
class Resolved:
    spec: RunSpec
    notes: list[str]  # lines for the user (which window is measured)
    settings: Any = None  # the embedded default's DefaultRun, for emulators
    # The time scale the user chose (a flag or the config file; None: a default), which an
    # engine announcing another clock contradicts.
    user_time_scale: float | None = None


def embedded_layer() -> tuple[Layer, Any]:
    """The embedded default's workload (configs/workloads/default.yaml) as a layer."""
    from replay.emulator.defaults import DefaultRunError, load_default_run

    try:
        d = load_default_run()
    except DefaultRunError as e:
        raise SpecError(str(e)) from None
    values = {
        "sessions": d.sessions,
        "duration_min": d.duration_min,
        "window": d.window,
        "time_scale": d.time_scale,
        "seed": d.seed,
        "warmup_s": d.warmup_s,
        "trace": None if d.trace == "sample" else d.trace,
    }
    return Layer(EMBEDDED, values), d


def _file_layer(cfg: FileConfig | None, path: Path | None) -> Layer:
    if cfg is None:
        return Layer(f"--config {path}")
    return Layer(f"--config {path}", cfg.workload())


def _engines(flags: RunFlags) -> tuple[list[EngineSpec], FileConfig | None]:
    try:
        if flags.config is not None:
            if flags.engines or flags.endpoint:
                raise SpecError("--config lists the engines; drop --engines/--endpoint or the file")
            cfg = load_config_file(flags.config, WorkloadSpec.model_fields)
            return cfg.engines, cfg
        return engines_from_flags(flags.engines, flags.endpoint), None
    except ConfigError as e:
        raise SpecError(str(e)) from None


def is_sample(trace: str | None) -> bool:
    """The run replays the bundled sample trace (no --trace, or the sample's own path)."""
    from replay.traces import sample_path

    return trace is None or Path(trace) == sample_path()


def _capacity(flag: int | None, settings: Any, trace: str | None) -> int | None:
    """An emulated engine's cache size in blocks: --capacity-blocks, else the embedded
    default's `blocks:`, which is the bundled sample's only (None: the profile's)."""
    if flag is not None:
        build(EngineShape, [Layer(FLAGS, {"capacity_blocks": flag})])  # its field's check
        return flag
    blocks = getattr(settings, "blocks", None)
    try:
        return blocks if blocks is not None and is_sample(trace) else None
    except FileNotFoundError as e:
        raise SpecError(f"--trace: {e}") from None


def _host_tier(given: dict[str, Any]) -> dict[str, Any]:
    """An emulated engine's host-memory tier (issue 34) and the external store behind it:
    the flags as `EngineShape` checks them, kept as `replay simulate` keeps them
    (--host-memory-gb 0: none, and no bandwidth without memory; a store without host memory
    is refused, as the tier refuses it)."""
    shape = build(EngineShape, [Layer(FLAGS, given)])
    if shape.external_memory_gb or shape.external_store is not None:
        from replay.sim.cache.tiers import TierError, check_external

        try:
            check_external(
                shape.host_memory_gb or 0.0,
                shape.external_memory_gb or 0.0,
                shape.external_store or "mooncake",
            )
        except TierError as e:
            raise SpecError(str(e)) from None
    if not shape.host_memory_gb:
        return {}
    keep = {"host_memory_gb", "host_bandwidth_gbs"}
    if shape.external_memory_gb:
        keep |= {"external_memory_gb", "external_bandwidth_gbs", "external_store"}
    return shape.model_dump(include=keep, exclude_none=True)


# The engine shape's fields an emulator takes under the same names: its host and store tiers.
_EMULATOR_TIERS = {
    "host_memory_gb",
    "host_bandwidth_gbs",
    "external_memory_gb",
    "external_bandwidth_gbs",
    "external_store",
}


def emulator_of(run: EngineRun, workload: WorkloadSpec) -> EmulatorConfig:
    """The config of the emulator that stands for `run` (an emulated engine of the spec), on
    a free port: its profile, the workload's clocks, its cache size and tiers. The one place
    an engine of the spec becomes an emulator (the run starts it; `check_capacity` checks
    it first). Raises EmulatorConfigError naming the setting's serve-sim flag."""
    from replay.emulator.config import emulator_config

    return emulator_config(
        run.name,
        model=run.profile,
        port=0,
        time_scale=workload.time_scale,
        token_scale=workload.token_scale,
        blocks=run.capacity_blocks,
        **run.model_dump(include=_EMULATOR_TIERS),
    )


def _refuse_host_tier(given: dict[str, Any]) -> None:
    """The host tier's flags with real engines: a server's host tier is its own flags."""
    named = [
        f"--{k.replace('_', '-')} {v:g}" if isinstance(v, float | int) else f"--{k} {v}"
        for k, v in given.items()
        if v is not None
    ]
    if named:
        raise SpecError(
            f"{', '.join(named)}: gives the emulated engines a host-memory tier only (no "
            "--endpoint, or a --config without urls); a real engine's host tier is its own "
            "server's flags (vLLM's KV offloading connector, SGLang's --hicache-size)"
        )


def _engine_runs(
    specs: list[EngineSpec],
    settings: Any,
    capacity: int | None,
    trace: str | None,
    host: dict[str, Any] | None = None,
) -> list[EngineRun]:
    emulated = all(s.url is None for s in specs)
    if not emulated and any(s.url is None for s in specs):
        missing = ", ".join(s.name for s in specs if s.url is None)
        raise SpecError(f"engines {missing} have no url; give every engine a url or none")
    if not emulated:
        if capacity is not None:
            raise SpecError(
                f"--capacity-blocks {capacity}: sizes the cache of emulated engines only (no "
                "--endpoint, or a --config without urls); a real engine's server sizes its own"
            )
        _refuse_host_tier(host or {})
        return [EngineRun(engine=s, executor="live") for s in specs]
    bad = [s.name for s in specs if s.kind not in EMULATED_KINDS]
    if bad:
        raise SpecError(
            f"--engines {', '.join(bad)}: no emulator for that kind; give an --endpoint"
        )
    from replay.profiles import DEFAULT_MODEL

    profile = getattr(settings, "model", None) or DEFAULT_MODEL
    blocks = _capacity(capacity, settings, trace)
    tier = _host_tier(host or {})
    return [
        EngineRun(engine=s, executor="emulated", profile=profile, capacity_blocks=blocks, **tier)
        for s in specs
    ]


def resolve_new(flags: RunFlags) -> Resolved:
    """A new run's spec: its engines, then flags over the config file over the base layer
    (the embedded default without endpoints, else the workload config's defaults)."""
    settings = None
    base = Layer("the workload config")
    if flags.config is None and not flags.endpoint:
        base, settings = embedded_layer()
        if flags.engines is None:
            flags.engines = ",".join(settings.engines)
    specs, file_cfg = _engines(flags)
    layers = [Layer(FLAGS, flags.workload), _file_layer(file_cfg, flags.config), base]
    wl, used = workload(layers, clamp_warmup=True)
    if not all(s.url is None for s in specs):
        settings = None  # real engines: the embedded default's emulators are not started
    limits = build(LimitsSpec, [Layer(FLAGS, flags.limits)])
    from replay.runspec.slo import run_slo

    slo = run_slo(flags.slo, file_cfg.slo if file_cfg else None, flags.config)
    runs = _engine_runs(specs, settings, flags.capacity_blocks, wl.trace, flags.host_tier)
    spec = RunSpec(workload=wl, engines=runs, limits=limits, slo=slo)
    _, source = merged(layers)
    user = wl.time_scale if source.get("time_scale") in (FLAGS, layers[1].where) else None
    notes = [f"measuring {used}"]
    if wl.preset is not None:
        from replay.presets import preset_notes

        notes += preset_notes(wl.preset, wl.duration_min)
    return Resolved(spec, notes, settings, user)


# Flags that shape the workload: a resumed run keeps the ones it was started with.
def refuse_workload_flags(flags: RunFlags, given: dict[str, Any]) -> None:
    """`--resume` with a flag that would change the workload fails naming the flags."""
    changed = [flag for flag, value in given.items() if value is not None and value != []]
    if changed:
        raise SpecError(
            f"--resume continues {flags.resume} with the workload it was started with; drop "
            f"{', '.join(changed)} (to change the workload, start a new run with --out)"
        )


def stored(spec: RunSpec) -> dict[str, Any]:
    """The spec as the manifest keeps it: URLs without their credentials."""
    engines = [
        e.model_copy(
            update={"engine": e.engine.model_copy(update={"url": redact_url(e.engine.url)})}
        )
        for e in spec.engines
    ]
    return spec.model_copy(update={"engines": engines}).model_dump(mode="json", exclude_none=True)


def with_urls(spec: RunSpec, endpoint: list[str], run_dir: Path) -> RunSpec:
    """A resumed spec with `--endpoint NAME=URL` given again (the manifest keeps URLs
    without their credentials); the engines themselves cannot change."""
    names = [e.name for e in spec.engines]
    if endpoint:
        try:
            given = {s.name: s.url for s in engines_from_flags(None, endpoint)}
        except ConfigError as e:
            raise SpecError(str(e)) from None
        if [n for n in given if n not in names] or spec.emulated:
            raise SpecError(
                f"--resume {run_dir}: --endpoint may only give the URL of an engine of that run "
                f"({', '.join(names)}); the engines cannot change on resume"
            )
        spec = spec.model_copy(
            update={
                "engines": [
                    e.model_copy(
                        update={
                            "engine": e.engine.model_copy(
                                update={"url": given.get(e.name, e.engine.url)}
                            )
                        }
                    )
                    for e in spec.engines
                ]
            }
        )
    masked = [e.name for e in spec.engines if e.engine.url and f"{MASK}@" in e.engine.url]
    if masked:
        raise SpecError(
            f"--resume {run_dir}: the manifest keeps the URL of {', '.join(masked)} without its "
            f"credentials; give it again: --endpoint {masked[0]}=URL"
        )
    return spec


def resume_limits(spec: RunSpec, flags: RunFlags) -> RunSpec:
    """The flags a resumed run may change: its limits and SLO (over the stored ones)."""
    limits = build(
        LimitsSpec,
        [Layer(FLAGS, flags.limits), Layer("manifest.json spec", spec.limits.model_dump())],
    )
    update: dict[str, Any] = {"limits": limits}
    if flags.slo is not None:
        from replay.runspec.slo import run_slo

        update["slo"] = run_slo(flags.slo, spec.slo, None)
    return spec.model_copy(update=update)


def token_scale(trace: Any, flag: float | None, settings: Any, emulated: bool) -> float:
    """The trace's token scale (`replay.traces.scale`); the embedded default's config value,
    where it names one, must agree with it like the flag. Real engines replay the prompts as
    they are, so for them an undeclared scale is not guessed (1, recorded as such)."""
    from replay.traces.scale import TraceScaleError, declared_scale, resolve_token_scale

    try:
        if not emulated and flag is None:
            return declared_scale(trace) or 1.0
        conf = getattr(settings, "token_scale", None)
        given, name = flag, "--token-scale"
        if flag is None and conf is not None:
            given, name = conf, "token_scale (configs/workloads/default.yaml)"
        if flag is not None and conf is not None and abs(flag - conf) > 1e-9:
            raise TraceScaleError(
                f"--token-scale {flag:g} contradicts token_scale {conf:g} in "
                "configs/workloads/default.yaml; drop one (the trace's own scale is used)"
            )
        return resolve_token_scale(trace, given, name)
    except TraceScaleError as e:
        raise SpecError(str(e)) from None


def _emulated_engine(run: EngineRun) -> EngineRun:
    """An emulator stands for its profile's engine (GLM-5.3-Flash: 2×B200), so per-GPU
    metrics and prices divide by the profile's GPUs unless the engine's config said
    otherwise. Its block count is kept as resolved (`_capacity`)."""
    from replay.profiles import ProfileError, load_profile

    update: dict[str, Any] = {}
    spec = run.engine
    if spec.gpus == 1 and not spec.gpu_type:
        try:
            profile = load_profile(run.profile or "")
            update["engine"] = spec.model_copy(
                update={"gpus": profile.gpus, "gpu_type": profile.gpu_type}
            )
        except ProfileError:
            pass
    return run.model_copy(update=update)


def finish(res: Resolved, trace: Any, sample: bool, flag_scale: float | None) -> RunSpec:
    """The spec once its trace is loaded: the trace's token scale, and each emulator's GPUs
    (`_emulated_engine`)."""
    spec = res.spec
    emulated = spec.emulated
    settings = res.settings if emulated and sample else None
    scale = token_scale(trace, flag_scale, settings, emulated)
    engines = [_emulated_engine(e) if emulated else e for e in spec.engines]
    wl = spec.workload.model_copy(update={"token_scale": scale})
    return spec.model_copy(update={"workload": wl, "engines": engines, "sample": sample})


__all__ = [
    "EMBEDDED",
    "Resolved",
    "RunFlags",
    "embedded_layer",
    "emulator_of",
    "finish",
    "is_sample",
    "refuse_workload_flags",
    "resolve_new",
    "resume_limits",
    "stored",
    "token_scale",
    "with_urls",
    "workload",
]
