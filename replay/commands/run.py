"""`replay run`: replay the workload against engines side by side, live.

With `--endpoint NAME=URL` (or `--config FILE`) it drives real engines; with engine names and
no endpoint it starts one emulator per engine on loopback (the embedded default). Every
engine is preflighted first; a failing check stops the run before anything is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.live import Live
from rich.markup import escape

from analysis.summary import run_warnings, summary_of_dir
from replay.client.config import (
    ConfigError,
    EngineSpec,
    engines_from_flags,
    load_config_file,
    shared_url_warnings,
)
from replay.client.orchestrate import (
    PreflightFailed,
    RunOutcome,
    RunPlan,
    ScaleConflict,
    adopt_announced_clock,
    check_engines,
    preflight_warnings,
    run_live,
)
from replay.client.panel import panel, progress_line
from replay.commands.common import console, err_console, fail
from replay.commands.final_table import final_table
from replay.commands.run_stop import HardStop
from replay.commands.scale_guard import ScaleError, check_live_memory, check_prompts
from replay.engines.adapters import Limits
from replay.profiles import DEFAULT_MODEL, ProfileError, load_profile
from replay.redact import MASK, redact_url
from replay.rundir import (
    DiskFullError,
    RunDirError,
    RunLock,
    new_run_id,
    read_manifest,
    schema_note,
)
from replay.rundir_models import MANIFEST_SCHEMA_VERSION
from replay.userpaths import PathProblem, check_out_dir
from replay.windows import WindowError, resolve_window_min
from replay.workload import DEFAULT_WORKLOAD, TIMED_WARMUP_S, WorkloadConfig, WorkloadError

# The paper's workload, as the workload config defines it (replay.workload: its one place).
# No window given: the last two thirds of --duration-min (replay.windows), which for the
# default duration is the workload config's window.
_W = DEFAULT_WORKLOAD
DEFAULTS: dict[str, Any] = {
    "sessions": _W.sessions,
    "duration_min": _W.duration_s / 60,
    "window": None,
    "time_scale": 1.0,  # real engines run in real time (the embedded default: its file's)
    "seed": _W.seed,
    "gap_cap_s": _W.gap_cap_s,
    "warmup_s": TIMED_WARMUP_S,
}


def _pick(flag: Any, file_value: Any, key: str, defaults: dict[str, Any]) -> Any:
    return flag if flag is not None else file_value if file_value is not None else defaults[key]


def _embedded_defaults() -> tuple[dict[str, Any], Any]:
    """The embedded default's settings (configs/workloads/default.yaml, owned by the
    emulators) as flag defaults, and the settings object the emulators are built from."""
    from replay.emulator.defaults import DefaultRunError, load_default_run

    try:
        d = load_default_run()
    except DefaultRunError as e:
        fail(str(e))
    lo, hi = d.window
    # The default file's window belongs to its duration: a different --duration-min without
    # --window takes the last two thirds of that run instead.
    return {
        "sessions": d.sessions,
        "duration_min": d.duration_min,
        "window": f"{lo:g}-{hi:g}",
        "window_for_min": d.duration_min,
        "time_scale": d.time_scale,
        "seed": d.seed,
        "gap_cap_s": DEFAULTS["gap_cap_s"],
        "warmup_s": d.warmup_s,
        "engines": ",".join(d.engines),
        "trace": None if d.trace == "sample" else d.trace,
    }, d


@contextlib.contextmanager
def _emulators(
    specs: list[EngineSpec], time_scale: float, sample: bool, settings: Any, token_scale: float
) -> Iterator[Any]:
    """The emulators this run owns (an `EmulatorGroup`): restarted when one dies mid-run
    (the manifest notes it), and ended with the harness, even a SIGKILLed one."""
    from replay.emulator.launch import EmulatorLaunchError, start_emulator_group

    bad = [s.name for s in specs if s.kind not in ("vllm", "flashstate", "sglang")]
    if bad:
        fail(f"--engines {', '.join(bad)}: no emulator for that kind; give an --endpoint")
    names = [s.name for s in specs]
    try:
        if settings is not None:
            from replay.emulator.defaults import embedded_emulator_configs

            configs = embedded_emulator_configs(names, time_scale, sample, settings, token_scale)
            cm = start_emulator_group(configs, restart=True)
        elif token_scale != 1.0:
            fail(
                f"the trace is scaled (token_scale {token_scale:g}) and the emulators' settings "
                "(configs/workloads/default.yaml) could not be read; replay a full-size trace"
            )
        else:
            cm = start_emulator_group(names, time_scale=time_scale, restart=True)
        with cm as group:
            yield group
    except (EmulatorLaunchError, ValueError) as e:
        fail(f"could not start the emulators: {e}")


def _trace_scale(trace: Any, flag: float | None, settings: Any, emulated: bool) -> float:
    """The trace's token scale (`replay.traces.scale`); the embedded default's config value,
    where it names one, must agree with it like the flag. Real engines replay the prompts as
    they are, so for them an undeclared scale is not guessed (1, recorded as such)."""
    from replay.traces.scale import TraceScaleError, declared_scale, resolve_token_scale

    if not emulated and flag is None:
        try:
            return declared_scale(trace) or 1.0
        except TraceScaleError as e:
            fail(str(e))

    conf = getattr(settings, "token_scale", None)
    given, name = flag, "--token-scale"
    if flag is None and conf is not None:
        given, name = conf, "token_scale (configs/workloads/default.yaml)"
    try:
        if flag is not None and conf is not None and abs(flag - conf) > 1e-9:
            raise TraceScaleError(
                f"--token-scale {flag:g} contradicts token_scale {conf:g} in "
                "configs/workloads/default.yaml; drop one (the trace's own scale is used)"
            )
        scale = resolve_token_scale(trace, given, name)
    except TraceScaleError as e:
        fail(str(e))
    return scale


def _emulated_gpus(spec: EngineSpec, settings: Any) -> dict[str, Any]:
    """An emulator stands for the profile's engine (GLM-5.3-Flash: 2×B200), so per-GPU
    metrics and prices divide by the profile's GPUs unless the engine's config said otherwise."""
    if spec.gpus != 1 or spec.gpu_type:
        return {}
    try:
        profile = load_profile(getattr(settings, "model", None) or DEFAULT_MODEL)
    except ProfileError:
        return {}
    return {"gpus": profile.gpus, "gpu_type": profile.gpu_type}


def _slo_config(flag: str | None, file_value: Any, config: Path | None) -> dict[str, Any]:
    """The run's SLO: the config file's `slo` over the defaults, then --slo over that."""
    from analysis.slo import Slo, SloError, parse_slo, slo_from_dict

    try:
        base = Slo()
        if isinstance(file_value, str):
            base = parse_slo(file_value, where=f"--config {config}: field 'slo'")
        elif isinstance(file_value, dict):
            base = slo_from_dict({**base.model_dump(), **file_value}, f"--config {config}: slo")
        return parse_slo(flag or "", base).model_dump()
    except SloError as e:
        fail(str(e))


async def _drive(
    plan: RunPlan,
    show_panel: bool,
    user_time_scale: float | None = None,
    hard: HardStop | None = None,
) -> RunOutcome | None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()

    def on_signal() -> None:
        # First Ctrl-C: stop cleanly (cancel in-flight requests, write the summary). A second
        # one cancels the run's task outright; records already flushed are still kept.
        if stop.is_set() and main is not None:
            main.cancel()
        stop.set()

    def on_raw_signal(signum: int, frame: Any) -> None:
        # A plain handler, run between bytecodes even while the loop is swamped: it arms the
        # hard stop at once, and hands the clean stop to the loop.
        if hard is not None:
            hard.arm(signal.Signals(signum).name)
        loop.call_soon_threadsafe(on_signal)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_raw_signal)
    names = ", ".join(f"{e.name} ({e.kind} at {redact_url(e.url)})" for e in plan.engines)
    err_console.print(f"preflight: {escape(names)}", highlight=False)
    reports = await check_engines(plan)
    for r in reports:
        style = "green" if r.ok else "red"
        err_console.print(f"[{style}]{escape(r.message())}[/]", highlight=False)
        for w in preflight_warnings(r):
            err_console.print(
                f"[bold yellow]warning:[/] {escape(r.url)}: {escape(w)}", highlight=False
            )
    if not all(r.ok for r in reports):
        return None
    adopted = adopt_announced_clock(plan, reports, user_time_scale)  # ScaleConflict
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


def _specs_from_manifest(
    run_dir: Path, endpoint: list[str]
) -> tuple[list[EngineSpec], dict[str, Any], str]:
    """The engines, settings and trace of the run to resume. `--endpoint NAME=URL` may give
    an engine's URL again (the manifest keeps URLs without their credentials)."""
    try:
        man = read_manifest(run_dir)
    except RunDirError as e:
        fail(f"--resume: {e}")
    if note := schema_note(run_dir / "manifest.json", man.schema_version, MANIFEST_SCHEMA_VERSION):
        err_console.print(f"[bold yellow]warning:[/] {escape(note)}", highlight=False)
    if man.status in ("completed", "degraded"):
        how = "completed" if man.status == "completed" else "ended (degraded)"
        fail(f"--resume {run_dir}: that run {how}; nothing to resume")
    # The resume code reads the settings by name (missing ones fall back to the defaults).
    cfg: dict[str, Any] = man.config.model_dump(exclude_none=True)
    specs = []
    for entry in man.engines:
        given = entry.model_dump(exclude_none=True)
        keep = {k: v for k, v in given.items() if k in EngineSpec.model_fields}
        if man.emulated:
            keep.pop("url", None)
        specs.append(EngineSpec.model_validate(keep))
    trace = man.trace.path if man.trace is not None else None
    if not specs or not trace:
        fail(f"--resume {run_dir}: manifest.json lacks its engines or trace; cannot resume")
    if endpoint:
        try:
            given = {s.name: s.url for s in engines_from_flags(None, endpoint)}
        except ConfigError as e:
            fail(str(e))
        unknown = [n for n in given if n not in {s.name for s in specs}]
        if unknown or man.emulated:
            fail(
                f"--resume {run_dir}: --endpoint may only give the URL of an engine of that run "
                f"({', '.join(s.name for s in specs)}); the engines cannot change on resume"
            )
        specs = [s.model_copy(update={"url": given.get(s.name, s.url)}) for s in specs]
    masked = [s.name for s in specs if s.url and f"{MASK}@" in s.url]
    if masked:
        fail(
            f"--resume {run_dir}: the manifest keeps the URL of {', '.join(masked)} without its "
            f"credentials; give it again: --endpoint {masked[0]}=URL"
        )
    return specs, cfg, str(trace)


