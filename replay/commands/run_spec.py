"""`replay run`'s spec from its flags, before anything starts: a resumed run's (its
manifest's, with the flags that may change; a new run's is `replay.runspec.live.resolve_new`,
which the command calls itself), its fleet and process flags, and the engine logs it was
given. Each refusal fails naming the flag or the file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from replay.commands.common import err_console, fail

if TYPE_CHECKING:
    from replay.runspec.live import Resolved, RunFlags
    from replay.runspec.model import RunSpec


def resumed(flags: RunFlags) -> Resolved:
    """The stored spec of the run to resume, plus the flags that may change (engine URLs,
    limits, SLO)."""
    from replay.rundir import RunDirError, read_manifest, schema_note
    from replay.rundir_models import MANIFEST_SCHEMA_VERSION
    from replay.runspec import live
    from replay.runspec.live import Resolved
    from replay.runspec.model import RunSpec

    run_dir = flags.resume
    assert run_dir is not None
    try:
        man = read_manifest(run_dir)
    except RunDirError as e:
        fail(f"--resume: {e}")
    if note := schema_note(run_dir / "manifest.json", man.schema_version, MANIFEST_SCHEMA_VERSION):
        err_console.print(f"[bold yellow]warning:[/] {escape(note)}", highlight=False)
    if man.executor == "simulator":  # its spec is a simulated point's, not a live run's
        fail(
            f"--resume {run_dir}: a simulated run (replay simulate), not a live one; run its "
            f"sweep again with a new --out: {man.command or 'replay simulate'}"
        )
    if man.status in ("completed", "degraded"):
        how = "completed" if man.status == "completed" else "ended (degraded)"
        fail(f"--resume {run_dir}: that run {how}; nothing to resume")
    if man.spec is None or not man.spec.get("engines"):
        fail(
            f"--resume {run_dir}: manifest.json lacks the run's spec (engines, trace); cannot resume"
        )
    spec = RunSpec.model_validate(man.spec)
    spec = live.resume_limits(live.with_urls(spec, flags.endpoint, run_dir), flags)
    settings = live.embedded_layer()[1] if spec.emulated else None
    return Resolved(spec, [], settings, spec.workload.time_scale)


def check_fleet(spec: RunSpec, flags: RunFlags, fleet: dict[str, Any]) -> None:
    """The checks on the fleet and process flags besides their fields' (the command applies
    them: `replay.runspec.fleet.apply_fleet_flags`): a resumed run keeps its own, so
    --resume refuses them; a new run's processes fit here and its --ray answers."""
    if flags.resume is not None:
        named = [f"--{f}" for f, v in fleet.items() if v is not None]
        if named:
            fail(
                f"--resume continues {flags.resume} with its own replicas, router and client "
                f"workers; drop {', '.join(named)}"
            )
        return
    _check_processes(spec)
    if spec.ray is not None:
        _check_ray(spec.ray)


def check_capacity(spec: RunSpec, flags: RunFlags) -> None:
    """--capacity-blocks sizes each emulated engine's cache as asked, and --host-memory-gb
    gives it a host tier (the emulator's own check, `make_cache`, as `replay simulate`
    checks them), before any emulator starts."""
    from replay.emulator.config import EmulatorConfigError, make_cache
    from replay.runspec.live import emulator_of
    from replay.sim.cache.tiers import TierError

    flag = flags.capacity_blocks
    for e in spec.engines if flag is not None or flags.host_memory_gb else []:
        try:
            cfg = emulator_of(e, spec.workload)
            make_cache(cfg, cfg.resolved_profile())
        except TierError as err:  # it names its flag
            fail(f"{err} (engine {e.name})")
        except (EmulatorConfigError, ValueError) as err:
            fail(f"--capacity-blocks {flag}: engine {e.name}: {err}")


def _check_ray(address: str) -> None:
    """--ray answers within seconds, as `replay simulate` checks it: `replay run --ray
    127.0.0.1:1` used to wait 330 s on Ray's own retries (issue 36)."""
    from replay.commands.scale_guard import RayAddressError, check_ray_address

    try:
        check_ray_address(address)
    except RayAddressError as e:
        fail(str(e))


def _check_processes(spec: RunSpec) -> None:
    """The emulators (engines × --replicas) and client workers the run starts here fit in
    the machine's memory (a Ray cluster's workers run on its machines), before any starts:
    `--replicas 100000` used to spawn emulators until memory ran out, `--workers 100000`
    workers until the run was OOM-killed (issue 36)."""
    from replay.commands.scale_guard import ScaleError, check_live_processes

    emulators = sum(e.replicas for e in spec.engines) if spec.emulated else 0
    workers = spec.workers if spec.ray in (None, "local") else 1
    try:
        check_live_processes(len(spec.engines), emulators, workers)
    except ScaleError as e:
        fail(str(e))


def engine_logs(given: list[str], spec: RunSpec) -> dict[str, Path]:
    """--engine-log NAME=PATH, each naming an engine of the run and a file that exists."""
    names = [e.name for e in spec.engines]
    out: dict[str, Path] = {}
    for item in given:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            fail(f"--engine-log {item!r}: expected NAME=PATH (e.g. vllm=runs/engines/vllm.log)")
        if name not in names:
            fail(f"--engine-log {item!r}: no engine {name!r} in this run (its engines: "
                 f"{', '.join(names)})")  # fmt: skip
        if not Path(path).is_file():
            fail(f"--engine-log {item!r}: {path} is not a file (the log `replay engines "
                 "launch` printed, or the server's own)")  # fmt: skip
        out[name] = Path(path)
    return out


__all__ = ["check_capacity", "check_fleet", "engine_logs", "resumed"]
