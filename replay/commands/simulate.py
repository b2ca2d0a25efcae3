"""`replay simulate`: sweep cache policies × session counts × seeds over a trace on a CPU.

Each simulated run is written as a run directory (`replay.sim.sweep`), then its summary.json
is built here by `analysis.summary` (the executor never imports analysis)."""

from __future__ import annotations

import shlex
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replay.commands.common import console, err_console, fail
from replay.runspec import flags as F
from replay.sim.cache.policies import POLICY_NAMES

if TYPE_CHECKING:
    from replay.runspec.sweep import SweepSpec

# Everything else is imported where it is used, so that `replay --help` and
# `replay simulate --help` load neither the simulator's runner nor the analysis (numpy,
# pandas): tests/unit/replay/test_cli.py.
# Errors the sweep reports as bad input, and the flag each names (others are bugs).
_FAILURE_FLAGS = {
    "RunDirError": "--out",
    "DiskFullError": "--out",
    "RunLockedError": "--out",
    "RayError": "--ray",
    "NativeError": "--policies",
}


def _items(text: str, flag: str, example: str) -> list[str]:
    """A comma-list flag's items (`replay.comma_list`: an empty item is refused)."""
    from replay.comma_list import CommaListError, comma_items

    try:
        return comma_items(text, flag, example)
    except CommaListError as e:
        fail(str(e))


def parse_policies(text: str) -> list[str]:
    names = _items(text, "--policies", "vllm,flashstate")
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
    """The counts of a comma list (each checked on its field: `sweep_workload`)."""
    out: list[int] = []
    for part in _items(text, "--sessions", "16,32,48") or [text.strip()]:
        if not part.isdigit():
            fail(f"--sessions: '{part}' is not a positive whole number (e.g. --sessions 16,32,48)")
        out.append(int(part))
    return _once(out, "--sessions")


def parse_fleet(replicas: str | None, router: str | None) -> tuple[list[int], list[str]]:
    """--replicas / --router (comma lists sweep them), each value checked on its field
    (`EngineShape`, as `replay run` checks it); ([], []) for one engine per run."""
    from replay.fleet import EXTERNAL, router_names
    from replay.runspec.fields import EngineShape
    from replay.runspec.fleet import no_replicas
    from replay.runspec.resolve import FLAGS, Layer, SpecError, build

    if replicas is None and router is None:
        return [], []
    choices = ", ".join(router_names())
    counts: list[int] = []
    given = "1" if replicas is None else replicas
    for part in _items(given, "--replicas", "4,8") or [given.strip()]:
        if not part.isdigit():
            fail(f"--replicas: '{part}' is not a positive whole number (e.g. --replicas 4,8)")
        counts.append(int(part))
    try:  # a bad count is named before a missing router
        for k in counts:
            build(EngineShape, [Layer(FLAGS, {"replicas": k})])
    except SpecError as e:
        fail(str(e))
    if router is None:
        fail(f"--router: give the router over the replicas (choose one of {choices})")
    names = _items(router, "--router", "round_robin,cache_aware")
    if not names:
        fail(f"--router: give at least one router (choose one of {choices})")
    if EXTERNAL in names:
        fail(f"--router {EXTERNAL}: the simulator routes its replicas itself (choose one of "
             f"{choices})")  # fmt: skip
    try:
        for r in names:
            build(EngineShape, [Layer(FLAGS, {"router": r})])
    except SpecError as e:
        fail(str(e))
    if replicas is None:  # as `replay run` refuses it (issue 36: ran one replica silently)
        fail(no_replicas(router, simulated=True))
    return _once(counts, "--replicas"), _once(names, "--router")


def _zero_is_none(engine: dict[str, Any]) -> dict[str, Any]:
    """`--host-memory-gb 0` and `--external-memory-gb 0` are the flags' defaults: no tier."""
    tiers = ("host_memory_gb", "external_memory_gb")
    return {k: (v or None) if k in tiers else v for k, v in engine.items()}


