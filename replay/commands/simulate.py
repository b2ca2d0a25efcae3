"""`replay simulate`: sweep cache policies × session counts × seeds over a trace on a CPU.

Each simulated run is written as a run directory (`replay.sim.sweep`), then its summary.json
is built here by `analysis.summary` (the executor never imports analysis)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from analysis.summary import summarize_dir
from replay.commands.common import console, err_console, fail
from replay.commands.scale_guard import (
    RayAddressError,
    ScaleError,
    check_prompts,
    check_ray_address,
    check_sim_work,
)
from replay.commands.sim_child import SweepFailed, SweepInterrupted, run_in_child
from replay.fleet import router_names
from replay.profiles import DEFAULT_MODEL, ProfileError, load_profile
from replay.rundir import new_run_id
from replay.sim.policies import POLICY_NAMES
from replay.sim.runner import TIMINGS, SimResult
from replay.sim.sweep import plan, run_sweep
from replay.traces import TraceError, load_trace
from replay.traces.scale import TraceScaleError, resolve_token_scale
from replay.windows import WindowError, resolve_window_min, seconds
from replay.workload import (
    DEFAULT_WORKLOAD,
    SUBAGENT_MODES,
    TIMED_WARMUP_S,
    WorkloadConfig,
    WorkloadError,
)

_W = DEFAULT_WORKLOAD  # the replay's defaults live in the workload config
# Errors the sweep reports as bad input, and the flag each names (others are bugs).
_FAILURE_FLAGS = {
    "RunDirError": "--out",
    "DiskFullError": "--out",
    "RunLockedError": "--out",
    "RayError": "--ray",
    "NativeError": "--policies",
}


def parse_policies(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        fail("--policies: give at least one policy, e.g. --policies vllm,flashstate")
    bad = [p for p in names if p not in POLICY_NAMES]
    if bad:
        fail(f"--policies: unknown policy {', '.join(bad)} (known: {', '.join(POLICY_NAMES)})")
    return _once(names, "--policies")


def _once(items: list[Any], flag: str) -> list[Any]:
    """`items` with repeats dropped (first kept), saying which were dropped: a repeated point
    would write the same run directory twice."""
    kept = list(dict.fromkeys(items))
    if len(kept) < len(items):
        again = sorted({str(x) for x in items if items.count(x) > 1})
        err_console.print(
            f"[yellow]note:[/] {flag}: {', '.join(again)} given more than once; each runs once",
            highlight=False,
        )
    return kept


def parse_sessions(text: str) -> list[int]:
    out: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part.isdigit() or int(part) < 1:
            fail(f"--sessions: '{part}' is not a positive whole number (e.g. --sessions 16,32,48)")
        out.append(int(part))
    return _once(out, "--sessions")


def parse_window(text: str | None, duration_min: float) -> tuple[float, float]:
    """'A-B' in minutes → seconds, inside the run; none: the last two thirds (says which)."""
    try:
        lo, hi, used = resolve_window_min(text, duration_min)
    except WindowError as e:
        fail(str(e))
    err_console.print(used, highlight=False)
    return seconds((lo, hi))


def parse_fleet(replicas: str | None, router: str | None) -> tuple[list[int], list[str]]:
    """--replicas / --router (comma lists sweep them); ([], []) for one engine per run."""
    if replicas is None and router is None:
        return [], []
    choices = ", ".join(router_names())
    if router is None:
        fail(f"--router: give the router over the replicas (choose one of {choices})")
    counts: list[int] = []
    for part in (p.strip() for p in (replicas or "1").split(",")):
        if not part.isdigit() or int(part) < 1:
            fail(f"--replicas: '{part}' is not a positive whole number (e.g. --replicas 4,8)")
        counts.append(int(part))
    names = [r.strip() for r in router.split(",") if r.strip()]
    if not names:
        fail(f"--router: give at least one router (choose one of {choices})")
    bad = [r for r in names if r not in router_names()]
    if bad:
        fail(f"--router: unknown router {', '.join(bad)} (choose one of {choices})")
    return _once(counts, "--replicas"), _once(names, "--router")


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def _cmd(
        trace: str = typer.Option(..., "--trace", help="Trace file, folder or HF dataset id."),
        policies: str = typer.Option(
            ..., "--policies", help=f"Comma list of: {', '.join(POLICY_NAMES)}."
        ),
        sessions: str = typer.Option(..., "--sessions", help="Comma list, e.g. 16,32,48."),
        seeds: int = typer.Option(1, "--seeds", min=1, help="Seeds 0..N-1 per point."),
        model: str = typer.Option(DEFAULT_MODEL, "--model", help="Profile in configs/models."),
        timing: str = typer.Option("trace", "--timing", help="trace | engine"),
        duration_min: float = typer.Option(
            _W.duration_s / 60, "--duration-min", help="Run length, minutes."
        ),
        window: str | None = typer.Option(
            None, "--window", help="Measured minutes A-B (default: the last two thirds)."
        ),
        out: Annotated[
            Path | None, typer.Option("--out", help="Output folder (default runs/sim-…).")
        ] = None,
        workers: int = typer.Option(1, "--workers", min=1, help="Local worker processes."),
        capacity_blocks: int | None = typer.Option(
            None,
            "--capacity-blocks",
            min=1,
            help="Cache size in blocks (default: the profile's blocks per engine).",
        ),
        warmup_s: float | None = typer.Option(
            None,
            "--warmup-s",
            min=0.0,
            help="Spread the sessions' first requests over this many seconds "
            f"(default: {TIMED_WARMUP_S:g} with --timing engine, as `replay run`; "
            f"{_W.warmup_s:g} with trace timing).",
        ),
        ray: str | None = typer.Option(
            None, "--ray", help="Ray cluster address ('local' starts one here)."
        ),
        subagents: str = typer.Option(
            _W.subagents,
            "--subagents",
            help="concurrent (child sessions beside the parent) | inline (in the parent's "
            "slot, the parent waiting) | skip (left out, as the source's simulation).",
        ),
        token_scale: float | None = typer.Option(
            None,
            "--token-scale",
            help="The divisor of the trace's token lengths, for a trace that does not declare "
            "it (a trace's own token_scale is used; a different value is an error).",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the summary rows as JSON."),
        replicas: str | None = typer.Option(
            None,
            "--replicas",
            help="Copies of each engine behind --router, on one clock (a comma list sweeps).",
        ),
        router: str | None = typer.Option(
            None,
            "--router",
            help=f"Router over the replicas (a comma list sweeps): {', '.join(router_names())}.",
        ),
    ) -> None:
        """Simulate hybrid-state cache policies over a trace: run directories + summary.csv."""
        names = parse_policies(policies)
        counts = parse_sessions(sessions)
        fleet_sizes, routers = parse_fleet(replicas, router)
        if timing not in TIMINGS:
            fail(f"--timing: '{timing}' is not one of {', '.join(TIMINGS)}")
        if duration_min <= 0:
            fail(f"--duration-min: must be positive (got {duration_min:g})")
        win = parse_window(window, duration_min)
        if subagents not in SUBAGENT_MODES:
            fail(f"--subagents: '{subagents}' is not one of {', '.join(SUBAGENT_MODES)}")
        if warmup_s is not None:
            warmup = warmup_s
        else:
            warmup = TIMED_WARMUP_S if timing == "engine" else _W.warmup_s
        try:
            load_profile(model)
        except ProfileError as e:
            fail(f"--model: {e}")
        try:
            WorkloadConfig(
                sessions=max(counts), duration_s=duration_min * 60.0, window=win, warmup_s=warmup
            )
        except WorkloadError as e:
            fail(str(e))
        try:
            tr = load_trace(trace)
        except (TraceError, FileNotFoundError, OSError) as e:
            fail(f"--trace: {e}")
        if not tr.trajectories:
            fail(f"--trace: {trace} holds no trajectories")
        try:
            check_prompts(tr)
        except ScaleError as e:
            fail(str(e))
        try:
            scale = resolve_token_scale(tr, token_scale)
        except TraceScaleError as e:
            fail(str(e))
        for native in sorted({n for n in names if n.endswith("-native")}):
            from replay.sim.native.worker import ENGINES, NativeError, find_engine

            engine = native.removesuffix("-native")
            try:
                found = find_engine(engine)
            except NativeError as e:
                fail(f"--policies: {e}")
            label = ENGINES[engine].label
            err_console.print(f"{native}: {label} from {found.python} ({found.how})")
        if ray is not None:
            try:
                check_ray_address(ray)
            except RayAddressError as e:
                fail(str(e))
        out_dir = out or Path("runs") / new_run_id("sim")
        configs = plan(
            names,
            counts,
            seeds,
            model=model,
            timing=timing,
            duration_s=duration_min * 60.0,
            window=win,
            capacity_blocks=capacity_blocks,
            subagents=subagents,
            token_scale=scale,
            warmup_s=warmup,
            replicas=fleet_sizes,
            routers=routers,
        )
        try:
            long = check_sim_work(tr, counts, len(configs), duration_min * 60.0, workers)
        except ScaleError as e:
            fail(str(e))
        if long:
            err_console.print(f"[yellow]note:[/] {long}", highlight=False)
        command = "replay " + shlex.join(sys.argv[1:])
        with Progress(
            TextColumn("[bold]simulate"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=err_console,
            transient=as_json,
        ) as progress:
            task = progress.add_task("", total=len(configs))

            def advance(name: str, s: dict[str, Any]) -> None:
                progress.update(task, advance=1, description=f"{name}: hit {s['hit_rate']:.1%}")

            def work(on_result: Any) -> list[dict[str, Any]]:
                def summarize(res: SimResult) -> None:
                    # summary.json's one producer is analysis.summary (the run table, the
                    # report and the dashboard read the same figures).
                    summarize_dir(out_dir / res.config.run_name)
                    on_result(res)

                return run_sweep(
                    tr, configs, out_dir, workers=workers, ray_address=ray,
                    trace_source=str(trace), command=command, on_result=summarize,
                )  # fmt: skip

            about = {"command": command, "trace": str(trace), "sha256": tr.sha256}
            try:
                rows = run_in_child(work, configs, out_dir, advance, about)
            except SweepInterrupted as e:
                progress.stop()
                err_console.print(f"[yellow]interrupted:[/] {e}", highlight=False)
                raise typer.Exit(130) from None
            except SweepFailed as e:
                flag = _FAILURE_FLAGS.get(e.kind)
                if flag is None:  # a bug: its traceback, from the child
                    sys.stderr.write(e.trace)
                    raise typer.Exit(1) from None
                fail(f"{flag}: {e}")
        reused = [r for r in rows if r.get("reused_assignments")]
        if reused:
            r = max(reused, key=lambda x: x["reused_assignments"])
            err_console.print(
                f"[yellow]note:[/] the trace's {len(tr.trajectories)} trajectories were not "
                f"enough: up to {r['reused_assignments']} of {r['assignments']} assignments "
                f"replayed a trajectory again (each replay is its own conversation; see "
                f"reused_assignments in summary.csv)"
            )
        if as_json:
            sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
            return
        scale_note = f", token scale {scale:g}" if scale != 1 else ""
        cap = rows[0].get("capacity_blocks") if rows else None
        table = Table(
            title=f"{len(rows)} runs → {out_dir}/summary.csv "
            f"(capacity {cap} blocks{scale_note}, subagents {subagents}; WS: working set ÷ "
            "capacity)"
        )
        for col in (
            "policy",
            "sessions",
            "seed",
            "requests",
            "hit",
            "ideal",
            "redundant/req",
            "WS",
        ):
            table.add_column(col, justify="left" if col == "policy" else "right")
        for r in rows:
            table.add_row(
                r["policy"] + (f" ×{r['replicas']} {r['router']}" if r.get("router") else ""),
                str(r["sessions"]),
                str(r["seed"]),
                f"{r['requests']:,}",
                f"{r['hit_rate']:.1%}",
                f"{r['ideal_hit_rate']:.1%}",
                f"{r['redundant_prefill_per_request']:,.0f}",
                f"{r['working_set_ratio']:.2f}",
            )
        console.print(table)
