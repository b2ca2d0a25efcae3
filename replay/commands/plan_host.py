"""`replay plan-host`: how much host memory, split how, for a trace, a load and a GPU cache
(issue 34, point 5; docs/cache-tiers.md, "The planner").

It sweeps host-memory size (`--host-gb`) and, for SGLang HiCache, the share of it given to
the host KV pool rather than the host state pool (`--kv-share`; `EngineShape.host_kv_share`,
`replay.sim.cache.tiers`), each point one simulated run with engine timing written as a
run directory (`replay.sim.sweep.run_sweep`, as `replay simulate` writes them) and
summarised by `analysis.summary`. One table: hit rate, host hit rate, TTFT, profit per
GPU-hour net of host memory at `--host-usd-per-gb-hour` (`analysis.economics.host_rate`,
`pricing.host_memory_cost_per_gpu_hour`),
best row per policy marked: the highest net profit, ties (to the cent) to the lower TTFT
p50, then the smaller host."""

from __future__ import annotations

import dataclasses
import math
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replay.commands.common import console, err_console, fail
from replay.commands.price import HostUsdPerGbHour, resolve_host_rate
from replay.runspec import flags as F
from replay.tier_limits import MAX_TIER_GB

if TYPE_CHECKING:
    from replay.sim.runner import SimConfig
    from replay.traces.model import Trace

DEFAULT_POLICIES = "sglang"
DEFAULT_SESSIONS = 32
DEFAULT_HOST_GB = "0,64,128,256,512"
AUTO = "auto"  # --kv-share: the engine's own split (SGLang: as its device pools' bytes)
# A split that is no more than a rounding apart: net profits equal to the cent are a tie.
CENT = 0.005


def parse_host_gb(text: str) -> list[float]:
    """The host sizes of a comma list, GiB per engine, each ≥ 0, each once."""
    out: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            gb = float(part)
        except ValueError:
            fail(f"--host-gb: '{part}' is not a number of GiB (e.g. --host-gb 0,64,256,512)")
        if not (math.isfinite(gb) and 0 <= gb <= MAX_TIER_GB):
            fail(f"--host-gb: {part} is not a size in [0, {MAX_TIER_GB}] GiB")
        out.append(gb)
    return list(dict.fromkeys(out))


def parse_kv_share(text: str | None) -> list[float | None]:
    """The KV shares of a comma list: fractions in [0, 1], or `auto` (None, the engine's own
    split); default `auto` alone."""
    if text is None:
        return [None]
    out: list[float | None] = []
    for part in (p.strip() for p in text.split(",")):
        if part == AUTO:
            out.append(None)
            continue
        try:
            share = float(part)
        except ValueError:
            fail(f"--kv-share: '{part}' is not a fraction in [0, 1] or '{AUTO}'")
        if not 0 <= share <= 1:
            fail(f"--kv-share: {part} is not a fraction in [0, 1] (0.8: 80% to the KV pool)")
        out.append(share)
    return list(dict.fromkeys(out))


def _grid(bases: list[SimConfig], sizes: list[float], shares: list[float | None],
          one_pool: list[str]) -> list[SimConfig]:  # fmt: skip
    """Every point: each policy at each size, each share of a size > 0 for an engine of two
    host pools (a size of 0 has no split, one pool none to set: each run once)."""
    out: list[SimConfig] = []
    for base in bases:
        for gb in sizes:
            bw = base.host_bandwidth_gbs if gb > 0 else None
            split = gb > 0 and base.policy not in one_pool
            for s in shares if split else [None]:
                out.append(
                    dataclasses.replace(
                        base, host_memory_gb=gb, host_bandwidth_gbs=bw, host_kv_share=s
                    )
                )
    return out


def _check_split(bases: list[SimConfig], shares: list[float | None], sizes: list[float],
                 one_pool: list[str]) -> None:  # fmt: skip
    """A share (`--kv-share`) needs host memory and an engine with two host pools among the
    policies (`replay.sim.cache.tiers.check_kv_share` says why not)."""
    from replay.sim.cache.tiers import TierError, check_kv_share

    split = [s for s in shares if s is not None]
    if not split:
        return
    pooled = [b.policy for b in bases if b.policy not in one_pool]
    try:
        check_kv_share((pooled or one_pool)[0], bool(pooled), max(sizes), split[0])
    except TierError as e:
        why = str(e).replace("--host-memory-gb", "--host-gb")
        fail(f"{why}; drop --kv-share (or give it as '{AUTO}') to sweep only the size")


def engine_share(cfg: SimConfig) -> float | None:
    """The KV share of host memory the engine's own rule gives (SGLang: its device pools'
    bytes, `replay.sim.cache.tiers.attach_host_tier`), None for one host pool."""
    from replay.sim.runner import scaled_settings

    profile, settings = scaled_settings(cfg)
    cap = settings.capacity
    if cap is None or cap.state_slots is None or not cap.blocks:
        return None
    return (cap.blocks - profile.checkpoint_blocks * cap.state_slots) / cap.blocks


