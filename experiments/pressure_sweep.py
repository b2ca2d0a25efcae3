"""Experiment: how the engine model degrades under pressure (issue 22, step 4).

Replays one trace with `replay.sim` for each rule variant × policy × session count × timing
and prints one Markdown row per run: working set ÷ capacity, hit rate, TTFT p50 / p90, the
requests measured, and whether the engine was saturated. A variant is a set of engine
memory rules over each engine's own (`replay.sim.engine.rules`: allocation, gate,
preemption, subblock_chunks) plus optionally `admission=park|schedule`, so one rule can be
toggled at a time:

    .venv/bin/python experiments/pressure_sweep.py --trace ../shared/traces/kvct-dev.jsonl.gz \\
        --policies flashstate,vllm,sglang --sessions 48,88 --timings engine \\
        --variant adopted: --variant before:allocation=upfront,preemption=none,subblock_chunks=true

Saturated: with engine timing, a queue of at least one request on average over the window
(`waiting`, time-averaged), the share of the window whose steps spent the whole prefill
budget is printed beside it (`full`). With trace timing (which models no GPU) the column is
the prefill demand: the seconds the engine's step clock needs to prefill what the run left
uncached, per second of window (`demand` ≥ 1: the engine could not keep up even at these
hit rates). `--json FILE` writes every row with all figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from replay.profiles import DEFAULT_MODEL, ModelProfile, load_profile
from replay.sim.engine.clock import StepClock
from replay.sim.engine.rules import VLLM_RULES, parse_rules
from replay.sim.engine.scale import scaled_profile
from replay.sim.runner import TIMINGS, SimConfig, SimResult, simulate
from replay.traces import load_trace
from replay.traces.scale import resolve_token_scale
from replay.workload import DEFAULT_WORKLOAD, TIMED_WARMUP_S


def parse_variant(text: str) -> tuple[str, str, str | None]:
    """`NAME:RULES` → (name, rules without admission, admission or None)."""
    name, sep, rest = text.partition(":")
    if not sep or not name:
        raise ValueError(f"--variant '{text}': expected NAME:RULES (RULES may be empty)")
    items, admission = [], None
    for item in filter(None, (x.strip() for x in rest.split(","))):
        if item.startswith("admission="):
            admission = item.split("=", 1)[1]
            if admission not in ("park", "schedule"):
                raise ValueError(f"--variant '{text}': admission must be park or schedule")
        else:
            items.append(item)
    rules = ",".join(items)
    parse_rules(rules, VLLM_RULES)  # a bad item is reported here, before any run
    return name, rules, admission


def prefill_demand(res: SimResult, scale: float, profile: ModelProfile) -> float:
    """Seconds of the step clock's prefill the measured requests left uncached need, per
    second of window (trace timing: what an engine would have had to compute)."""
    cfg = res.config
    clock = StepClock(scaled_profile(profile, scale), scale)
    lo, hi = cfg.window
    need = 0.0
    for r in res.records:
        if r.priming or r.status != "ok" or r.sent_s is None or not lo <= r.sent_s < hi:
            continue
        need += clock.prefill_seconds(int(r.cached_tokens or 0), int(r.prompt_tokens))
    return need / (hi - lo)


def row(
    res: SimResult, variant: str, corpus: str, scale: float, profile: ModelProfile
) -> dict[str, Any]:
    s, e = res.summary, res.engine
    out: dict[str, Any] = {
        "corpus": corpus,
        "variant": variant,
        "policy": res.config.policy,
        "sessions": res.config.sessions,
        "timing": res.config.timing,
        "working_set": s["working_set_ratio"],
        "hit": s["hit_rate"],
        "ttft_p50": s.get("ttft_p50_s"),
        "ttft_p90": s.get("ttft_p90_s"),
        "requests": s["requests"],
        "wall_s": res.wall_seconds,
    }
    if e:
        out.update(e)
        out["saturated"] = e["waiting_mean"] >= 1.0
    else:
        out["prefill_demand"] = prefill_demand(res, scale, profile)
        out["saturated"] = out["prefill_demand"] >= 1.0
    return out


def fmt(r: dict[str, Any]) -> str:
    def sec(x: float | None) -> str:
        return "–" if x is None else f"{x:.2f}" if x < 10 else f"{x:.0f}"

    if r["timing"] == "engine":
        sat = "yes" if r["saturated"] else "no"
        how = f"{sat} (waiting {r['waiting_mean']:.1f}, full {r['budget_full_share']:.0%}"
        how += f", preempted {r['preemptions']:.0f})"
    else:
        how = f"{'yes' if r['saturated'] else 'no'} (demand {r['prefill_demand']:.2f})"
    return (
        f"| {r['corpus']} | {r['variant']} | {r['policy']} | {r['sessions']} | {r['timing']} "
        f"| {r['working_set']:.2f} | {r['hit']:.1%} | {sec(r['ttft_p50'])} / "
        f"{sec(r['ttft_p90'])} | {r['requests']:,} | {how} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True, help="trace file (any format replay reads)")
    ap.add_argument("--name", help="corpus name in the table (default: the file's stem)")
    ap.add_argument("--policies", default="flashstate,vllm,sglang")
    ap.add_argument("--sessions", default="16,32,48,64,80,96")
    ap.add_argument("--timings", default="trace,engine")
    ap.add_argument("--variant", action="append", default=[], help="NAME:RULES (repeatable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--profile-set",
        action="append",
        default=[],
        help="KEY=VALUE: a model-profile field changed for a sensitivity run (repeatable)",
    )
    ap.add_argument("--warmup-s", type=float, help="engine timing's warm-up (default 120 s)")
    ap.add_argument("--json", type=Path, help="write every row's figures here")
    a = ap.parse_args(argv)
    try:
        variants = [parse_variant(v) for v in a.variant or ["adopted:"]]
    except ValueError as e:
        print(f"pressure_sweep: {e}", file=sys.stderr)
        return 2
    bad_n = [x for x in a.sessions.split(",") if not x.strip().isdigit() or int(x) < 1]
    if bad_n:
        print(
            f"pressure_sweep: --sessions: '{bad_n[0]}' is not a positive whole number",
            file=sys.stderr,
        )
        return 2
    sessions = [int(x) for x in a.sessions.split(",")]
    bad_kv = [kv for kv in a.profile_set if "=" not in kv]
    if bad_kv:
        print(f"pressure_sweep: --profile-set: '{bad_kv[0]}' is not KEY=VALUE", file=sys.stderr)
        return 2
    try:
        profile = load_profile(DEFAULT_MODEL)
        changes = dict(kv.split("=", 1) for kv in a.profile_set)
        if changes:
            profile = profile.model_validate({**profile.model_dump(), **changes})
    except (ValueError, ValidationError) as e:
        print(f"pressure_sweep: --profile-set: {e}", file=sys.stderr)
        return 2
    timings = a.timings.split(",")
    bad = [t for t in timings if t not in TIMINGS]
    if bad:
        print(f"pressure_sweep: --timings: '{bad[0]}' is not one of trace, engine", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    trace = load_trace(a.trace)
    scale = resolve_token_scale(trace, None)
    corpus = a.name or Path(a.trace).name.split(".")[0]
    print(f"loaded {a.trace} in {time.perf_counter() - t0:.0f} s (token scale {scale:g})")
    print(
        "| corpus | variant | policy | sessions | timing | WS | hit | TTFT p50 / p90 s "
        "| requests | saturated |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name, rules, admission in variants:
        for policy in a.policies.split(","):
            for n in sessions:
                for timing in timings:
                    if timing == "trace" and (rules or admission):
                        continue  # engine rules do not touch trace timing
                    cfg = SimConfig(
                        policy=policy,
                        sessions=n,
                        seed=a.seed,
                        timing=timing,
                        token_scale=scale,
                        warmup_s=(a.warmup_s if a.warmup_s is not None else TIMED_WARMUP_S)
                        if timing == "engine"
                        else DEFAULT_WORKLOAD.warmup_s,
                        engine_rules=rules,
                        admission=admission,
                    )
                    r = row(simulate(trace, cfg, profile), name, corpus, scale, profile)
                    rows.append(r)
                    print(fmt(r), flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
