"""A live run from start to end: preflight, manifest, every engine at once, metrics scraping,
regular flushing, a clean stop, and the summary.

Each engine replays the same seeded workload with its own sessions, adapter (one connection
pool), prompt builder (its own generated ids) and ideal-prefix index. Records reach the run
directory's journal within `flush_interval_s` of completing, so a killed run keeps all but the
last second. The run ends after its duration (in-flight requests are cancelled and recorded
`cancelled`), when `stop` is set (Ctrl-C: status `interrupted`), or when a session crashes
(status `failed`). The summary comes from `RunPlan.summarize`, which the command layer sets to
the analysis layer's builder (`analysis.summary.summary_of_dir`): the executor never imports
the layer that reads its output.

Times in records are seconds from the run start in the engines' clock: wall seconds for real
engines (`clock_scale` 1); for emulators started with `--time-scale X`, which run X times
faster than the GPU they model, wall seconds × X (`clock_scale` X), so records read as the
modelled GPU's. With `time_scale` X the workload runs X times faster: gaps, the duration and
the window are divided by X in wall time. The manifest's `config.window` and
`config.duration_s` are in the records' clock; `config.replayed_window` in the trace's.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import replay
from replay.client import fanout, phases
from replay.client.config import EngineSpec
from replay.client.fleet import (
    FleetSpec,
    build_client_fleet,
    external_adapter_options,
    replica_names,
)
from replay.client.health import ENGINES_DOWN_END_S, EngineWatch
from replay.client.plan import RunPlan
from replay.client.session import EngineSessions, LiveStats, SessionPolicy
from replay.engines.adapters import make_adapter
from replay.engines.preflight import PreflightReport, preflight
from replay.engines.reset import reset_all
from replay.engines.scrape import MetricsScraper
from replay.prompts import PromptBuilder, TokenSpace
from replay.records import records_to_table
from replay.redact import Scrubber, redact_url
from replay.rundir import (
    REQUESTS,
    DiskFullError,
    RunStatus,
    RunWriter,
    read_journal,
    read_manifest,
    utc_now,
    write_table_atomic,
)
from replay.rundir_models import (
    EngineEntry,
    FidelityEntry,
    Manifest,
    RunConfig,
    RunSummary,
    Segment,
    TraceInfo,
    WorkloadCounts,
)
from replay.rundir_models import (
    Limits as LimitRecord,
)
from replay.traces.model import Trace
from replay.workload import DEFAULT_WORKLOAD, Workload


class PreflightFailed(Exception):
    """At least one engine is not fit for a live run; nothing was sent or written."""

    def __init__(self, reports: list[PreflightReport]):
        self.reports = reports
        super().__init__("\n".join(r.message() for r in reports if not r.ok))


@dataclass
class RunOutcome:
    run_dir: Path
    status: RunStatus
    summary: dict[str, Any] | None
    records: int
    reports: list[PreflightReport]
    stats: dict[str, LiveStats]
    # Why the run ended before its duration other than by a signal (every engine down).
    ended_by: str | None = None


Tick = Callable[[dict[str, LiveStats], float, float], None]  # stats, elapsed_s, duration_s


def _replica_urls(plan: RunPlan, e: EngineSpec) -> list[str]:
    fleet = plan.fleets.get(e.name)
    return list(fleet.urls) if fleet is not None else [e.url or ""]


async def check_engines(plan: RunPlan) -> list[PreflightReport]:
    """One report per engine; an engine of replicas is checked on every replica, and its
    report is the first failing replica's (else the first replica's)."""
    if plan.reset_cache:
        # Every engine must offer a reset: a first one now fails the run before any prompt
        # is sent (CacheResetError); the one that counts comes after preflight (run_live).
        await reset_all(_reset_targets(plan))
    jobs = [(i, u) for i, e in enumerate(plan.engines) for u in _replica_urls(plan, e)]
    reports = await asyncio.gather(
        *(
            preflight(
                u,
                plan.engines[i].kind,
                plan.engines[i].model,
                vocab_size=plan.engines[i].vocab_size,
                adapter_options=external_adapter_options(
                    plan.engines[i].kind,
                    plan.fleets.get(plan.engines[i].name),
                    plan.engines[i].adapter_options(),
                ),
            )
            for i, u in jobs
        )
    )
    out: list[PreflightReport] = []
    for i in range(len(plan.engines)):
        mine = [r for (j, _), r in zip(jobs, reports, strict=True) if j == i]
        fleet = plan.fleets.get(plan.engines[i].name)
        if fleet is not None and fleet.router == "external":
            for r in mine:
                _behind_router(r)
        out.append(next((r for r in mine if not r.ok), mine[0]))
    return out


def _behind_router(rep: PreflightReport) -> None:
    """A router in front (`--router external`) answers for the replicas but does not serve
    their /metrics (smg 1.13.0 keeps its own Prometheus port): there the metrics check is
    informative, and the run's cache figures come from the responses' cached tokens."""
    for c in rep.checks:
        if c.name == "metrics readable" and not c.ok:
            c.required = False
            c.detail = c.detail.rstrip(".") + " (a router in front of the replicas)."
            c.fix = "none needed: their counters are not scraped; hits come from the responses"


def _reset_targets(plan: RunPlan) -> list[tuple[str, str, str]]:
    """(name, kind, url) of every server whose prefix cache `--reset-cache` resets: each
    replica of an engine the client routes, else the engine's one URL."""
    return [(n, s.kind, u) for s in plan.engines for n, u in _metric_urls(plan, s).items()]