def _folder(cfg: SimConfig) -> str:
    share = AUTO if cfg.host_kv_share is None else f"{cfg.host_kv_share:g}"
    return f"host{cfg.host_memory_gb:g}-kv{share}"


def _run(tr: Trace, trace: str, configs: list[SimConfig], out: Path,
         workers: int) -> dict[tuple[str, str], dict[str, Any]]:  # fmt: skip
    """Each point's run directory under `out/<host, share>/`, summarised; its summary.json's
    engine entry, by (folder, run name)."""
    import orjson

    from analysis.summary import summarize_dir
    from replay.runspec.sweep import manifest_spec
    from replay.sim.sweep import run_sweep

    command = "replay " + shlex.join(sys.argv[1:])
    got: dict[tuple[str, str], dict[str, Any]] = {}
    groups: dict[str, list[SimConfig]] = {}
    for cfg in configs:
        groups.setdefault(_folder(cfg), []).append(cfg)
    for n, (name, group) in enumerate(groups.items(), 1):
        err_console.print(f"plan-host: {n}/{len(groups)} {name}", highlight=False)
        folder = out / name

        def on_result(res: Any, folder: Path = folder) -> None:
            run_dir = folder / res.config.run_name
            summarize_dir(run_dir)
            engines = orjson.loads((run_dir / "summary.json").read_bytes())["engines"]
            got[folder.name, res.config.run_name] = engines[res.config.policy]

        run_sweep(tr, group, folder, workers=workers, trace_source=trace, command=command,
                  on_result=on_result, spec_of=lambda c: manifest_spec(c, trace))  # fmt: skip
    return got


def _row(cfg: SimConfig, e: dict[str, Any], rate: float, auto: float | None) -> dict[str, Any]:
    from pricing import host_memory_cost_per_gpu_hour

    gpus = int(e.get("gpus") or 1)
    cost = float(host_memory_cost_per_gpu_hour(cfg.host_memory_gb, rate, gpus))
    profit = e.get("profit_per_gpu_hour")
    return {
        "policy": cfg.policy,
        "host_gb": cfg.host_memory_gb,
        "kv_share": cfg.host_kv_share,  # None: the engine's own split
        "engine_kv_share": auto if cfg.host_memory_gb else None,  # what that split is
        "requests": e.get("requests"),
        "hit_rate": e.get("hit_rate"),
        # None with nothing measured (summary.json then has no host figures): not a 0.0.
        "host_hit_rate": e.get("host_hit_rate", 0.0) if e.get("requests") != 0 else None,
        "ttft_p50_s": e.get("ttft_p50"),
        "ttft_p90_s": e.get("ttft_p90"),
        "profit_per_gpu_hour": profit,
        "host_cost_per_gpu_hour": cost,
        "net_profit_per_gpu_hour": None if profit is None else profit - cost,
        "break_even_usd_per_gb_hour": None,  # `add_break_even`
        "gpus": gpus,
        "best": False,
        "run": f"{_folder(cfg)}/{cfg.run_name}",
    }


def add_break_even(rows: list[dict[str, Any]]) -> None:
    """Each row's break-even host-memory rate: the USD per GiB-hour at which its host memory
    costs what it adds to the profit over the same policy's row without host memory,
    (profit − profit at 0 GiB) × GPUs ÷ GiB; None without such a row or without host memory.
    Negative: host memory lowers the profit before it costs anything."""
    base = {r["policy"]: r["profit_per_gpu_hour"] for r in rows if not r["host_gb"]}
    for r in rows:
        p0, p = base.get(r["policy"]), r["profit_per_gpu_hour"]
        if r["host_gb"] and p0 is not None and p is not None:
            r["break_even_usd_per_gb_hour"] = (p - p0) * r["gpus"] / r["host_gb"]


# --best: what "best" means; each key of a row, and whether higher is better.
CRITERIA: dict[str, tuple[str, bool, str]] = {
    "profit": ("net_profit_per_gpu_hour", True, "the highest net profit per GPU-hour"),
    "ttft-p50": ("ttft_p50_s", False, "the lowest TTFT p50"),
    "ttft-p90": ("ttft_p90_s", False, "the lowest TTFT p90"),
    "hit": ("hit_rate", True, "the highest hit rate"),
}


def _rank(row: dict[str, Any], best: str) -> tuple[float, float, float]:
    """Best first: the criterion (profits to the cent, rates to 0.1 point, TTFT to 10 ms),
    then TTFT p50 (lower), then host size (smaller)."""
    key, higher, _ = CRITERIA[best]
    step = {"profit": 2 * CENT, "hit": 0.001}.get(best, 0.01)
    value, ttft = row[key], row["ttft_p50_s"]
    v = math.inf if value is None else round(value / step) * (-1 if higher else 1)
    return (v, math.inf if ttft is None else ttft, row["host_gb"])