def _spec(given: dict[str, Any], policies: str, sessions: str | None, seeds: int, timing: str,
          engine: dict[str, Any], fleet: tuple[str | None, str | None]) -> SweepSpec:  # fmt: skip
    """The sweep's spec from its flags; a refused value fails naming its flag."""
    from replay.profiles import DEFAULT_MODEL, ProfileError, load_profile
    from replay.runspec.fields import EngineShape, seed_span_error
    from replay.runspec.resolve import FLAGS, Layer, SpecError, build
    from replay.runspec.sweep import SweepSpec, sweep_workload
    from replay.sim.runner import TIMINGS
    from replay.workload import DEFAULT_WORKLOAD, SUBAGENT_MODES

    names = parse_policies(policies)
    counts = parse_sessions(sessions) if sessions is not None else [DEFAULT_WORKLOAD.sessions]
    fleet_sizes, routers = parse_fleet(*fleet)
    if timing not in TIMINGS:
        fail(f"--timing: '{timing}' is not one of {', '.join(TIMINGS)}")
    minutes = given.get("duration_min")
    if minutes is not None and not minutes > 0:
        fail(f"--duration-min: must be positive (got {minutes:g})")
    subagents = given.get("subagents")
    if subagents is not None and subagents not in SUBAGENT_MODES:
        fail(f"--subagents: '{subagents}' is not one of {', '.join(SUBAGENT_MODES)}")
    try:
        wl, used = sweep_workload(given, counts, timing)
        err_console.print(used, highlight=False)
        if wl.preset is not None:
            from replay.presets import preset_notes

            for note in preset_notes(wl.preset, wl.duration_min):
                err_console.print(note, highlight=False)
        shape = build(
            EngineShape,
            [Layer(FLAGS, _zero_is_none(engine)), Layer("default", {"profile": DEFAULT_MODEL})],
        )
        load_profile(shape.profile or DEFAULT_MODEL)
    except SpecError as e:
        fail(str(e))
    except ProfileError as e:
        fail(f"--model: {e}")
    if (why := seed_span_error(wl.seed, seeds, "--seeds")) is not None:
        fail(why)
    return SweepSpec(workload=wl, policies=names, sessions=counts, seeds=seeds, timing=timing,
                     engine=shape, replicas=fleet_sizes, routers=routers)  # fmt: skip


def _load(spec: SweepSpec, token_scale: float | None) -> tuple[Any, float]:
    """The trace (checked) and its token scale."""
    from replay.commands.scale_guard import ScaleError, check_prompts
    from replay.traces import TraceError, load_trace, sample_path
    from replay.traces.scale import TraceScaleError, resolve_token_scale

    trace = spec.workload.trace or str(sample_path())
    try:
        tr = load_trace(trace)
    except (TraceError, FileNotFoundError, OSError) as e:
        fail(f"--trace: {e}")
    if not tr.trajectories:
        fail(f"--trace: {trace} holds no trajectories")
    try:
        check_prompts(tr)
        scale = resolve_token_scale(tr, token_scale)
    except ScaleError as e:
        fail(str(e))
    except TraceScaleError as e:
        fail(str(e))
    _note_over_context(tr, spec.engine.profile, scale)
    return tr, scale


def _note_over_context(tr: Any, profile: str | None, scale: float) -> None:
    """A note where requests exceed the model's context: an engine (and the emulator) refuses
    them, so the simulator records them as overflows, not sent, as the live client does."""
    from replay.commands.scale_guard import over_context
    from replay.profiles import DEFAULT_MODEL, load_profile
    from replay.sim.engine.scale import scaled_profile

    p = scaled_profile(load_profile(profile or DEFAULT_MODEL), scale)
    over, total = over_context(tr, p.context_tokens)
    if over:
        err_console.print(
            f"[yellow]note:[/] {over:,} of the trace's {total:,} requests exceed the model's "
            f"context ({p.context_tokens:,} tokens of prompt and output, --model {p.name}): an "
            "engine refuses them (HTTP 400), so they are recorded as overflows, not sent, and "
            "their sessions go on; choose a model with a longer context, or a trace that fits",
            highlight=False,
        )


def _check_executors(names: list[str], ray: str | None) -> None:
    """The native engines the policies name are installed, and Ray is reachable."""
    from replay.commands.scale_guard import RayAddressError, check_ray_address

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


# What a folder holds once a simulate, plan-host or slo-search has written into it.
_RESULTS = ("summary.csv", "manifest.json", "slo_search.json", "plan_host.json")


def _held_results(path: Path) -> str | None:
    """What in `path` an earlier command wrote (its summary, or a run directory), if any."""
    for name in _RESULTS:
        if (path / name).exists():
            return name
    if path.is_dir():
        for child in sorted(path.iterdir()):
            if (child / "manifest.json").is_file():
                return f"{child.name}/manifest.json"
    return None


