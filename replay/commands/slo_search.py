"""`replay slo-search`: the largest load (concurrent sessions) whose SLO holds, per engine
policy, simulated with engine timing, printed as agents per GPU (issue 35, point 3).

The search and its objective are `analysis.slo_search` (bracketing by doubling, then
bisection on whole session counts; a load holds when at least `--slo-share` of its measured
requests meet the `--slo` thresholds). Each probe is one simulated run on the first seed;
the answer is then rerun on `--confirm-seeds` seeds, written as run directories under
`--out` with `slo_search.json` beside them, which `replay report OUT` shows.

With `--engines` (emulated) or `--endpoint NAME=URL` (live) instead of `--policies`, each probe
is one `replay run` of one engine through its own resolution and executor
(`replay.commands.slo_probe`), kept as a run directory under `OUT/probes/`."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replay.commands.common import console, err_console, fail
from replay.runspec import flags as F
from replay.sim.cache.policies import POLICY_NAMES

if TYPE_CHECKING:
    from analysis.slo import Slo
    from analysis.slo_search import EngineAnswer, Probe, SloSearch
    from replay.commands.slo_probe import RunProbes
    from replay.sim.runner import SimConfig, SimResult
    from replay.traces.model import Trace

DEFAULT_START = 8
DEFAULT_LIMIT = 256
DEFAULT_CONFIRM = 5
SLO_HELP = (
    "The tier: thresholds over the defaults ttft=6,itl=0.175,e2e=none (seconds; itl bounds "
    "the output speed, 1/itl tok/s per agent); 'none' drops one."
)


def _check_bounds(share: float, start: int, limit: int, confirm: int) -> None:
    if not 0 < share <= 1:
        fail(f"--slo-share: {share:g} is not a share in (0, 1] (e.g. 0.9: 90% of requests)")
    if start < 1:
        fail(f"--start: must be at least 1 session (got {start})")
    if limit < start:
        fail(f"--max-sessions: {limit} is below --start {start}; give a larger limit")
    if confirm < 1:
        fail(f"--confirm-seeds: must be at least 1 (got {confirm})")


def _slo(text: str | None) -> Slo:
    from analysis.slo import SloError, parse_slo

    try:
        slo = parse_slo(text or "")
    except SloError as e:
        fail(str(e))
    if slo.ttft_s is None and slo.itl_s is None and slo.e2e_s is None:
        fail(f"--slo '{text}': sets no request bound (ttft, itl or e2e); the search needs one")
    return slo


def _share(res: SimResult, slo: Slo) -> tuple[float, int]:
    import pandas as pd

    from analysis.slo_search import slo_share

    df = pd.DataFrame([r.as_dict() for r in res.records])
    if df.empty:
        return float("nan"), 0
    return slo_share(df, res.config.window, slo, res.config.token_scale)


def _probe(tr: Trace, cfg: SimConfig, slo: Slo, threshold: float) -> Probe:
    from analysis.slo_search import Probe
    from replay.sim.sweep import results

    (res,) = list(results(tr, [cfg], 1))
    share, n = _share(res, slo)
    return Probe(cfg.sessions, cfg.seed, n, share, bool(n and share >= threshold))


def _search_one(tr: Trace, base: SimConfig, slo: Slo, threshold: float, start: int,
                limit: int) -> tuple[int, bool, list[Probe]]:  # fmt: skip
    from analysis.slo_search import search_largest
    from replay.commands.slo_probe import say_probe

    probes: list[Probe] = []

    def meets(n: int) -> bool:
        p = _probe(tr, dataclasses.replace(base, sessions=n), slo, threshold)
        probes.append(p)
        say_probe(base.policy, p)
        return p.met

    found = search_largest(meets, start, limit)
    return found.answer, found.capped, probes


def _mark_slo(run_dir: Path, slo: Slo) -> None:
    """The run's manifest names the search's SLO (`config.slo`), so its summary.json (and
    the report) judge against it, not the defaults."""
    import orjson

    from replay.rundir import MANIFEST, write_json_atomic

    path = run_dir / MANIFEST
    data = orjson.loads(path.read_bytes())
    data.setdefault("config", {})["slo"] = slo.model_dump()
    write_json_atomic(path, data)


def _confirm(tr: Trace, trace: str, configs: list[SimConfig], slo: Slo, threshold: float,
             out: Path, workers: int) -> dict[tuple[str, int], tuple[Probe, SimResult]]:  # fmt: skip
    """The answers rerun on every confirmation seed, written as run directories under
    `out` and summarised there."""
    from analysis.slo_search import Probe
    from analysis.summary import summarize_dir
    from replay.runspec.sweep import manifest_spec
    from replay.sim.sweep import run_sweep

    got: dict[tuple[str, int], tuple[Probe, SimResult]] = {}

    def on_result(res: SimResult) -> None:
        run_dir = out / res.config.run_name
        _mark_slo(run_dir, slo)
        summarize_dir(run_dir)
        share, n = _share(res, slo)
        c = res.config
        met = bool(n and share >= threshold)
        got[c.policy, c.seed] = (Probe(c.sessions, c.seed, n, share, met), res)

    command = "replay " + shlex.join(sys.argv[1:])
    run_sweep(tr, configs, out, workers=workers, trace_source=trace, command=command,
              on_result=on_result, spec_of=lambda c: manifest_spec(c, trace))  # fmt: skip
    return got


def _band(answer: EngineAnswer, results: list[SimResult]) -> dict[str, Any] | None:
    """The answer's band over its confirmation seeds; a seed that measured no request has no
    point in it (`replay.sim.band.seed_point`; its probe missed the SLO). None: no seed has."""
    from replay.band import Band, EngineBand
    from replay.sim.band import seed_point

    ordered = sorted(results, key=lambda r: r.config.seed)
    points = [p for r in ordered if (p := seed_point(r.config.seed, r.summary)) is not None]
    if not points:
        return None
    band = Band(
        sessions=answer.sessions,
        seeds=[p.seed for p in points],
        timing="engine",
        executor="sim-engine",
        engines=[EngineBand(answer.engine, answer.policy, points)],
    )
    return band.to_json()


def _unmeasured(e: EngineAnswer) -> list[str]:
    """Notes on an engine's probes and confirmation seeds that measured no request: with no
    share to judge, each fails the SLO (`Probe.met`), which the table alone cannot tell from
    a load that was too high."""
    from replay.sim.measures import MEASURE_HINT as fix
    from replay.sim.measures import UNMEASURED_WHY as why

    blind = [p for p in e.probes if p.requests == 0]
    loads = ", ".join(str(p.sessions) for p in blind)
    notes = []
    if blind and len(blind) == len(e.probes):
        notes.append(
            f"{e.engine}: no probe measured a request ({why}), so none could meet the SLO "
            f"(tried {loads} sessions); {fix}"
        )
    elif blind:
        notes.append(
            f"{e.engine}: the probes at {loads} sessions measured no request ({why}) and "
            f"count as failing the SLO; {fix}"
        )
    if seeds := [str(p.seed) for p in e.confirm if p.requests == 0]:
        notes.append(
            f"{e.engine}: confirmation seed(s) {', '.join(seeds)} measured no request at "
            f"{e.sessions} sessions ({why}): each counts as missing the SLO and has no point "
            "in the band"
        )
    return notes


def _show(search: SloSearch, out: Path) -> None:
    from rich.table import Table

    from analysis.slo_search import search_rows

    table = Table(title=f"Largest load meeting the SLO, {search.how}: {search.tier}")
    for col in ("engine", "sessions", "GPUs", "agents/GPU", "held", "SLO share", "hit rate"):
        table.add_column(col, justify="left" if col == "engine" else "right")

    def span(lo: float, hi: float) -> str:
        return f"{lo:.0%}–{hi:.0%}" if lo == lo and hi == hi else "–"

    for row in search_rows(search):
        table.add_row(
            row["engine"],
            f"{row['sessions']}{' (limit)' if row['capped'] else ''}",
            str(row["gpus"]),
            f"{row['agents_per_gpu']:.2f}",
            row["held"],
            span(row["share_min"], row["share_max"]),
            span(row["hit_min"], row["hit_max"]),
        )
    console.print(table)
    for e in search.engines:
        for note in _unmeasured(e):
            err_console.print(f"[yellow]note:[/] {note}", highlight=False)
        if e.sessions == 0:
            if any(p.requests for p in e.probes):  # else a note above says why
                err_console.print(
                    f"[yellow]note:[/] {e.engine}: not even one session met the SLO",
                    highlight=False,
                )
        elif e.capped:
            err_console.print(
                f"[yellow]note:[/] {e.engine}: --max-sessions {search.limit} itself met the "
                "SLO; the edge may lie above it",
                highlight=False,
            )
        elif e.confirm and e.held < len(e.confirm):
            err_console.print(
                f"[yellow]note:[/] {e.engine}: {len(e.confirm) - e.held} of {len(e.confirm)} "
                f"seeds missed the SLO at {e.sessions} sessions: the edge moves with the "
                "seed; read the answer with its band",
                highlight=False,
            )
    err_console.print(
        f"held: confirmation seeds ({', '.join(map(str, search.seeds))}) on which the answer "
        "met the SLO; SLO share and hit rate: their range over those seeds. Probed by: "
        f"{search.executor}. Probes, runs and slo_search.json: {out}; the paper-ready report: "
        f"replay report {out}",
        highlight=False,
    )


def run_search(
    given: dict[str, Any], policies: str, engine: dict[str, Any], slo: Slo, threshold: float,
    start: int, limit: int, confirm: int, workers: int, token_scale: float | None, out: Path,
) -> SloSearch:  # fmt: skip
    """The search for every policy, its confirmation runs and `slo_search.json` in `out`."""
    from analysis.slo_search import EngineAnswer, SloSearch, write_search
    from replay.commands.scale_guard import ScaleError, check_sim_work
    from replay.commands.simulate import _check_capacity, _check_executors, _load, _out_dir, _spec
    from replay.profiles import load_profile
    from replay.runspec.fields import seed_span_error
    from replay.runspec.sweep import config_of
    from replay.traces import sample_path

    spec = _spec(given, policies, str(start), 1, "engine", engine, (None, None))
    tr, scale = _load(spec, token_scale)
    _check_executors(spec.policies, None)  # a native policy's engine is installed
    trace = spec.workload.trace or str(sample_path())
    bases = [config_of(p) for p in spec.points(scale, trace)]
    if (why := seed_span_error(spec.workload.seed, confirm, "--confirm-seeds")) is not None:
        fail(why)
    _check_capacity(bases)
    try:
        check_sim_work(tr, [limit], len(bases) * confirm, bases[0].duration_s, workers, confirm)
    except ScaleError as e:
        fail(str(e).replace("--sessions", "--max-sessions").replace("--seeds", "--confirm-seeds"))
    out = _out_dir(out)
    answers: list[EngineAnswer] = []
    for base in bases:
        err_console.print(f"{base.policy}: searching {start}..{limit} sessions", highlight=False)
        n, capped, probes = _search_one(tr, base, slo, threshold, start, limit)
        gpus = load_profile(base.model).gpus
        answers.append(EngineAnswer(base.policy, base.policy, gpus, n, capped, probes))
    seeds = [bases[0].seed + k for k in range(confirm)]
    configs = [
        dataclasses.replace(b, sessions=a.sessions, seed=s)
        for b, a in zip(bases, answers, strict=True)
        if a.sessions > 0
        for s in seeds
    ]
    if configs:
        err_console.print(f"confirming each answer on {confirm} seed(s) → {out}", highlight=False)
        got = _confirm(tr, trace, configs, slo, threshold, out, workers)
        for a in answers:
            if a.sessions > 0:
                a.confirm = [got[a.policy, s][0] for s in seeds]
                a.band = _band(a, [got[a.policy, s][1] for s in seeds])
    search = SloSearch(
        slo=slo.model_dump(),
        threshold=threshold,
        seed=bases[0].seed,
        seeds=seeds,
        start=start,
        limit=limit,
        duration_s=bases[0].duration_s,
        window=(float(bases[0].window[0]), float(bases[0].window[1])),
        trace=trace,
        engines=answers,
    )
    write_search(out, search)
    return search


def run_probe_search(probes: RunProbes, slo: Slo, threshold: float, start: int, limit: int,
                     confirm: int, out: Path) -> SloSearch:  # fmt: skip
    """The search through `replay run` (emulated or live engines, `slo_probe`): each engine's
    probes under `out/probes`, its confirmation runs in `out`, and `slo_search.json`."""
    from analysis.slo_search import SloSearch, write_search
    from replay.commands.simulate import _out_dir
    from replay.commands.slo_probe import confirm_engine, search_engine
    from replay.runspec.fields import seed_span_error

    if (why := seed_span_error(probes.seed, confirm, "--confirm-seeds")) is not None:
        fail(why)
    out = _out_dir(out)
    answers = []
    for name in probes.flags:
        err_console.print(
            f"{name}: searching {start}..{limit} sessions, {probes.executor} ({out}/probes)",
            highlight=False,
        )
        answers.append(search_engine(probes, name, probes.seed, threshold, start, limit, out))
    seeds = [probes.seed + k for k in range(confirm)]
    for a in answers:
        if a.sessions > 0:
            err_console.print(
                f"confirming {a.engine} at {a.sessions} sessions on {confirm} seed(s) → {out}",
                highlight=False,
            )
            confirm_engine(probes, a, seeds, threshold, out)
    search = SloSearch(
        slo=slo.model_dump(), threshold=threshold, seed=probes.seed, seeds=seeds, start=start,
        limit=limit, duration_s=probes.duration_s, window=probes.window, trace=probes.trace,
        engines=answers, executor=probes.executor,
    )  # fmt: skip
    write_search(out, search)
    return search


# The search's own options (the workload's and the engine's are the run spec's: F).
Policies = Annotated[
    str | None,
    typer.Option("--policies", help=f"Simulated: comma list of: {', '.join(POLICY_NAMES)}."),
]
Engines = Annotated[
    str | None,
    typer.Option(
        "--engines",
        help="Emulated: engines each probe runs as `replay run --engines` does (flashstate, "
        "vllm, sglang), one engine per run.",
    ),
]
Endpoint = Annotated[
    list[str] | None,
    typer.Option(
        "--endpoint",
        help="Live: NAME=URL (or NAME=KIND@URL) per engine, as `replay run`; repeat.",
    ),
]
SloText = Annotated[str | None, typer.Option("--slo", help=SLO_HELP)]
SloShare = Annotated[
    float,
    typer.Option("--slo-share", help="Share of measured requests that must meet the SLO (0.9)."),
]
Start = Annotated[
    int, typer.Option("--start", help=f"Sessions of the first probe ({DEFAULT_START}).")
]
MaxSessions = Annotated[
    int, typer.Option("--max-sessions", help=f"The most sessions tried ({DEFAULT_LIMIT}).")
]
ConfirmSeeds = Annotated[
    int,
    typer.Option(
        "--confirm-seeds",
        help=f"Seeds the answer is rerun on: --seed, +1, … ({DEFAULT_CONFIRM}).",
    ),
]
Out = Annotated[Path | None, typer.Option("--out", help="Output folder (default runs/slo-…).")]
Workers = Annotated[int, typer.Option("--workers", min=1, help="Workers for confirmation.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print slo_search.json's content.")]


def _probes(policies: str | None, engines: str | None, endpoint: list[str], given: dict[str, Any],
            run: dict[str, Any], slo: str | None, start: int, limit: int) -> RunProbes | None:  # fmt: skip
    """Which executor probes (None: the simulator, --policies), refusing the flags that do
    not fit it; for emulated or live engines, their `replay run` flags resolved
    (`slo_probe.plan_probes`). `run`: --time-scale, --token-scale, --model, --capacity-blocks,
    --workers."""
    from replay.commands.slo_probe import plan_probes
    from replay.runspec.live import RunFlags

    through_run = engines is not None or bool(endpoint)
    if policies is not None and through_run:
        fail(
            "--policies: names simulated policies; drop it to search the engines of --engines "
            "(emulated) or --endpoint (live), or drop those to simulate"
        )
    if policies is None and not through_run:
        fail("give --policies (simulated), --engines (emulated) or --endpoint (live engines)")
    if not through_run:
        if run["time_scale"] is not None:
            fail(
                "--time-scale: paces emulated (--engines) or live (--endpoint) probes; a "
                "simulated search (--policies) has no wall clock; drop it"
            )
        return None
    if run["model"] is not None:
        fail(
            "--model: sets the simulated policies' profile; emulated engines take "
            "configs/workloads/default.yaml's model (as `replay run`) and live ones serve their "
            "own; drop it"
        )
    if run["workers"] != 1:
        fail("--workers: runs simulated confirmations side by side; emulated and live probes "
             "run one `replay run` at a time; drop it")  # fmt: skip
    wl = {**given, "time_scale": run["time_scale"], "token_scale": run["token_scale"]}
    base = RunFlags(engines, endpoint, None, None, wl, {}, slo, None, run["capacity_blocks"])
    return plan_probes(engines, endpoint, base, start, limit)


def register(app: typer.Typer) -> None:
    @app.command("slo-search")
    def _cmd(
        policies: Policies = None,
        engines: Engines = None,
        endpoint: Endpoint = None,
        slo: SloText = None,
        slo_share: SloShare = 0.9,
        start: Start = DEFAULT_START,
        max_sessions: MaxSessions = DEFAULT_LIMIT,
        confirm_seeds: ConfirmSeeds = DEFAULT_CONFIRM,
        trace: F.Trace = None,
        duration_min: F.DurationMin = None,
        window: F.Window = None,
        seed: F.Seed = None,
        gap_cap_s: F.GapCapS = None,
        warmup_s: F.WarmupS = None,
        subagents: F.Subagents = None,
        token_scale: F.TokenScale = None,
        time_scale: F.TimeScale = None,
        model: F.Model = None,
        capacity_blocks: F.CapacityBlocks = None,
        out: Out = None,
        workers: Workers = 1,
        as_json: AsJson = False,
    ) -> None:
        """The largest load meeting an SLO per policy or engine, as agents per GPU."""
        import orjson

        from replay.rundir import new_run_id

        _check_bounds(slo_share, start, max_sessions, confirm_seeds)
        tier = _slo(slo)
        given = dict(trace=trace, duration_min=duration_min, window=window, seed=seed,
                     gap_cap_s=gap_cap_s, warmup_s=warmup_s, subagents=subagents)  # fmt: skip
        run = dict(time_scale=time_scale, token_scale=token_scale, model=model,
                   capacity_blocks=capacity_blocks, workers=workers)  # fmt: skip
        probes = _probes(policies, engines, endpoint or [], given, run, slo, start, max_sessions)
        folder = out or Path("runs") / new_run_id("slo")
        try:
            if probes is not None:
                search = run_probe_search(probes, tier, slo_share, start, max_sessions,
                                          confirm_seeds, folder)  # fmt: skip
            else:
                engine = {"profile": model, "capacity_blocks": capacity_blocks}
                search = run_search(given, policies or "", engine, tier, slo_share, start,
                                    max_sessions, confirm_seeds, workers, token_scale, folder)  # fmt: skip
        except KeyboardInterrupt:
            err_console.print(
                f"[yellow]interrupted:[/] the search stopped; {folder} holds the confirmation "
                "runs finished so far and no slo_search.json",
                highlight=False,
            )
            raise typer.Exit(130) from None
        if as_json:
            sys.stdout.write(
                orjson.dumps(search.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n"
            )
            return
        _show(search, folder)


__all__ = ["register", "run_probe_search", "run_search"]