def mark_best(rows: list[dict[str, Any]], best: str = "profit") -> None:
    """Mark each policy's best row by `best` (`CRITERIA`, `_rank`): a row without the
    criterion's figure, or that measured no request, is never best."""
    key = CRITERIA[best][0]
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [
            r
            for r in rows
            if r["policy"] == policy and r[key] is not None and r.get("requests") != 0
        ]
        if mine:
            min(mine, key=lambda r: _rank(r, best))["best"] = True


def _cell(x: Any, fmt: str) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _share(r: dict[str, Any]) -> str:
    if not r["host_gb"]:
        return "–"
    if r["engine_kv_share"] is None:
        return "one pool"
    if r["kv_share"] is None:
        auto = r["engine_kv_share"]
        return AUTO if auto is None else f"{AUTO} {auto:.2f}"
    return f"{r['kv_share']:.2f}"


def _notes(rows: list[dict[str, Any]], one_pool: list[str], rate: tuple[float, str],
           best: str, out: Path) -> None:  # fmt: skip
    from replay.sim.measures import MEASURE_HINT, UNMEASURED_WHY

    if blind := [r for r in rows if r.get("requests") == 0]:
        err_console.print(
            f"note: {len(blind)} of {len(rows)} points measured no request ({UNMEASURED_WHY}): "
            f"their figures show as – and none of them is best; {MEASURE_HINT}",
            highlight=False,
        )
    for p in one_pool:
        err_console.print(f"note: {p} keeps one host pool (KV blocks and states share it): "
                          "only its size is swept", highlight=False)  # fmt: skip
    for r in rows:
        if r["best"] and r["break_even_usd_per_gb_hour"] is not None:
            err_console.print(
                f"{r['policy']}: the best row's {r['host_gb']:g} GiB add "
                f"${r['break_even_usd_per_gb_hour'] * r['host_gb'] / r['gpus']:.2f} per "
                f"GPU-hour of profit over none: host memory pays up to "
                f"${r['break_even_usd_per_gb_hour']:.5f} per GiB-hour",
                highlight=False,
            )
    usd, where = rate
    priced = (f"host memory at ${usd:g} per GiB-hour ({where})" if usd
              else f"host memory is unpriced ({where}): net = profit")  # fmt: skip
    err_console.print(
        f"GiB: host memory per engine; KV: the host KV pool's share of it; hit: hit rate, host: "
        f"its part served from host memory; p50/p90: TTFT; profit and net: USD per GPU-hour, "
        f"net = profit − GiB × rate ÷ GPUs, {priced}. ◀ best (--best {best}): per policy, "
        f"{CRITERIA[best][2]}, ties to the lower TTFT p50, then the smaller host. Runs: {out} "
        "(plan_host.json: every figure)",
        highlight=False,
    )


def _show(rows: list[dict[str, Any]], title: str) -> None:
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    # host GiB; the KV pool's share; hit rate and its part from host; TTFT; USD per GPU-hour
    cols = ("policy", "GiB", "KV", "hit", "host", "p50 s", "p90 s", "profit", "net")
    wide = max(len(r["policy"]) for r in rows)
    for col in cols:
        left = col == "policy"
        table.add_column(
            col,
            justify="left" if left or col == "net" else "right",
            min_width=wide if left else None,
        )
    for r in rows:
        table.add_row(
            r["policy"], f"{r['host_gb']:g}", _share(r),
            _cell(r["hit_rate"], ".1%"), _cell(r["host_hit_rate"], ".1%"),
            _cell(r["ttft_p50_s"], ".2f"), _cell(r["ttft_p90_s"], ".2f"),
            _cell(r["profit_per_gpu_hour"], ".2f"),
            _cell(r["net_profit_per_gpu_hour"], ".2f") + (" ◀" if r["best"] else ""),
        )  # fmt: skip
    console.print(table)


Rows = list[dict[str, Any]]