def _metric_urls(plan: RunPlan, s: EngineSpec) -> dict[str, str]:
    return replica_names(s.name, plan.fleets.get(s.name), s.url or "")


def _reset_entry(name: str, resets: dict[str, dict[str, object]]) -> dict[str, Any] | None:
    """The manifest's `cache_reset` of engine `name`: its reset, or its replicas' by name."""
    if name in resets:
        return dict(resets[name])
    mine = {k: v for k, v in resets.items() if k.startswith(f"{name}.")}
    return {"replicas": mine} if mine else None


def _engine_entry(
    spec: EngineSpec, rep: PreflightReport, fleet: FleetSpec | None = None
) -> EngineEntry:
    # Replicas the client routes each have the engine's GPUs: pricing counts them all. A
    # router in front hides how many it has (the spec's gpus stand for the whole fleet).
    replicas = len(fleet.urls) if fleet is not None and fleet.router != "external" else 1
    return EngineEntry(
        name=spec.name,
        kind=spec.kind,
        url=redact_url(spec.url),
        model=rep.model,
        gpus=spec.gpus * replicas,
        replicas=replicas if fleet is not None else None,
        fleet=_fleet_entry(fleet, spec.kind) if fleet is not None else None,
        gpu_type=spec.gpu_type,
        server_version=rep.server_version,
        flags=[f"{k}={v}" for k, v in sorted(rep.server_info.items()) if k != "engine_model"],
        # An emulator's engine model (replay.sim.engine.core): clock, budgets, capacity, scale.
        engine_model=rep.server_info.get("engine_model"),
        block_size=rep.block_size,
        hybrid=(
            {**rep.hybrid.as_dict(), "align_probe": rep.align_probe}
            if rep.hybrid is not None
            else None
        ),
        context_tokens=spec.context_tokens or rep.context_tokens,
        vocab_size=spec.vocab_size,
        preflight={c.name: c.ok for c in rep.checks},
        preflight_warnings=preflight_warnings(rep),
    )


def _fleet_entry(fleet: FleetSpec, kind: str) -> dict[str, Any]:
    from replay.fleet import make_router
    from replay.fleet.base import RouterContext

    if fleet.router == "external":
        text = external_adapter_options(kind, fleet, {}).get("text_prompt", False)
        return {
            "router": "external",
            "router_version": fleet.router_version,
            "prompt": "text" if text else "token ids",  # text: replay.token_words' spelling
        }
    r = make_router(fleet.router, RouterContext(len(fleet.urls)), fleet.params)
    return {
        "router": r.name,
        "router_version": f"replay {replay.__version__}",
        "router_source": r.source,
        "params": dict(r.p),
        "replica_urls": [redact_url(u) for u in fleet.urls],
    }


class ScaleConflict(ValueError):
    """Engines (or an engine and the user's flags) disagree on the clock or token scale."""