# Flags that shape the workload: a resumed run keeps the ones it was started with.
_WORKLOAD_FLAGS = (
    "--engines",
    "--config",
    "--trace",
    "--sessions",
    "--duration-min",
    "--window",
    "--time-scale",
    "--seed",
    "--gap-cap-s",
    "--subagents",
    "--token-scale",
    "--out",
)


def _check_flags(
    *, sessions: int | None, duration_min: float | None, time_scale: float | None,
    gap_cap_s: float | None, seed: int | None, retries: int, stall_s: float,
    request_timeout_s: float,
) -> None:  # fmt: skip
    """Counts and limits that cannot be negative (or zero) fail naming their flag."""
    checks: list[tuple[str, float | None, bool, str]] = [
        ("--sessions", sessions, sessions is None or sessions >= 1, "at least 1"),
        ("--duration-min", duration_min, duration_min is None or duration_min > 0, "positive"),
        ("--time-scale", time_scale, time_scale is None or time_scale > 0, "positive"),
        ("--gap-cap-s", gap_cap_s, gap_cap_s is None or gap_cap_s >= 0, "0 or more"),
        ("--seed", seed, seed is None or seed >= 0, "0 or more"),
        ("--retries", retries, retries >= 0, "0 or more (0: no retries)"),
        ("--stall-timeout-s", stall_s, stall_s > 0, "positive"),
        ("--request-timeout-s", request_timeout_s, request_timeout_s > 0, "positive"),
    ]
    for flag, value, ok, need in checks:
        if not ok or (isinstance(value, float) and not math.isfinite(value)):
            fail(f"{flag} {value:g}: must be {need}")


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_cmd(
        engines: str | None = typer.Option(
            None, "--engines", help="Engines to compare, e.g. flashstate,vllm,sglang."
        ),
        endpoint: list[str] = typer.Option(  # noqa: B008
            [], "--endpoint", help="NAME=URL (or NAME=KIND@URL) per engine; repeat."
        ),
        config: Path | None = typer.Option(  # noqa: B008
            None, "--config", help="YAML listing engines (url, model, gpus, gpu_type, kind)."
        ),
        trace: str | None = typer.Option(
            None, "--trace", help="Trace file, folder or hf:owner/name (default: the sample)."
        ),
        sessions: int | None = typer.Option(
            None, "--sessions", help=f"Concurrent sessions ({_W.sessions})."
        ),
        duration_min: float | None = typer.Option(
            None,
            "--duration-min",
            help=f"Run length in minutes of the trace's clock ({_W.duration_s / 60:g}).",
        ),
        window: str | None = typer.Option(
            None,
            "--window",
            help=f"Measured minutes A-B ({_W.window[0] / 60:g}-{_W.window[1] / 60:g}: the "
            "last two thirds of the run).",
        ),
        time_scale: float | None = typer.Option(
            None, "--time-scale", help="Replay X times faster: gaps and duration divided by X."
        ),
        seed: int | None = typer.Option(None, "--seed", help=f"Workload seed ({_W.seed})."),
        gap_cap_s: float | None = typer.Option(
            None, "--gap-cap-s", help=f"Tool-gap cap ({_W.gap_cap_s:g})."
        ),
        out: Path | None = typer.Option(None, "--out", help="Run directory (runs/<run-id>)."),  # noqa: B008
        resume: Path | None = typer.Option(  # noqa: B008
            None, "--resume", help="Continue an interrupted run directory."
        ),
        retries: int = typer.Option(3, "--retries", help="Retries of a failed turn."),
        stall_s: float = typer.Option(120.0, "--stall-timeout-s", help="No-token stall limit."),
        request_timeout_s: float = typer.Option(
            3600.0, "--request-timeout-s", help="Whole-request limit."
        ),
        show_panel: bool = typer.Option(True, "--panel/--no-panel", help="Live panel."),
        slo: str | None = typer.Option(
            None,
            "--slo",
            help="SLO thresholds over the defaults ttft=6,itl=0.175,e2e=none,slowdown=2 "
            "(seconds; slowdown = task time ÷ the trace's); 'none' drops one.",
        ),
        subagents: str | None = typer.Option(
            None,
            "--subagents",
            help="concurrent (default: child sessions beside the parent) | inline (in the "
            "parent's slot, the parent waiting) | skip (left out).",
        ),
        token_scale: float | None = typer.Option(
            None,
            "--token-scale",
            help="The divisor of the trace's token lengths, for a trace that does not declare "
            "it (a trace's own token_scale is used; a different value is an error).",
        ),
    ) -> None:
        """Replay agent trajectories against engines side by side and record every request."""
        from replay.traces import TraceError, load_trace, sample_path

        _check_flags(
            sessions=sessions, duration_min=duration_min, time_scale=time_scale,
            gap_cap_s=gap_cap_s, seed=seed, retries=retries, stall_s=stall_s,
            request_timeout_s=request_timeout_s,
        )  # fmt: skip
        if resume is not None:
            given = dict(
                zip(
                    _WORKLOAD_FLAGS,
                    (engines, config, trace, sessions, duration_min, window, time_scale, seed,
                     gap_cap_s, subagents, token_scale, out),
                    strict=True,
                )
            )  # fmt: skip
            changed = [flag for flag, value in given.items() if value is not None]
            if changed:
                fail(
                    f"--resume continues {resume} with the workload it was started with; drop "
                    f"{', '.join(changed)} (to change the workload, start a new run with --out)"
                )
        file_cfg: Any = None
        manifest_cfg: dict[str, Any] = {}
        defaults, settings = DEFAULTS, None
        if resume is None and config is None and not endpoint:
            defaults, settings = _embedded_defaults()  # no endpoint: the embedded default
            engines = engines if engines is not None else defaults["engines"]
        try:
            if resume is not None:
                specs, manifest_cfg, trace = _specs_from_manifest(resume, endpoint)
            elif config is not None:
                if engines or endpoint:
                    fail("--config lists the engines; drop --engines/--endpoint or the file")
                file_cfg = load_config_file(config)
                specs = file_cfg.engines
            else:
                specs = engines_from_flags(engines, endpoint)
        except ConfigError as e:
            fail(str(e))
        fc = file_cfg
        for w in shared_url_warnings(specs):
            err_console.print(f"[bold yellow]warning:[/] {escape(w)}", highlight=False)
        emulated = all(s.url is None for s in specs)
        if not emulated and any(s.url is None for s in specs):
            missing = ", ".join(s.name for s in specs if s.url is None)
            fail(f"engines {missing} have no url; give every engine a url or none")
        user_scale: float | None = None
        if resume is not None:
            if emulated:
                settings = _embedded_defaults()[1]
            # A setting the manifest lacks is the workload config's default (a manifest from
            # before the warm-up existed ran without one: WorkloadConfig's 0).
            n_sessions = int(manifest_cfg.get("sessions", _W.sessions))
            duration_s = float(manifest_cfg.get("replayed_duration_s", _W.duration_s))
            win_s = tuple(manifest_cfg.get("replayed_window", _W.window))
            scale = float(manifest_cfg.get("time_scale", DEFAULTS["time_scale"]))
            user_scale = scale  # an engine announcing another clock is a conflict
            run_seed = int(manifest_cfg.get("seed", _W.seed))
            cap = float(manifest_cfg.get("gap_cap_s", _W.gap_cap_s))
            subagents = subagents or str(manifest_cfg.get("subagents", _W.subagents))
            warmup = float(manifest_cfg.get("warmup_s", _W.warmup_s))
        else:
            n_sessions = _pick(sessions, fc and fc.sessions, "sessions", defaults)
            minutes = float(_pick(duration_min, fc and fc.duration_min, "duration_min", defaults))
            duration_s = minutes * 60
            win_text = window if window is not None else fc and fc.window
            flag = "--window" if window is not None or not (fc and fc.window) else (
                f"--config {config}: field 'window'"
            )  # fmt: skip
            if win_text is None and minutes == defaults.get("window_for_min", minutes):
                win_text = defaults["window"]  # the embedded default's own window
                flag = "the embedded default: configs/workloads/default.yaml"
            try:
                lo, hi, used = resolve_window_min(win_text, minutes, flag)
            except WindowError as e:
                fail(str(e))
            err_console.print(f"measuring {used}", highlight=False)
            win_s = (lo * 60, hi * 60)
            picked = _pick(time_scale, fc and fc.time_scale, "time_scale", defaults)
            scale = float(picked)
            user_scale = (
                float(time_scale) if time_scale is not None else (fc and fc.time_scale) or None
            )
            run_seed = int(_pick(seed, fc and fc.seed, "seed", defaults))
            cap = float(_pick(gap_cap_s, fc and fc.gap_cap_s, "gap_cap_s", defaults))
            warmup = float(defaults["warmup_s"])
            trace = trace or (fc and fc.trace) or defaults.get("trace") or None
        if scale <= 0:
            fail(f"--time-scale must be positive (got {scale})")
        slo_cfg = _slo_config(slo, fc and fc.slo, config)
        try:
            wcfg = WorkloadConfig(
                sessions=n_sessions,
                duration_s=duration_s,
                window=(float(win_s[0]), float(win_s[1])),
                gap_cap_s=cap,
                seed=run_seed,
                subagents=subagents or _W.subagents,  # type: ignore[arg-type]
                warmup_s=min(warmup, duration_s / 2),
            )
        except WorkloadError as e:
            flag = (
                "--subagents" if "subagents" in str(e) else "--sessions, --duration-min, --window"
            )
            fail(f"{e} (check {flag})")
        run_dir = resume if resume is not None else (out or Path("runs") / new_run_id())
        try:
            check_out_dir(run_dir, "--resume" if resume is not None else "--out")
        except PathProblem as e:
            fail(str(e))
        if resume is None and (run_dir / "requests.jsonl").exists():
            fail(f"--out {run_dir}: already holds a run; choose a new --out or --resume it")
        try:
            sample = trace is None or Path(str(trace)) == sample_path()
            loaded = load_trace(trace or sample_path())
        except (TraceError, FileNotFoundError) as e:
            fail(f"--trace: {e}")
        try:
            check_prompts(loaded)
            check_live_memory(loaded, wcfg.sessions, len(specs))
        except ScaleError as e:
            fail(str(e))
        tokens = _trace_scale(
            loaded, token_scale, settings if emulated and sample else None, emulated
        )
        if tokens != 1.0 and not emulated:
            err_console.print(
                f"[yellow]note:[/] trace {loaded.source} is scaled (token_scale {tokens:g}): "
                "real engines replay its short prompts as they are, so their cache pressure "
                "is not the full-size corpus's"
            )
        plan = RunPlan(
            engines=specs,
            trace=loaded,
            workload=wcfg,
            out_dir=run_dir,
            time_scale=scale,
            clock_scale=scale if emulated else 1.0,
            command=shlex.join(["replay", *sys.argv[1:]]),
            limits=Limits(stall_timeout_s=stall_s, request_timeout_s=request_timeout_s),
            retries=retries,
            resume=resume is not None,
            trace_token_scale=tokens,
            emulated=emulated,
            slo=slo_cfg,
            summarize=summary_of_dir,
        )
        if len(loaded.trajectories) < wcfg.sessions:
            err_console.print(
                f"[yellow]note:[/] {wcfg.sessions} sessions but {len(loaded.trajectories)} "
                "trajectories: some trajectories will be replayed again, each time as its own "
                "conversation (the manifest's workload counts them)"
            )
        with contextlib.ExitStack() as stack:
            # One writer per run directory, from before anything starts to the very end.
            try:
                stack.enter_context(RunLock(run_dir))
            except RunDirError as e:
                fail(str(e))
            if emulated:
                group = stack.enter_context(_emulators(specs, scale, sample, settings, tokens))
                plan.restarts = group.restarts
                plan.outages = group.outages
                plan.engines = [
                    s.model_copy(update={"url": group.urls[s.name], **_emulated_gpus(s, settings)})
                    for s in specs
                ]
            hard = HardStop(plan.out_dir)
            stack.callback(hard.disarm)
            for sig in (signal.SIGINT, signal.SIGTERM):  # _drive installs its own
                stack.callback(signal.signal, sig, signal.getsignal(sig))
            try:
                outcome = asyncio.run(_drive(plan, show_panel, user_scale, hard))
            except PreflightFailed as e:
                fail(str(e))
            except ScaleConflict as e:
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
        if outcome is None:
            fail("preflight failed: fix the engines above, then run again; nothing was sent")
        console.print(final_table(outcome))
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
                "[yellow]degraded:[/] an engine failed too many requests in the window (see the "
                "notes); its numbers measure the failures, not the engine",
                highlight=False,
            )
        if outcome.status == "interrupted":
            console.print(f"interrupted; continue with: replay run --resume {outcome.run_dir}")
            raise typer.Exit(130)
        if outcome.status == "failed":
            raise typer.Exit(1)
