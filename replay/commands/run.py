"""`replay run`: replay the workload against engines side by side, live.

With `--endpoint NAME=URL` (or `--config FILE`) it drives real engines; with engine names and
no endpoint it starts one emulator per engine on loopback (the embedded default). Every
engine is preflighted first; a failing check stops the run before anything is timed. The
settings are resolved once into a `RunSpec` (`replay.runspec.live`), which the manifest keeps
and `--resume` continues.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from replay.band import DEFAULT_SEEDS
from replay.commands import run_options as O
from replay.commands import run_spec
from replay.commands.common import console, err_console, fail
from replay.runspec import flags as F
from replay.runspec.fields import EngineShape

if TYPE_CHECKING:
    from replay.client.orchestrate import RunOutcome, RunPlan
    from replay.commands.run_stop import HardStop
    from replay.runspec.live import Resolved, RunFlags
    from replay.runspec.model import RunSpec

# Everything else is imported where it is used, so that `replay --help` and `replay run
# --help` load neither the client nor the analysis (aiohttp, openai, pandas):
# tests/unit/replay/test_cli.py.


@contextlib.contextmanager
def _emulators(spec: RunSpec) -> Iterator[Any]:
    """The emulators this run owns (an `EmulatorGroup`): restarted when one dies mid-run
    (the manifest notes it), and ended with the harness, even a SIGKILLed one."""
    from replay.emulator.config import EmulatorConfigError
    from replay.emulator.launch import EmulatorLaunchError, start_emulator_group
    from replay.runspec.live import emulator_of

    try:
        from replay.emulator.launch import replica_configs

        configs = [emulator_of(e, spec.workload) for e in spec.engines]
        # --replicas N: N emulators per engine, each answering with its index (issue 26).
        reps = {e.name: e.replicas for e in spec.engines}
        configs = (
            [r for c in configs for r in replica_configs(c, reps[c.engine])]
            if max(reps.values(), default=1) > 1
            else configs
        )
        with start_emulator_group(configs, restart=True) as group:
            yield group
    except (EmulatorConfigError, EmulatorLaunchError, ValueError) as e:
        fail(f"could not start the emulators: {e}")


def _trace_scale(trace: Any, flag: float | None, settings: Any, emulated: bool) -> float:
    """`replay.runspec.live.token_scale`, failing with its message."""
    from replay.runspec import live
    from replay.runspec.resolve import SpecError

    try:
        return live.token_scale(trace, flag, settings, emulated)
    except SpecError as e:
        fail(str(e))


def _print_reports(reports: list[Any], plan: RunPlan) -> None:
    """Preflight's verdicts and warnings; a failed engine whose log the run was given
    (--engine-log) with the log's last error line (a probe may have killed it)."""
    from replay.client.orchestrate import preflight_warnings
    from replay.engines.launch import last_error_line

    for spec, r in zip(plan.engines, reports, strict=True):  # one report per engine
        style = "green" if r.ok else "red"
        err_console.print(f"[{style}]{escape(r.message())}[/]", highlight=False)
        for w in preflight_warnings(r):
            err_console.print(
                f"[bold yellow]warning:[/] {escape(r.url)}: {escape(w)}", highlight=False
            )
        log = plan.engine_logs.get(spec.name) if not r.ok else None
        if log is not None and (line := last_error_line(log)):
            err_console.print(
                f"[red]  its log ({escape(str(log))}) ends with: {escape(line)}[/]",
                highlight=False,
            )


async def _drive(
    plan: RunPlan,
    show_panel: bool,
    user_time_scale: float | None = None,
    hard: HardStop | None = None,
) -> RunOutcome | None:

    from rich.live import Live

    from replay.client.orchestrate import (
        adopt_announced_clock,
        check_engines,
        run_live,
    )
    from replay.client.panel import panel, progress_line
    from replay.commands.run_stop import stop_on_signals
    from replay.redact import redact_url

    stop = stop_on_signals(hard)
    names = ", ".join(f"{e.name} ({e.kind} at {redact_url(e.url)})" for e in plan.engines)
    err_console.print(f"preflight: {escape(names)}", highlight=False)
    reports = await check_engines(plan)
    _print_reports(reports, plan)
    if not all(r.ok for r in reports):
        return None
    plan, adopted = adopt_announced_clock(plan, reports, user_time_scale)  # ScaleConflict
    if adopted:
        err_console.print(f"[yellow]note:[/] {escape(adopted)}", highlight=False)
    if show_panel and console.is_terminal:
        with Live(console=console, refresh_per_second=2, transient=False) as live:

            def tick(stats: Any, elapsed: float, duration: float) -> None:
                live.update(panel(stats, elapsed, duration))

            return await run_live(plan, stop=stop, on_tick=tick, reports=reports)
    last = [0.0]

    def line(stats: Any, elapsed: float, duration: float) -> None:
        if elapsed - last[0] >= 30 or elapsed < 1:
            last[0] = elapsed
            err_console.print(progress_line(stats, elapsed, duration), highlight=False)

    return await run_live(plan, stop=stop, on_tick=line, reports=reports)