def announced_scale(reports: list[PreflightReport], key: str) -> float | None:
    """The `time_scale` or `token_scale` the engines announce in /get_server_info (emulators
    do; real engines do not: None). Engines announcing different values are a conflict."""
    found = [
        (r.url, float(v))
        for r in reports
        if isinstance(v := r.server_info.get(key), int | float) and not isinstance(v, bool)
    ]
    if len({v for _, v in found}) > 1:
        each = ", ".join(f"{u}: {v:g}" for u, v in found)
        raise ScaleConflict(
            f"the engines announce different {key}s in /get_server_info ({each}); their "
            "records would be in different clocks: start them with the same --time-scale "
            "(and --token-scale), or replay them in separate runs"
        )
    return found[0][1] if found else None


def preflight_warnings(rep: PreflightReport) -> list[str]:
    """Checks that are not required but failed (the warm-cache guard): what the run warns."""
    return [
        f"{c.name}: {c.detail}" + (f" Fix: {c.fix}" if c.fix else "")
        for c in rep.checks
        if not c.required and c.ok is False
    ]


def token_scale(reports: list[PreflightReport]) -> float:
    """How many times the replayed trace's token lengths were divided (emulators serving a
    scaled-down sample report it in /get_server_info); 1 for real engines. Analysis
    multiplies token throughputs by it, so per-GPU rates and prices read at full size.
    Engines that disagree give 1 here (a live run refuses them: `adopt_announced_clock`)."""
    try:
        return announced_scale(reports, "token_scale") or 1.0
    except ScaleConflict:
        return 1.0


def adopt_announced_clock(
    plan: RunPlan, reports: list[PreflightReport], user_time_scale: float | None
) -> tuple[RunPlan, str | None]:
    """Records are kept in the engines' clock: an emulator serving X times faster than the GPU
    it models announces `time_scale` X, and the run adopts it (clock and workload pace) unless
    the user's --time-scale says otherwise, which is an error. Returns the plan to run (a new
    one, its spec saying the adopted clock, when the announced scale was adopted) and a line
    for the user then; raises ScaleConflict."""
    announced = announced_scale(reports, "time_scale")
    announced_scale(reports, "token_scale")  # engines that disagree: ScaleConflict
    if announced is None or announced <= 0 or announced == plan.clock_scale:
        return plan, None
    if user_time_scale is not None and user_time_scale != announced:
        raise ScaleConflict(
            f"--time-scale {user_time_scale:g}, but the engines announce time_scale "
            f"{announced:g} in /get_server_info (an emulator started with --time-scale "
            f"{announced:g}); pass --time-scale {announced:g} or omit it"
        )
    spec = plan.spec
    if spec is not None:
        # The stored spec is the adopted one, so `--resume` replays in the engines' clock
        # (it passes the stored time_scale back as if the user had given it).
        spec = {**spec, "workload": {**spec.get("workload", {}), "time_scale": announced}}
    adopted = replace(plan, clock_scale=announced, time_scale=announced, spec=spec)
    return adopted, (
        f"the engines announce time_scale {announced:g} (emulators running {announced:g}× "
        f"faster than the GPU they model): the workload keeps pace and records read in "
        f"their clock"
    )


def scrubber_for(engines: list[EngineSpec]) -> Scrubber:
    """The run's secrets: URL userinfo and the values of the engines' API-key variables."""
    envs = [e.api_key_env or "OPENAI_API_KEY" for e in engines if e.kind == "openai"]
    envs += [e.api_key_env for e in engines if e.api_key_env]
    urls = [e.url for e in engines] + [u for e in engines for u in e.urls or []]
    return Scrubber.for_engines(urls, envs)