def _out_dir(path: Path) -> Path:
    """The sweep's folder, made now: a path that cannot hold it (a file, /proc, a full or
    read-only disk) fails naming --out before any run starts, and so does a folder an earlier
    sweep wrote (its `summary.csv` would be replaced by this sweep's rows alone)."""
    from replay.userpaths import PathProblem, check_out_dir, make_out_dir

    try:
        check_out_dir(path)
    except PathProblem as e:
        fail(str(e))
    if (held := _held_results(path)) is not None:
        fail(
            f"--out {path}: already holds a run ({held}); choose a new --out (a sweep is "
            "written whole into its own folder: it is not resumed or added to)"
        )
    try:
        make_out_dir(path)
    except PathProblem as e:
        fail(str(e))
    return path


def _configs(spec: SweepSpec, scale: float, tr: Any, trace: str, workers: int,
             ray: str | None) -> list[Any]:  # fmt: skip
    """Every point of the sweep: its spec (`SweepSpec.points`), the config the simulator
    runs built from it (`replay.runspec.sweep.config_of`). The points are counted and checked
    against the machine first (`check_sim_work`): `--seeds 100000000` used to build specs until memory
    ran out (issue 36). A Ray cluster runs the points, not this machine's pool."""
    from replay.commands.scale_guard import ScaleError, check_sim_work
    from replay.runspec.sweep import config_of

    duration_s = spec.workload.duration_min * 60
    pool = workers if ray is None else 1
    try:
        long = check_sim_work(tr, spec.sessions, spec.size(), duration_s, pool, spec.seeds)
    except ScaleError as e:
        fail(str(e))
    if long:
        err_console.print(f"[yellow]note:[/] {long}", highlight=False)
    configs = [config_of(p) for p in spec.points(scale, trace)]
    _check_capacity(configs)
    return configs


def _check_capacity(configs: list[Any], flags: dict[str, str] | None = None) -> None:
    """Each policy's cache (and its tiers) can be sized as asked (replay.sim.cache.capacity,
    .tiers), before any run; `replay plan-host` checks its points here too, its own flags
    named for simulate's in the messages (`flags`: simulate's name to the command's)."""
    from replay.sim.cache.tiers import TierError
    from replay.sim.runner import sim_capacity

    def key(c: Any) -> tuple[Any, ...]:
        return (c.policy, c.capacity_blocks, c.host_memory_gb, c.host_kv_share,
                c.external_memory_gb, c.external_store)  # fmt: skip

    def named(text: str) -> str:
        for ours, theirs in (flags or {}).items():
            text = text.replace(ours, theirs)
        return text

    for c in {key(c): c for c in configs}.values():
        try:
            sim_capacity(c)
        except TierError as e:
            fail(named(str(e)))
        except ValueError as e:
            fail(f"--capacity-blocks {c.capacity_blocks}: {e}" if c.capacity_blocks else str(e))


