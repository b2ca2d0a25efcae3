"""Experiment: how fast the closed loop cycles, ours beside the demo's (issue 22, the pressure clause).

    .venv/bin/python experiments/pacing_experiment.py                       # bundled sample, 48 sessions
    .venv/bin/python experiments/pacing_experiment.py --trace ../shared/traces/kvct-dev.jsonl.gz
    .venv/bin/python experiments/pacing_experiment.py --policies flashstate --timings engine \\
        --profile-set clock_prefill_scale=0.1915
    .venv/bin/python experiments/pacing_experiment.py --match-demo 34-48   # the default's load

`--match-demo LO-HI` derives the embedded default's session count from inputs only: for each
count it replays the corpus with trace timing (the trace's own latencies, so no engine model
and no output of ours enters), seeds 0-2, re-paces the streams to the demo's FlashState E2E
(27.8 s, below) and prints the offered prompt tokens/min/GPU against the demo's 4.74M; the
count whose mean over the seeds is nearest is the one offering the demo's load.

For each run (the embedded default's settings: seed 0, 48 sessions, minutes 15-45 of 45,
the GLM-5.3-Flash profile and its 2,531 blocks) it prints, over the requests whose first
token arrives in the window (the paper's rule for its throughput):

- served requests per second, and the same derived from the prompt tokens per minute per
  GPU the run reports × 2 GPUs ÷ its own mean prompt (the demo's derivation, below);
- mean prompt, mean output, mean E2E, mean TTFT, mean time per output token;
- the mean tool gap the sessions waited before a request, and the requests in flight
  (Little's law: rate × mean E2E), the engine's mean decoding batch where it has one.

The demo's line is derived from the seed document's panel (48 Claude Code agents on
GLM-5.3-Flash, 2×B200 per engine): rate = prompt tokens/min/GPU × 2 ÷ 218,922 (the corpus's
mean prompt) ÷ 60; in flight = rate × E2E mean; mean output = output tokens/min ÷ 60 ÷ rate;
time per output token ≈ (E2E mean − TTFT) ÷ mean output, bracketed by the p50 TTFT (the
mean TTFT is not published; it is at least the p50 for the right-skewed TTFT of a queue).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from replay.profiles import DEFAULT_MODEL, load_profile
from replay.records import RequestRecord
from replay.sim.offered import DEMO_GPUS, finished_in_window, offered_vs_demo
from replay.sim.runner import SimConfig, SimResult, simulate
from replay.traces import load_trace, sample_path
from replay.traces.model import Trace
from replay.traces.scale import resolve_token_scale
from replay.workload import DEFAULT_WORKLOAD, SUBAGENT_MODES, TIMED_WARMUP_S, SubagentMode

MEAN_PROMPT = 218_922  # the paper corpus's mean prompt (seed document, "What I ran")
GPUS = DEMO_GPUS
# engine: (prompt tokens/min/GPU, output tokens/min per engine, E2E mean s, E2E p50 s,
#          TTFT p50 s) — the seed document's demo panel and its profit-implied prompt rate.
DEMO = {
    "flashstate": (4.74e6, 61.7e3, 27.8, 12.4, 0.2),
    "vllm": (1.54e6, 22.0e3, 88.6, 46.1, 3.3),
    "sglang": (1.29e6, 15.4e3, 129.6, None, 56.3),
}


def demo_line(engine: str) -> dict[str, float | None]:
    prompt_min_gpu, out_min, e2e_mean, _e2e_p50, ttft_p50 = DEMO[engine]
    rate = prompt_min_gpu * GPUS / MEAN_PROMPT / 60
    mean_out = out_min / 60 / rate
    return {
        "rate": rate,
        "prompt_min_gpu": prompt_min_gpu,
        "out_min": out_min,
        "rate_from_prompt": rate,
        "mean_prompt": MEAN_PROMPT,
        "mean_out": mean_out,
        "e2e": e2e_mean,
        "ttft": None,
        "tpot": (e2e_mean - ttft_p50) / mean_out,  # an upper bound: TTFT mean ≥ p50
        "gap": None,
        "in_flight": rate * e2e_mean,
        "decoding": out_min / 60 * (e2e_mean - ttft_p50) / mean_out,
    }


def measured(rs: list[RequestRecord], res: SimResult) -> dict[str, float | None]:
    """The run's figures in full-size tokens (a scaled trace's lengths × its token scale)."""
    lo, hi = res.config.window
    S = res.config.token_scale
    span = hi - lo
    done = finished_in_window(rs, (lo, hi))
    if not done:
        return {}
    rate = len(done) / span
    prompt = S * statistics.fmean(r.prompt_tokens for r in done)
    out = S * statistics.fmean(r.output_tokens for r in done)
    e2e = statistics.fmean(r.done_s - r.sent_s for r in done)  # type: ignore[operator]
    ttft = statistics.fmean(r.first_token_s - r.sent_s for r in done)  # type: ignore[operator]
    tpots = [
        (r.done_s - r.first_token_s) / (S * (r.output_tokens - 1))  # type: ignore[operator]
        for r in done
        if r.output_tokens > 1
    ]
    p_gpu = res.summary.get("prompt_tokens_per_min_per_gpu")
    decoding = res.engine.get("running_mean") if res.engine else None
    return {
        "rate": rate,
        "prompt_min_gpu": rate * prompt * 60 / GPUS,
        "out_min": rate * out * 60,
        "rate_from_prompt": (p_gpu * GPUS / prompt / 60) if p_gpu else None,
        "mean_prompt": prompt,
        "mean_out": out,
        "e2e": e2e,
        "ttft": ttft,
        "tpot": statistics.fmean(tpots) if tpots else None,
        "gap": statistics.fmean(r.tool_gap_s for r in done),
        "in_flight": rate * e2e,
        "decoding": decoding,
    }


def repaced(d: dict[str, float | None], e2e_demo: float) -> dict[str, float | None]:
    """The same sessions at the demo's E2E: Little's law gives the streams (main sessions and
    concurrent subagents) a run kept, rate × (E2E + tool gap); each stream then cycles in
    (demo E2E + the same gap). An estimate: it keeps the streams and the mix of requests."""
    rate, e2e, gap = d.get("rate"), d.get("e2e"), d.get("gap")
    if rate is None or e2e is None or gap is None:
        return {}
    r2 = rate * (e2e + gap) / (e2e_demo + gap)
    prompt, out = d["mean_prompt"] or 0.0, d["mean_out"] or 0.0
    return {
        "rate": r2,
        "prompt_min_gpu": r2 * prompt * 60 / GPUS,
        "out_min": r2 * out * 60,
        "mean_prompt": prompt,
        "mean_out": out,
        "e2e": e2e_demo,
        "gap": gap,
        "in_flight": r2 * e2e_demo,
    }


COLS = (
    ("rate", "req/s", "{:.3f}"),
    ("prompt_min_gpu", "prompt tok/min/GPU", "{:,.0f}"),
    ("out_min", "out tok/min", "{:,.0f}"),
    ("rate_from_prompt", "req/s (prompt÷mean)", "{:.3f}"),
    ("mean_prompt", "mean prompt", "{:,.0f}"),
    ("mean_out", "mean out", "{:,.0f}"),
    ("e2e", "E2E mean s", "{:.1f}"),
    ("ttft", "TTFT mean s", "{:.1f}"),
    ("tpot", "s/out token", "{:.4f}"),
    ("gap", "tool gap mean s", "{:.1f}"),
    ("in_flight", "in flight", "{:.1f}"),
    ("decoding", "running (engine)", "{:.1f}"),
)


def cells(d: dict[str, float | None]) -> str:
    out = []
    for key, _label, f in COLS:
        v = d.get(key)
        out.append("–" if v is None else f.format(v))
    return " | ".join(out)


def match_demo(
    trace: Trace, span: str, scale: float, subagents: SubagentMode, seeds: int = 3
) -> int:
    """The session count in LO-HI whose offered load (mean over seeds) is nearest the demo's."""
    lo, _, hi = span.partition("-")
    target = DEMO["flashstate"][0]
    print(
        f"offered prompt tok/min/GPU at the demo's pace (target {target:,.0f}), seeds 0-{seeds - 1}"
    )
    print("| sessions | " + " | ".join(f"seed {k}" for k in range(seeds)) + " | mean | × demo |")
    print("|---" * (seeds + 3) + "|")
    best, best_gap = int(lo), math.inf
    for n in range(int(lo), int(hi or lo) + 1):
        vals = [
            target
            * (
                offered_vs_demo(
                    trace,
                    sessions=n,
                    seed=k,
                    token_scale=scale,
                    subagents=subagents,
                    warmup_s=TIMED_WARMUP_S,
                )
                or 0.0
            )
            for k in range(seeds)
        ]
        mean = statistics.fmean(vals)
        print(
            f"| {n} | "
            + " | ".join(f"{v:,.0f}" for v in vals)
            + f" | {mean:,.0f} | {mean / target:.2f} |"
        )
        if abs(mean / target - 1) < best_gap:
            best, best_gap = n, abs(mean / target - 1)
    print(f"nearest the demo's offered load: {best} sessions")
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=None, help="default: the bundled sample")
    ap.add_argument("--policies", default="flashstate,vllm,sglang")
    ap.add_argument("--timings", default="trace,engine")
    ap.add_argument("--sessions", type=int, default=DEFAULT_WORKLOAD.sessions)
    ap.add_argument("--seed", type=int, default=DEFAULT_WORKLOAD.seed)
    ap.add_argument("--subagents", default=DEFAULT_WORKLOAD.subagents, choices=SUBAGENT_MODES)
    ap.add_argument(
        "--engine-rules",
        default="",
        help="engine timing: NAME=VALUE,... over each engine's own rules (replay.sim.engine.rules)",
    )
    ap.add_argument("--admission", default=None, choices=("park", "schedule"))
    ap.add_argument(
        "--profile-set",
        action="append",
        default=[],
        help="FIELD=VALUE on the model profile (an experiment, not a setting)",
    )
    ap.add_argument("--match-demo", default=None, metavar="LO-HI", help="see the docstring")
    args = ap.parse_args()
    src = args.trace or str(sample_path())
    trace = load_trace(src)
    scale = resolve_token_scale(trace, None)
    if args.match_demo:
        match_demo(trace, args.match_demo, scale, args.subagents)
        return
    profile = load_profile(DEFAULT_MODEL)
    if args.profile_set:
        upd: dict[str, float] = {}
        for item in args.profile_set:
            k, sep, v = item.partition("=")
            if not sep:
                raise SystemExit(f"--profile-set '{item}': expected FIELD=VALUE")
            upd[k] = float(v)
        profile = profile.model_copy(update=upd)
    print(
        f"corpus {src} (token scale {scale:g}), {args.sessions} sessions, seed {args.seed}, "
        f"subagents {args.subagents}, engine rules '{args.engine_rules}', admission "
        f"{args.admission or 'per engine'}; tokens full-size"
    )
    print("| run | " + " | ".join(label for _k, label, _f in COLS) + " |")
    print("|---" * (len(COLS) + 1) + "|")
    for p in args.policies.split(","):
        if p in DEMO:
            print(f"| demo {p} | {cells(demo_line(p))} |")
    for timing in args.timings.split(","):
        for p in args.policies.split(","):
            t0 = time.perf_counter()
            cfg = SimConfig(
                policy=p,
                sessions=args.sessions,
                seed=args.seed,
                timing=timing,
                token_scale=scale,
                subagents=args.subagents,
                engine_rules=args.engine_rules,
                admission=args.admission,
                warmup_s=TIMED_WARMUP_S,  # the embedded default's, as bench_default.py
            )
            res = simulate(trace, cfg, profile)
            d = measured(res.records, res)
            sat = ""
            if res.engine:
                sat = f", queue {res.engine.get('waiting_mean', 0):.1f}"
            print(
                f"| {timing} {p} (hit {res.summary['hit_rate']:.1%}{sat}, "
                f"{time.perf_counter() - t0:.0f} s) | {cells(d)} |"
            )
            if timing == "trace" and p in DEMO:
                print(f"| ↳ at the demo's {p} E2E | {cells(repaced(d, DEMO[p][2]))} |")


if __name__ == "__main__":
    main()