def build_manifest(plan: RunPlan, reports: list[PreflightReport], salt: int) -> Manifest:
    w, x = plan.workload, plan.time_scale
    c = plan.clock_scale  # records' seconds per wall second
    return Manifest(
        executor="live",
        command=scrubber_for(plan.engines).text(plan.command or shlex.join(sys.argv)),
        harness_version=replay.__version__,
        trace=TraceInfo(
            path=plan.trace.source,
            sha256=plan.trace.sha256,
            format=plan.trace.format,
            trajectories=len(plan.trace.trajectories),
            token_scale=plan.trace_token_scale,
        ),
        seed=w.seed,
        config=RunConfig(
            sessions=w.sessions,
            duration_s=w.duration_s / x * c,
            window=(w.window[0] / x * c, w.window[1] / x * c),
            time_scale=x,
            clock_scale=c,
            token_scale=token_scale(reports),
            seed=w.seed,
            gap_cap_s=w.gap_cap_s,
            warmup_s=w.warmup_s,
            start_range=(w.start_lo, w.start_hi),
            # The start rules as a simulated run records them: None where the replay's own.
            start_at=None if w.start_at == DEFAULT_WORKLOAD.start_at else w.start_at,
            recycle_start=(
                None if w.recycle_start == DEFAULT_WORKLOAD.recycle_start else w.recycle_start
            ),
            subagents=w.subagents,
            replayed_duration_s=w.duration_s,
            replayed_window=w.window,
            salt=salt,
            retries=plan.retries,
            backoff_s=plan.backoff_s,
            limits=LimitRecord(
                request_timeout_s=plan.limits.request_timeout_s,
                first_token_timeout_s=plan.limits.first_token_timeout_s,
                stall_timeout_s=plan.limits.stall_timeout_s,
            ),
            scrape_interval_s=plan.scrape_interval_s,
            # The command layer states the SLO (analysis.slo's defaults at least), so a
            # report never guesses; None leaves analysis to its defaults.
            slo=plan.slo,
        ),
        engines=[
            _engine_entry(s, r, plan.fleets.get(s.name))
            for s, r in zip(plan.engines, reports, strict=True)
        ],
        emulated=plan.emulated,
        spec=plan.spec,
    )


def resume_point(run_dir: Path, sessions: int) -> tuple[float, dict[int, int]]:
    """Where a resumed run picks up: the elapsed seconds recorded, and per session slot the
    next assignment ordinal (the interrupted trajectory is not continued: its generated ids
    are gone, so it could not be rewritten exactly)."""
    rows = read_journal(run_dir)
    elapsed = 0.0
    starts: dict[tuple[str, int], int] = {}
    for r in rows:
        for k in ("done_s", "first_token_s", "sent_s", "scheduled_s"):
            if r.get(k) is not None:
                elapsed = max(elapsed, float(r[k]))
        first = r.get("priming") or r.get("turn") == 0
        if r.get("agent") == "main" and r.get("attempt") == 0 and first:
            key = (str(r["engine"]), int(r["session"]))
            starts[key] = starts.get(key, 0) + 1
    ordinals: dict[int, int] = {}
    for (_, slot), n in starts.items():
        ordinals[slot] = max(ordinals.get(slot, 0), n)
    return elapsed, {s: ordinals.get(s, 0) for s in range(sessions)}


def _summary(plan: RunPlan, status: RunStatus) -> RunSummary | None:
    if plan.summarize is None:
        return None
    try:
        return plan.summarize(plan.out_dir, status)
    except Exception as e:  # the records are safe; a summary bug must not lose the run
        return RunSummary(error=f"summary not built: {type(e).__name__}: {e}")