def _resolved(flags: RunFlags, given: dict[str, Any], fleet: dict[str, Any]) -> Resolved:
    """The run's spec: new (`live.resolve_new`, then --router, --replicas, --workers, --ray:
    `apply_fleet_flags`) or resumed (`run_spec.resumed`, refusing the workload and fleet
    flags); a refused setting fails naming its flag or field."""
    from replay.runspec import live
    from replay.runspec.fleet import FleetFlagError, apply_fleet_flags
    from replay.runspec.resolve import SpecError

    try:
        if flags.resume is not None:
            live.refuse_workload_flags(flags, given)
            res = run_spec.resumed(flags)
        else:
            res = live.resolve_new(flags)
            res = dataclasses.replace(res, spec=apply_fleet_flags(res.spec, **fleet))
    except (SpecError, FleetFlagError) as e:
        fail(str(e))
    run_spec.check_fleet(res.spec, flags, fleet)
    return res


def _load(res: Resolved, flags: RunFlags) -> tuple[RunSpec, Any, Path]:
    """The trace (checked against the run's size) and the spec finished with it."""
    from replay.commands.scale_guard import ScaleError, check_live_memory, check_prompts
    from replay.rundir import new_run_id
    from replay.runspec import live
    from replay.runspec.resolve import SpecError
    from replay.traces import TraceError, load_trace, sample_path
    from replay.userpaths import PathProblem, check_out_dir

    spec = res.spec
    run_dir = flags.resume or flags.out or Path("runs") / new_run_id()
    try:
        check_out_dir(run_dir, "--resume" if flags.resume is not None else "--out")
    except PathProblem as e:
        fail(str(e))
    if flags.resume is None and (run_dir / "requests.jsonl").exists():
        fail(f"--out {run_dir}: already holds a run; choose a new --out or --resume it")
    trace = spec.workload.trace
    try:
        sample = live.is_sample(trace)
        loaded = load_trace(trace or sample_path())
    except (TraceError, FileNotFoundError) as e:
        fail(f"--trace: {e}")
    try:
        check_prompts(loaded)
        check_live_memory(loaded, spec.workload.sessions, len(spec.engines))
    except ScaleError as e:
        fail(str(e))
    try:
        spec = live.finish(res, loaded, sample, spec.workload.token_scale)
    except SpecError as e:
        fail(str(e))
    run_spec.check_capacity(spec, flags)
    return spec, loaded, run_dir


def _plan(spec: RunSpec, loaded: Any, run_dir: Path, resume: bool) -> RunPlan:
    from analysis.summary import summary_of_dir
    from replay.client.orchestrate import RunPlan
    from replay.engines.adapters import Limits
    from replay.runspec import live
    from replay.runspec.fleet import fleets_of

    w, lim, tokens = spec.workload, spec.limits, spec.workload.token_scale or 1.0
    if tokens != 1.0 and not spec.emulated:
        err_console.print(
            f"[yellow]note:[/] trace {loaded.source} is scaled (token_scale {tokens:g}): "
            "real engines replay its short prompts as they are, so their cache pressure "
            "is not the full-size corpus's"
        )
    if len(loaded.trajectories) < w.sessions:
        err_console.print(
            f"[yellow]note:[/] {w.sessions} sessions but {len(loaded.trajectories)} "
            "trajectories: some trajectories will be replayed again, each time as its own "
            "conversation (the manifest's workload counts them)"
        )
    return RunPlan(
        engines=[e.engine for e in spec.engines], trace=loaded,
        workload=w.config(clamp_warmup=True), out_dir=run_dir, time_scale=w.time_scale,
        clock_scale=w.time_scale if spec.emulated else 1.0,
        command=shlex.join(["replay", *sys.argv[1:]]),
        limits=Limits(stall_timeout_s=lim.stall_timeout_s, request_timeout_s=lim.request_timeout_s),
        retries=lim.retries, resume=resume, trace_token_scale=tokens, emulated=spec.emulated,
        slo=spec.slo, summarize=summary_of_dir, spec=live.stored(spec),
        workers=spec.workers, ray_address=spec.ray, fleets=fleets_of(spec),
    )  # fmt: skip