def plan(given: dict[str, Any], policies: str, sessions: int, engine: dict[str, Any],
         grid: tuple[list[float], list[float | None]], rate: float, best: str,
         token_scale: float | None, out: Path,
         workers: int) -> tuple[Rows, list[str], str]:  # fmt: skip
    """The planner's rows (best marked), its one-pool policies and the table's title."""
    from replay.commands.simulate import _check_capacity, _check_executors, _load, _out_dir, _spec
    from replay.runspec.sweep import config_of
    from replay.sim.runner import sim_capacity
    from replay.traces import sample_path

    sizes, shares = grid
    spec = _spec(given, policies, str(sessions), 1, "engine", engine, (None, None))
    tr, scale = _load(spec, token_scale)
    _check_executors(spec.policies, None)
    trace = spec.workload.trace or str(sample_path())
    bases = [config_of(p) for p in spec.points(scale, trace)]
    _check_capacity(bases)
    one_pool = [b.policy for b in bases if not sim_capacity(b).pooled]
    _check_split(bases, shares, sizes, one_pool)
    configs = _grid(bases, sizes, shares, one_pool)
    _check_capacity(configs, {"--host-memory-gb": "--host-gb"})
    got = _run(tr, trace, configs, _out_dir(out), workers)
    auto = {b.policy: engine_share(b) for b in bases}
    rows = [_row(c, got[_folder(c), c.run_name], rate, auto[c.policy]) for c in configs]
    mark_best(rows, best)
    add_break_even(rows)
    cap = bases[0].capacity_blocks
    cache = (
        f"{cap} blocks" if cap else f"the profile's ({sim_capacity(bases[0]).memory_blocks} blocks)"
    )
    title = (f"Host memory plan: {Path(trace).name}, {sessions} sessions, "
             f"{bases[0].duration_s / 60:g} min, engine timing, GPU cache {cache}")  # fmt: skip
    return rows, one_pool, title


def _write(rows: list[dict[str, Any]], out: Path, as_json: bool) -> None:
    """plan_host.json beside the runs; the rows on stdout with --json."""
    import orjson

    data = orjson.dumps(rows, option=orjson.OPT_INDENT_2)
    (out / "plan_host.json").write_bytes(data + b"\n")
    if as_json:
        sys.stdout.write(data.decode() + "\n")


Policies = Annotated[
    str,
    typer.Option("--policies", help=f"Comma list of simulator policies ({DEFAULT_POLICIES})."),
]
HostGb = Annotated[
    str,
    typer.Option("--host-gb", help=f"Host memory sizes, GiB per engine ({DEFAULT_HOST_GB})."),
]
KvShare = Annotated[
    str | None,
    typer.Option(
        "--kv-share",
        help="Shares of host memory for the host KV pool, the rest for the state pool, or "
        f"'{AUTO}' (the engine's split); SGLang HiCache only (default {AUTO}).",
    ),
]
Best = Annotated[
    str,
    typer.Option("--best", help=f"What the best row has: {', '.join(CRITERIA)} (profit)."),
]
Sessions = Annotated[
    int, typer.Option("--sessions", help=f"Concurrent sessions, the load ({DEFAULT_SESSIONS}).")
]
Out = Annotated[Path | None, typer.Option("--out", help="Output folder (default runs/plan-…).")]
Workers = Annotated[int, typer.Option("--workers", min=1, help="Local worker processes.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")]


def register(app: typer.Typer) -> None:
    @app.command("plan-host")
    def _cmd(
        policies: Policies = DEFAULT_POLICIES,
        sessions: Sessions = DEFAULT_SESSIONS,
        host_gb: HostGb = DEFAULT_HOST_GB,
        kv_share: KvShare = None,
        host_usd_per_gb_hour: HostUsdPerGbHour = None,
        best: Best = "profit",
        trace: F.Trace = None,
        duration_min: F.DurationMin = None,
        window: F.Window = None,
        seed: F.Seed = None,
        token_scale: F.TokenScale = None,
        model: F.Model = None,
        capacity_blocks: F.CapacityBlocks = None,
        host_bandwidth_gbs: F.HostBandwidthGbs = None,
        out: Out = None,
        workers: Workers = 1,
        as_json: AsJson = False,
    ) -> None:
        """Sweep host-memory size and its KV / state split on the simulator: hit rate, TTFT
        and profit per GPU-hour at each, the best marked."""
        from replay.rundir import new_run_id

        chosen = resolve_host_rate(host_usd_per_gb_hour)
        rate = (float(chosen.usd_per_gb_hour), chosen.source)
        if best not in CRITERIA:
            fail(f"--best: '{best}' is not one of {', '.join(CRITERIA)}")
        grid = (parse_host_gb(host_gb), parse_kv_share(kv_share))
        given = dict(trace=trace, duration_min=duration_min, window=window, seed=seed)
        engine = {"profile": model, "capacity_blocks": capacity_blocks,
                  "host_bandwidth_gbs": host_bandwidth_gbs}  # fmt: skip
        folder = out or Path("runs") / new_run_id("plan")
        rows, one_pool, title = plan(given, policies, sessions, engine, grid, rate[0], best,
                                     token_scale, folder, workers)  # fmt: skip
        _write(rows, folder, as_json)
        if not as_json:
            _show(rows, title)
        _notes(rows, one_pool, rate, best, folder)


__all__ = [
    "add_break_even",
    "mark_best",
    "parse_host_gb",
    "parse_kv_share",
    "plan",
    "register",
]