def _sweep(tr: Any, trace: str, configs: list[Any], out_dir: Path, workers: int,
           ray: str | None, as_json: bool) -> list[dict[str, Any]]:  # fmt: skip
    """The sweep in a child process, with a progress bar; its summary rows."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from analysis.summary import summarize_dir
    from replay.commands.sim_child import SweepFailed, SweepInterrupted, run_in_child
    from replay.runspec.sweep import manifest_spec
    from replay.sim.measures import shown
    from replay.sim.runner import SimResult
    from replay.sim.sweep import run_sweep

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
            progress.update(task, advance=1, description=f"{name}: hit {shown(s['hit_rate'])}")

        def work(on_result: Any) -> list[dict[str, Any]]:
            def summarize(res: SimResult) -> None:
                # summary.json's one producer is analysis.summary (the run table, the
                # report and the dashboard read the same figures).
                summarize_dir(out_dir / res.config.run_name)
                on_result(res)

            return run_sweep(
                tr, configs, out_dir, workers=workers, ray_address=ray,
                trace_source=str(trace), command=command, on_result=summarize,
                spec_of=partial(manifest_spec, trace=str(trace)),
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
    return rows


def _show(rows: list[dict[str, Any]], tr: Any, spec: SweepSpec, scale: float, out_dir: Path,
          as_json: bool) -> None:  # fmt: skip
    import orjson
    from rich.table import Table

    from replay.sim.measures import MEASURE_HINT, UNMEASURED_WHY, shown

    subagents = spec.workload.subagents
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
    tiered = any("host_hit_share" in r for r in rows)  # a host tier (issue 34)
    for col in (
        "policy",
        "sessions",
        "seed",
        "requests",
        "hit",
        *(("of it host",) if tiered else ()),
        "ideal",
        "redundant/req",
        "WS",
    ):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for r in rows:
        host = (shown(r.get("host_hit_share", 0.0)),) if tiered else ()
        table.add_row(
            r["policy"] + (f" ×{r['replicas']} {r['router']}" if r.get("router") else ""),
            str(r["sessions"]),
            str(r["seed"]),
            f"{r['requests']:,}",
            shown(r["hit_rate"]),
            *host,
            shown(r["ideal_hit_rate"]),
            shown(r["redundant_prefill_per_request"], ",.0f"),
            f"{r['working_set_ratio']:.2f}",
        )
    console.print(table)
    if blind := [r for r in rows if r["requests"] == 0]:
        err_console.print(
            f"[yellow]note:[/] {len(blind)} of {len(rows)} runs measured no request "
            f"({UNMEASURED_WHY}): their hit rates and misses show as – (empty in "
            f"summary.csv); {MEASURE_HINT}",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def _cmd(
        policies: str = typer.Option(
            ..., "--policies", help=f"Comma list of: {', '.join(POLICY_NAMES)}."
        ),
        trace: F.Trace = None,
        sessions: F.SessionsList = None,
        duration_min: F.DurationMin = None,
        window: F.Window = None,
        seed: F.Seed = None,
        gap_cap_s: F.GapCapS = None,
        warmup_s: F.WarmupS = None,
        subagents: F.Subagents = None,
        token_scale: F.TokenScale = None,
        preset: F.Preset = None,
        start_range: F.StartRange = None,
        start_at: F.StartAt = None,
        recycle_start: F.RecycleStart = None,
        model: F.Model = None,
        capacity_blocks: F.CapacityBlocks = None,
        host_memory_gb: F.HostMemoryGb = None,
        host_bandwidth_gbs: F.HostBandwidthGbs = None,
        external_memory_gb: F.ExternalMemoryGb = None,
        external_bandwidth_gbs: F.ExternalBandwidthGbs = None,
        external_store: F.ExternalStore = None,
        replicas: F.ReplicasList = None,
        router: F.RouterList = None,
        seeds: int = typer.Option(1, "--seeds", min=1, help="Seeds per point: --seed, +1, …"),
        timing: str = typer.Option("trace", "--timing", help="trace | engine"),
        out: Annotated[
            Path | None, typer.Option("--out", help="Output folder (default runs/sim-…).")
        ] = None,
        workers: int = typer.Option(1, "--workers", min=1, help="Local worker processes."),
        ray: str | None = typer.Option(
            None, "--ray", help="Ray cluster address ('local' starts one here)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the summary rows as JSON."),
    ) -> None:
        """Simulate hybrid-state cache policies over a trace: run directories + summary.csv."""
        from replay.rundir import new_run_id
        from replay.traces import sample_path

        given = dict(trace=trace, duration_min=duration_min, window=window, seed=seed,
                     gap_cap_s=gap_cap_s, warmup_s=warmup_s, subagents=subagents,
                     preset=preset, start_range=start_range, start_at=start_at,
                     recycle_start=recycle_start)  # fmt: skip
        engine = dict(profile=model, capacity_blocks=capacity_blocks, host_memory_gb=host_memory_gb,
                      host_bandwidth_gbs=host_bandwidth_gbs, external_memory_gb=external_memory_gb,
                      external_bandwidth_gbs=external_bandwidth_gbs,
                      external_store=external_store)  # fmt: skip
        spec = _spec(given, policies, sessions, seeds, timing, engine, (replicas, router))
        tr, scale = _load(spec, token_scale)
        _check_executors(spec.policies, ray)
        trace_text = spec.workload.trace or str(sample_path())
        configs = _configs(spec, scale, tr, trace_text, workers, ray)
        out_dir = _out_dir(out or Path("runs") / new_run_id("sim"))
        rows = _sweep(tr, trace_text, configs, out_dir, workers, ray, as_json)
        _show(rows, tr, spec, scale, out_dir, as_json)