def _execute(plan: RunPlan, spec: RunSpec, show_panel: bool, user_scale: float | None) -> Any:
    """The run, under its lock, with its emulators; the outcome (None: preflight failed)."""
    import asyncio

    from replay.client.orchestrate import PreflightFailed, ScaleConflict
    from replay.client.pool import WorkerError
    from replay.commands.run_stop import HardStop
    from replay.engines.reset import CacheResetError
    from replay.rundir import DiskFullError, RunDirError, RunLock
    from replay.runspec.fleet import fleets_of

    with contextlib.ExitStack() as stack:
        # One writer per run directory, from before anything starts to the very end.
        try:
            stack.enter_context(RunLock(plan.out_dir))
        except RunDirError as e:
            fail(str(e))
        if spec.emulated:
            group = stack.enter_context(_emulators(spec))
            fleet = group.fleet  # each engine's emulator URLs, one per replica
            plan = dataclasses.replace(
                plan,
                restarts=group.restarts,
                outages=group.outages,
                engines=[s.model_copy(update={"url": fleet[s.name][0]}) for s in plan.engines],
                fleets=fleets_of(spec, fleet),
            )
        hard = HardStop(plan.out_dir)
        stack.callback(hard.disarm)
        for sig in (signal.SIGINT, signal.SIGTERM):  # _drive installs its own
            stack.callback(signal.signal, sig, signal.getsignal(sig))
        try:
            return asyncio.run(_drive(plan, show_panel, user_scale, hard))
        except PreflightFailed as e:
            fail(str(e))
        except ScaleConflict as e:
            fail(f"{e}; nothing was sent")
        except CacheResetError as e:
            fail(f"{e}; no replay request was sent")
        except WorkerError as e:
            fail(f"{e}; nothing was sent")
        except DiskFullError as e:
            fail(f"the run failed: {e}", code=1)
        except RunDirError as e:
            fail(str(e))
        except (asyncio.CancelledError, KeyboardInterrupt):
            err_console.print(
                f"stopped at once; the records flushed so far are in {plan.out_dir} "
                f"(continue with: replay run --resume {plan.out_dir})"
            )
            raise typer.Exit(130) from None


def _band(outcome: RunOutcome | None, spec: RunSpec, loaded: Any, seeds: int) -> Any:
    """The seed band of a finished emulated run's point (`replay.band`), written beside
    it; None where there is none (not emulated, a fleet, --band-seeds 0, not finished)."""
    from replay.band import write_band
    from replay.runspec.sweep import band_configs
    from replay.sim.band import simulate_band
    from replay.sim.measures import UNMEASURED_WHY

    if outcome is None or outcome.status not in ("completed", "degraded"):
        return None
    points = band_configs(spec, seeds)
    if not points:
        return None
    err_console.print(
        f"simulating the seed band: {len(spec.engines)} engines × {seeds} seeds on the same "
        "point, engine timing (--band-seeds 0 skips it)",
        highlight=False,
    )
    try:
        band = simulate_band(loaded, points)
    except KeyboardInterrupt:
        err_console.print(
            f"[yellow]note:[/] seed band interrupted: the run in {outcome.run_dir} is complete; "
            "its table follows without the band",
            highlight=False,
        )
        return None
    if band is None or len(band.seeds) < seeds:
        held = 0 if band is None else len(band.seeds)
        err_console.print(
            f"[yellow]note:[/] the seed band holds {held} of {seeds} seeds: on the others an "
            f"engine measured no request ({UNMEASURED_WHY})"
            + ("; no band is shown" if band is None else ""),
            highlight=False,
        )
    if band is not None:
        write_band(outcome.run_dir, band)
    return band


def _report(outcome: RunOutcome | None, band: Any = None) -> None:
    from analysis.summary import run_warnings
    from replay.commands.final_table import final_table

    if outcome is None:
        fail("preflight failed: fix the engines above, then run again; nothing was sent")
    console.print(final_table(outcome, band))
    if band is not None:
        console.print(f"seed band: {escape(band.verdict())}", highlight=False)
    engines_out = (outcome.summary or {}).get("engines") or {}
    warnings = [w for n, m in engines_out.items() for w in run_warnings(n, m)]
    for w in warnings:
        console.print(f"[bold red]warning:[/] {escape(w)}", highlight=False)
    for note in (outcome.summary or {}).get("notes", []):
        if note not in warnings:
            console.print(f"[yellow]note:[/] {escape(str(note))}", highlight=False)
    console.print(f"run directory: {outcome.run_dir}  ({outcome.records:,} requests)")
    if outcome.status == "degraded":
        console.print(
            "[yellow]degraded:[/] an engine failed too many requests in the window or was "
            "down at the run's end (see the notes); its numbers measure the failures, not the "
            "engine",
            highlight=False,
        )
    if outcome.ended_by is not None:
        err_console.print(f"[bold red]error:[/] {escape(outcome.ended_by)}", highlight=False)
        raise typer.Exit(1)
    if outcome.status == "interrupted":
        console.print(f"interrupted; continue with: replay run --resume {outcome.run_dir}")
        raise typer.Exit(130)
    if outcome.status == "failed":
        raise typer.Exit(1)