async def run_live(
    plan: RunPlan,
    *,
    stop: asyncio.Event | None = None,
    on_tick: Tick | None = None,
    reports: list[PreflightReport] | None = None,
) -> RunOutcome:
    """Preflight (unless `reports` are given), then replay until the duration ends or `stop`."""
    reports = reports if reports is not None else await check_engines(plan)
    if not all(r.ok for r in reports):
        raise PreflightFailed(reports)
    # Preflight's probes left their prompts cached: the measured phase starts cold from here.
    resets = await phases.reset_caches(_reset_targets(plan)) if plan.reset_cache else {}
    stop = stop or asyncio.Event()
    workload = Workload(plan.trace, plan.workload)  # a bad trace fails before anything is written
    salt = plan.salt if plan.salt is not None else secrets.randbits(62)
    manifest = build_manifest(plan, reports, salt)
    for entry in manifest.engines:
        if (done := _reset_entry(entry.name, resets)) is not None:
            entry.cache_reset = done
    first_ordinals: dict[int, int] = {}
    elapsed0 = 0.0
    if plan.resume:
        old = read_manifest(plan.out_dir)
        segments = list(old.segments) or [Segment(start=old.start)]
        segments.append(Segment(start=utc_now(), salt=salt))
        manifest = old.model_copy(update={"segments": segments, "status": "running"})
    # The journal is flushed every second on the loop's thread (cheap); requests.parquet is
    # rebuilt in a worker thread (`_refresh_parquet`): rebuilding it from tens of thousands of
    # rows takes long enough to skew every in-flight request's timestamps.
    writer = RunWriter(
        plan.out_dir, manifest, parquet_interval_s=math.inf, scrubber=scrubber_for(plan.engines)
    ).open(resume=plan.resume)
    if plan.resume:
        # Under the run's lock: the part files' unmerged lines join the journal first, so
        # the resume point counts every trajectory the killed run's workers started.
        fanout.fold_parts(writer)
        elapsed0, first_ordinals = resume_point(plan.out_dir, plan.workload.sessions)
    # Huge prompts are built in worker threads; a 1 ms switch interval bounds how long the
    # event loop's thread waits for the GIL behind them (the default is 5 ms).
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, 0.001))
    policy = SessionPolicy(
        time_scale=plan.time_scale,
        clock_scale=plan.clock_scale,
        retries=plan.retries,
        backoff_s=plan.backoff_s,
    )
    pool = None
    if fanout.uses_workers(plan):
        pool = fanout.build_pool(plan, reports, salt, first_ordinals, policy)
        try:
            await asyncio.to_thread(pool.start)  # every worker ready before the clock starts
        except BaseException:
            await asyncio.to_thread(pool.stop)
            writer.close("failed")
            raise
    snapshot_urls = {
        k: v for s in plan.engines if s.kind != "openai" for k, v in _metric_urls(plan, s).items()
    }
    with contextlib.suppress(OSError):  # a snapshot is evidence, never a reason to stop
        await phases.snapshot(snapshot_urls, plan.out_dir, "run-start")
    t0 = time.perf_counter_ns() - int(elapsed0 / plan.clock_scale * 1e9)
    if pool is not None:
        pool.go(fanout.timing(t0, plan.duration_wall_s))
    runners: dict[str, EngineSessions] = {}
    for spec, rep in zip(plan.engines, reports, strict=True):
        if pool is not None:
            break
        adapter = make_adapter(
            spec.kind, spec.url or "", rep.model, limits=plan.limits, **spec.adapter_options()
        )
        fleet = None
        if (fspec := plan.fleets.get(spec.name)) is not None:
            await adapter.close()
            fleet = build_client_fleet(
                spec.name, spec.kind, fspec, rep.model, limits=plan.limits,
                adapter_options=spec.adapter_options(), seed=plan.workload.seed,
            )  # fmt: skip
        runners[spec.name] = EngineSessions(
            spec.name,
            adapter,
            workload,
            PromptBuilder(TokenSpace(spec.vocab_size, salt)),
            t0_ns=t0,
            emit=writer.add,
            context_tokens=spec.context_tokens or rep.context_tokens,
            policy=policy,
            first_ordinals=first_ordinals,
            fleet=fleet,
            align_block=rep.hybrid.align_block if rep.hybrid is not None else None,
        )
    polled = {
        k: v
        for s in plan.engines
        if s.kind != "openai"
        for k, v in replica_names(s.name, plan.fleets.get(s.name), s.url or "").items()
    }
    scraper = MetricsScraper(
        polled,
        t0,
        plan.scrape_interval_s,
        clock_scale=plan.clock_scale,
    )
    scrape_stop = asyncio.Event()
    # A resumed run keeps its earlier events.
    events0 = [e.model_dump() for e in manifest.events]
    watch = EngineWatch(
        polled,
        t0,
        plan.clock_scale,
        plan.health_interval_s,
        on_change=lambda evs: writer.update_manifest(events=events0 + evs),
        logs=plan.engine_logs,
    )
    watch_task = asyncio.create_task(watch.run(scrape_stop))
    # Scrapes at the window's edges (the end a moment early, before sessions are cancelled).
    w = plan.workload
    marks = [w.window[0] / plan.time_scale, max(w.window[1] / plan.time_scale - 0.25, 0.0)]
    scrape_task = asyncio.create_task(scraper.run(scrape_stop, [m for m in marks if m > 0]))
    # A resumed run's window edges already passed keep their first segment's snapshots.
    resumed_at = elapsed0 / plan.clock_scale
    edges = [(p, m) for p, m in zip(phases.WINDOW_PHASES, marks, strict=True) if m >= resumed_at]
    snap_task = asyncio.create_task(
        phases.window_snapshots(snapshot_urls, plan.out_dir, t0, edges, scrape_stop)
    )
    tasks = {
        name: asyncio.create_task(r.run(), name=f"engine:{name}") for name, r in runners.items()
    }
    stats = {n: r.stats for n, r in runners.items()}
    if pool is not None:
        stats = {
            s.name: LiveStats(sessions=w.sessions, clock_scale=plan.clock_scale)
            for s in plan.engines
        }
        merge = fanout.merge_loop(pool, writer, stats, plan.flush_interval_s)
        tasks = {"workers": asyncio.create_task(merge, name="workers")}
    refresh_stop = asyncio.Event()
    refresher = asyncio.create_task(
        _refresh_parquet(plan.out_dir, refresh_stop, plan.parquet_interval_s, writer)
    )
    end_ns = t0 + int(plan.duration_wall_s * 1e9)
    status: RunStatus = "completed"
    try:
        status = await _wait(plan, writer, tasks, stats, stop, t0, end_ns, on_tick, watch)
    except asyncio.CancelledError:
        status = "interrupted"
    finally:
        for t in tasks.values():
            t.cancel()
        results = await asyncio.gather(*tasks.values(), return_exceptions=True)
        crashed = [
            r
            for r in results
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)
        ]
        if pool is not None:
            await fanout.finish(pool, writer, stats, plan.keep_parts)
        if crashed and status == "completed":
            status = "failed"
        refresh_stop.set()
        await refresher  # lets a rebuild in progress finish before close() writes the file
        scrape_stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(scrape_task, 15)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(watch_task, 5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(snap_task, 15)
        with contextlib.suppress(Exception):
            await phases.snapshot(snapshot_urls, plan.out_dir, "run-end")
        for r in runners.values():
            await r.close()
        writer.flush(force_parquet=True)
        if scraper.num_rows:
            writer.write_server_metrics(scraper.table())
        if crashed:
            writer.update_manifest(error=f"{type(crashed[0]).__name__}: {crashed[0]}")
        _record_faults(writer, plan, events0 + watch.events + _missed_outages(plan, watch))
        reuse = (
            fanout.worker_counts(pool, workload, list(stats))
            if pool is not None
            else reuse_counts(plan.trace, runners)
        )
        writer.update_manifest(workload=reuse)
        ended_by = _ended_by_outage(plan, watch, t0, status, stop)
        if ended_by is not None:
            writer.update_manifest(notes=[*writer.manifest.notes, ended_by])
        summary = _summary(plan, status)
        if summary is not None:
            if note := reuse_note(reuse):
                summary.notes.append(note)
            writer.manifest.replay_fidelity = replay_fidelity(summary)
            if status == "completed" and (_degraded(summary) or watch.down_at_end()):
                status = "degraded"
        writer.close(status, summary)
        sys.setswitchinterval(switch)
    # The outcome carries summary.json's content (what the final table reads).
    out = summary.model_dump(mode="json") if summary is not None else None
    return RunOutcome(plan.out_dir, status, out, writer.num_records, reports, stats, ended_by)


def _record_faults(writer: RunWriter, plan: RunPlan, events: list[dict[str, Any]]) -> None:
    """Engine-down events and the emulators this harness restarted, into the manifest (where
    the summary and the report read them)."""
    fields: dict[str, Any] = {}
    if events:
        fields["events"] = events
    restarts = {n: k for n, k in (plan.restarts() if plan.restarts else {}).items() if k}
    if restarts:
        fields["emulator_restarts"] = restarts
    if fields:
        writer.update_manifest(**fields)


def _missed_outages(plan: RunPlan, watch: EngineWatch) -> list[dict[str, Any]]:
    """Engine-down events for restarts of owned emulators that the health polls missed (the
    emulator died and served again between two polls)."""
    out: list[dict[str, Any]] = []
    for name, spans in (plan.outages() if plan.outages else {}).items():
        seen = sum(1 for e in watch.events if e["engine"] == name)
        for died, back in spans[seen:]:
            out.append(
                {
                    "event": "engine_down",
                    "engine": name,
                    "url": watch.events_url(name),
                    "start_s": watch.at_s(died),
                    "end_s": None if back is None else watch.at_s(back),
                    "detail": "the emulator died and was restarted (seen by its supervisor)",
                }
            )
    return out


def _ended_by_outage(
    plan: RunPlan, watch: EngineWatch, t0: int, status: RunStatus, stop: asyncio.Event
) -> str | None:
    """The note of a run that ended early because every engine stayed down (None for any
    other ending: a signal sets `stop`), with each engine's last logged error where its log
    was given."""
    if status != "interrupted" or stop.is_set():
        return None
    at = (time.perf_counter_ns() - t0) / 1e9
    errors = [f"{e['engine']}: {e['engine_error']}" for e in watch.events if e.get("engine_error")]
    logged = f" (last error: {'; '.join(errors)})" if errors else ""
    return (
        f"ended at {at:.0f} s of {plan.duration_wall_s:.0f} s: every engine had been down for "
        f"{ENGINES_DOWN_END_S:g} s{logged}; the records so far are kept; restart the engine, "
        f"then continue with `replay run --resume {plan.out_dir}`"
    )


def _degraded(summary: RunSummary) -> bool:
    return any(e.error_flagged for e in summary.engines.values())


def replay_fidelity(summary: RunSummary) -> dict[str, FidelityEntry]:
    """The manifest's "Replay fidelity" record, per engine: the drift counts and the
    warm-start check from the summary (analysis.fidelity), so the manifest alone says how
    faithfully the run replayed the trace."""
    keys = ("drift", "warm_start_hit_rate", "warm_start_excess_hit_rate", "warm_start_flagged")
    out: dict[str, FidelityEntry] = {}
    for name, e in summary.engines.items():
        out[name] = FidelityEntry.model_validate({k: e.get(k) for k in keys})
    return out


def reuse_counts(trace: Trace, runners: dict[str, EngineSessions]) -> WorkloadCounts:
    """How many trajectories each engine started, and how many replayed a trajectory the
    run had replayed before (each such replay is its own conversation: other tokens)."""
    return WorkloadCounts(
        trajectories=len(trace.trajectories),
        assignments={n: r.stats.assignments for n, r in runners.items()},
        reused_assignments={n: r.stats.reused_assignments for n, r in runners.items()},
    )


def reuse_note(reuse: WorkloadCounts) -> str | None:
    """The run's note when it had to replay trajectories again (None when it did not)."""
    by_engine = reuse.reused_assignments
    reused = max(by_engine.values(), default=0) if isinstance(by_engine, dict) else 0
    if not reused:
        return None
    started_by = reuse.assignments
    started = max(started_by.values(), default=0) if isinstance(started_by, dict) else 0
    return (
        f"the trace's {reuse.trajectories} trajectories were not enough: up to {reused} of "
        f"{started} trajectories started replayed one again (as its own conversation, with "
        f"its own tokens); a trace with more trajectories avoids it"
    )


async def _refresh_parquet(
    run_dir: Path, stop: asyncio.Event, interval_s: float = 15.0, writer: RunWriter | None = None
) -> None:
    """Keep requests.parquet readable mid-run: rebuild it from the journal off the loop. A
    full disk stops the rebuilds and is handed to the writer (which ends the run)."""

    def rebuild() -> None:
        rows = read_journal(run_dir)
        if rows:
            try:
                write_table_atomic(run_dir / REQUESTS, records_to_table(rows))
            except DiskFullError as e:
                if writer is None:
                    raise
                writer.disk_full = writer.disk_full or e

    while not stop.is_set() and (writer is None or writer.disk_full is None):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
        if not stop.is_set():
            await asyncio.to_thread(rebuild)


async def _wait(
    plan: RunPlan,
    writer: RunWriter,
    tasks: dict[str, asyncio.Task[None]],
    stats: dict[str, LiveStats],
    stop: asyncio.Event,
    t0: int,
    end_ns: int,
    on_tick: Tick | None,
    watch: EngineWatch,
) -> RunStatus:
    """Flush records every interval until the run's end, a stop request, a crash or every
    engine down for ENGINES_DOWN_END_S."""
    last_heartbeat = 0.0
    while True:
        now = time.perf_counter_ns()
        if now >= end_ns:
            return "completed"
        if stop.is_set() or watch.all_down_s() >= ENGINES_DOWN_END_S:
            return "interrupted"
        if any(t.done() for t in tasks.values()):
            return "failed"
        writer.flush()
        if writer.disk_full is not None:
            return "failed"  # close() writes the manifest so and raises the error
        elapsed = (now - t0) / 1e9
        if elapsed - last_heartbeat >= 5.0:
            # A heartbeat lets readers tell a killed run (stale heartbeat) from a live one.
            writer.update_manifest(heartbeat_s=round(elapsed, 3), heartbeat=utc_now())
            last_heartbeat = elapsed
        if on_tick is not None:
            on_tick(stats, elapsed, plan.duration_wall_s)
        wait = min(plan.flush_interval_s, (end_ns - now) / 1e9)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(wait, 0.0))