def replay_run(
    flags: RunFlags,
    given: dict[str, Any],
    show_panel: bool,
    fleet: dict[str, Any] | None = None,
    band_seeds: int = 0,
    engine_log: list[str] | None = None,
    reset_cache: bool = False,
) -> None:
    """`replay run` over its flags: the spec, the trace, the plan, the run, the report."""
    from replay.client.config import shared_url_warnings

    res = _resolved(flags, given, fleet or {})
    for w in shared_url_warnings([e.engine for e in res.spec.engines]):
        err_console.print(f"[bold yellow]warning:[/] {escape(w)}", highlight=False)
    for line in res.notes:
        err_console.print(line, highlight=False)
    spec, loaded, run_dir = _load(res, flags)
    plan = _plan(spec, loaded, run_dir, flags.resume is not None)
    if engine_log:
        plan = dataclasses.replace(plan, engine_logs=run_spec.engine_logs(engine_log, spec))
    if reset_cache:
        plan = dataclasses.replace(plan, reset_cache=True)
    outcome = _execute(plan, spec, show_panel, res.user_time_scale)
    _report(outcome, _band(outcome, spec, loaded, band_seeds))


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_cmd(
        engines: O.Engines = None,
        endpoint: O.Endpoint = None,
        config: O.Config = None,
        trace: F.Trace = None,
        sessions: F.Sessions = None,
        duration_min: F.DurationMin = None,
        window: F.Window = None,
        time_scale: F.TimeScale = None,
        seed: F.Seed = None,
        gap_cap_s: F.GapCapS = None,
        warmup_s: F.WarmupS = None,
        subagents: F.Subagents = None,
        token_scale: F.TokenScale = None,
        preset: F.Preset = None,
        start_range: F.StartRange = None,
        start_at: F.StartAt = None,
        recycle_start: F.RecycleStart = None,
        out: F.Out = None,
        resume: O.Resume = None,
        retries: F.Retries = None,
        stall_s: F.StallTimeoutS = None,
        request_timeout_s: F.RequestTimeoutS = None,
        show_panel: O.Panel = True,
        slo: O.Slo = None,
        router: F.Router = None,
        replicas: F.Replicas = None,
        capacity_blocks: F.CapacityBlocks = None,
        host_memory_gb: F.HostMemoryGb = None,
        host_bandwidth_gbs: F.HostBandwidthGbs = None,
        external_memory_gb: F.ExternalMemoryGb = None,
        external_bandwidth_gbs: F.ExternalBandwidthGbs = None,
        external_store: F.ExternalStore = None,
        workers: O.Workers = None,
        ray: O.Ray = None,
        engine_log: O.EngineLog = None,
        reset_cache: O.ResetCache = False,
        band_seeds: O.BandSeeds = DEFAULT_SEEDS,
    ) -> None:
        """Replay agent trajectories against engines side by side and record every request."""
        from replay.runspec.live import RunFlags

        wl = dict(trace=trace, sessions=sessions, duration_min=duration_min, window=window,
                  time_scale=time_scale, seed=seed, gap_cap_s=gap_cap_s, warmup_s=warmup_s,
                  subagents=subagents, token_scale=token_scale, preset=preset,
                  start_range=start_range, start_at=start_at,
                  recycle_start=recycle_start)  # fmt: skip
        limits = dict(retries=retries, stall_timeout_s=stall_s, request_timeout_s=request_timeout_s)
        cache: dict[str, Any] = dict(
            capacity_blocks=capacity_blocks, host_memory_gb=host_memory_gb,
            host_bandwidth_gbs=host_bandwidth_gbs, external_memory_gb=external_memory_gb,
            external_bandwidth_gbs=external_bandwidth_gbs, external_store=external_store,
        )  # fmt: skip
        flags = RunFlags(engines, endpoint or [], config, resume, wl, limits, slo, out, **cache)
        given = {"--engines": engines, "--config": config, **F.given_flags(wl), "--out": out,
                 **F.given_flags(cache, EngineShape)}  # fmt: skip
        fleet = dict(router=router, replicas=replicas, workers=workers, ray=ray)
        replay_run(flags, given, show_panel, fleet, band_seeds, engine_log, reset_cache)
