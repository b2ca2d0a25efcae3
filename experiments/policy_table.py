"""The source's policy table, rebuilt: six policies × two loads × two seeds, printed beside
the source's own simulation (seed 000, "My simulation: which half does the work?").

The source replayed the real corpus with subagents left out, in trace timing (requests hold
their blocks for their recorded duration, prefill is instantaneous), on 2,531 blocks of
4,352 tokens, at 32 and 48 sessions where its working set was 0.93 and 1.34 of the cache.
This script replays a corpus the same way (`--subagents skip` strips them from the trace
before the replay) and prints, per policy, the hit rate at each load and the 48-session
columns the source gives (median uncached tokens, redundant prefill, the Eq. 5 miss split,
resident checkpoints), plus the measured working set, so a table built on a corpus whose
pressure differs says so. Pass `--capacity-blocks` to put the corpus at the source's ratios
(the script prints the ratio it measured either way).

    .venv/bin/python experiments/policy_table.py [--trace SRC] [--capacity-blocks 2531]
        [--sessions 32,48] [--seeds 0,1] [--policies ...] [--opt POLICY:KEY=VALUE ...]
        [--subagents skip|inline|concurrent] [--api-scale K] [--gap-context POWER]
        [--workers 2] [--csv out.csv]

`--opt` passes a policy option (the experiment switches of `experiments/policy_experiments.py`
are such options), e.g. `--opt vllm-like:hold_chunk_state=true`.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import pickle
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.model import Trace, Trajectory

DEFAULT_CORPUS = Path(".corpus") / "synth-full-seed0.jsonl.gz"
POLICIES = ("vllm-like", "dense", "asc-lru", "asc-unit-lru", "flashstate-eq7", "flashstate")


@dataclass(frozen=True)
class SourceRow:
    """One row of the source's table (None: the source gives no figure)."""

    label: str
    hit32: float | None
    hit48: float | None
    median48: float | None = None
    redundant48: float | None = None
    dependency48: float | None = None
    resident48: float | None = None


# Seed 000, "My simulation": two seeds per point (dense: one), working set 0.93 / 1.34.
SOURCE: dict[str, SourceRow] = {
    "vllm-like": SourceRow("vLLM-like", 0.611, 0.275, 48_512, 103_123, 5_702, 210),
    "dense": SourceRow("Dense, every 1,088", 0.012, 0.002, 145_280, 176_424, 10_171, 220),
    "asc-lru": SourceRow("+ASC, LRU per allocation", 0.528, 0.215, 63_712, 112_484, 4_088, 212),
    "asc-unit-lru": SourceRow("ASC + whole-state LRU", 0.731, 0.599, 2_950, 50_916, 8_595, 161),
    "flashstate-eq7": SourceRow("FlashState, Eq. 7", 0.760, 0.599, 4_948, 52_124, 2_483, 169),
    "flashstate": SourceRow("FlashState, leaf-last", None, None),
}
# The source's placement misses: ≈2,200 tokens/request for vLLM-like, ≈240 with ASC.
SOURCE_PLACEMENT = {"vllm-like": 2_200, "asc-lru": 240, "asc-unit-lru": 240}
SOURCE_WORKING_SET = {32: 0.93, 48: 1.34}

# `--rules source`, no longer the default (issue 22: the policies' own defaults read the
# source's words, docs/policy-table.md): the rule switches (replay.sim.cache.policy_base.RULES)
# under which the source's table was reproduced on the corpus before its recalibration
# (docs/policy-research.md, "The source's policy table"): every allocation stamped when it is used or
# written — KV blocks when the request starts, prefill checkpoints when written, a resumed
# checkpoint when the request resuming from it starts.
SOURCE_RULES: dict[str, Any] = {
    "block_stamp": "start",
    "prefill_state_stamp": "write",
    "resume_stamp": "start",
}

_TRACE: Trace | None = None


def without_subagents(trace: Trace) -> Trace:
    """The trace with every subagent removed (the source's replay left them out)."""
    return replace(trace, trajectories=[replace(t, subagents=()) for t in trace.trajectories])


def load_corpus(path: str, subagents: str) -> Trace:
    """The trace (subagents stripped for "skip"), kept beside it as a pickle so repeated
    experiments skip the parse (the pickle is rebuilt when the trace is newer)."""
    src = Path(path)
    pkl = src.with_name(f"{src.name}.{subagents}.pickle")
    if pkl.exists() and pkl.stat().st_mtime >= src.stat().st_mtime:
        with pkl.open("rb") as fh:
            trace: Trace = pickle.load(fh)
        return trace
    trace = load_trace(path)
    if subagents == "skip":
        trace = without_subagents(trace)
    with pkl.open("wb") as fh:
        pickle.dump(trace, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return trace


def scale_durations(trace: Trace, k: float) -> Trace:
    """The trace with every recorded request duration × k (recorded tool times kept)."""
    return replace(
        trace,
        trajectories=[replace(t, api_time=t.api_time * k) for t in trace.trajectories],
    )


def gaps_with_context(trace: Trace, power: float) -> Trace:
    """The trace with each tool gap before request i × (P_i / P̄)^power, P̄ the mean prompt of
    the trace's top-level requests: an experiment in which long contexts wait longer between
    turns (time per turn growing with the context), so the time average of a session's
    context exceeds its request-weighted mean, as the source's own figures imply (docs/policy-research.md,
    "Reconciling the source's numbers"). Subagents are kept as they are."""
    mean_p = float(np.mean(np.concatenate([t.input_tokens for t in trace.trajectories])))

    def one(t: Trajectory) -> Trajectory:
        n = t.num_requests
        gaps = np.array([t.gap_before(i) for i in range(n)])
        gaps *= (t.input_tokens / mean_p) ** power
        return replace(t, think_time=gaps)

    return replace(trace, trajectories=[one(t) for t in trace.trajectories])


def gaps_reshaped(trace: Trace, median: float, sigma: float, long_share: float) -> Trace:
    """The trace with its top-level tool gaps given another shape, rank for rank: the gap
    at quantile u of the corpus's gaps becomes the gap at quantile u of a mixture — with
    probability 1 − long_share a lognormal (median, sigma), else a wait past the 300 s cap
    (300–600 s, so capped at 300 s in the replay). Order is kept (a long gap stays
    longer than a short one); choose the figures so the capped mean stays the corpus's,
    and with it the working set (docs/policy-research.md, "Which single property closes the gap")."""
    ppf = np.vectorize(NormalDist().inv_cdf)
    gaps = [np.array([t.gap_before(i) for i in range(t.num_requests)]) for t in trace.trajectories]
    flat = np.concatenate([g[1:] for g in gaps])
    u = (np.argsort(np.argsort(flat, kind="stable"), kind="stable") + 0.5) / len(flat)
    short = u < 1.0 - long_share
    new = np.empty_like(flat)
    us = np.clip(u[short] / (1.0 - long_share), 1e-9, 1 - 1e-9) if long_share < 1 else u[short]
    # the replay caps every gap at 300 s, so capping here keeps the order and changes nothing
    new[short] = np.minimum(median * np.exp(sigma * ppf(us)), 300.0)
    new[~short] = 300.0 * (1.0 + (u[~short] - (1.0 - long_share)) / max(long_share, 1e-9))
    out, k = [], 0
    for t, g in zip(trace.trajectories, gaps, strict=True):
        m = len(g) - 1
        g2 = g.copy()
        if m > 0:
            g2[1:] = new[k : k + m]
            k += m
        out.append(replace(t, think_time=g2))
    return replace(trace, trajectories=out)


def parse_gap_shape(text: str) -> tuple[float, float, float]:
    """`--gap-shape MEDIAN,SIGMA,LONG_SHARE`, checked (a bad value exits naming the form)."""
    try:
        med, sig, share = (float(x) for x in text.split(","))
    except ValueError:
        raise SystemExit(f"--gap-shape {text!r}: expected MEDIAN,SIGMA,LONG_SHARE") from None
    if not (med > 0 and sig > 0 and 0 <= share < 1):
        raise SystemExit(
            f"--gap-shape {text!r}: MEDIAN and SIGMA must be positive, 0 ≤ LONG_SHARE < 1"
        )
    return med, sig, share


def parse_opts(items: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        try:
            pol, kv = item.split(":", 1)
            key, raw = kv.split("=", 1)
        except ValueError:
            raise SystemExit(f"--opt {item!r}: expected POLICY:KEY=VALUE") from None
        val: Any = raw
        if raw.lower() in ("true", "false"):
            val = raw.lower() == "true"
        else:
            try:
                val = float(raw) if "." in raw else int(raw)
            except ValueError:
                val = raw
        out.setdefault(pol, {})[key] = val
    return out


def _run(cfg: SimConfig) -> dict[str, Any]:
    assert _TRACE is not None
    row = simulate(_TRACE, cfg).summary
    row["label"] = cfg.run_name
    return row


def run_configs(trace: Trace, configs: list[SimConfig], workers: int) -> list[dict[str, Any]]:
    """Summary rows in plan order (forked workers share the loaded trace)."""
    global _TRACE
    _TRACE = trace
    try:
        if workers <= 1:
            return [_run(c) for c in configs]
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
            return list(pool.map(_run, configs))
    finally:
        _TRACE = None


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def _tok(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def table(
    rows: list[dict[str, Any]], policies: list[str], sessions: list[int], label: dict[str, str]
) -> str:
    """Markdown: ours (mean over seeds) beside the source, then the high-load columns."""

    def mean(pol: str, n: int, col: str) -> float:
        return float(np.mean([r[col] for r in rows if r["policy"] == pol and r["sessions"] == n]))

    hi = max(sessions)
    lines = [
        "| policy | "
        + " | ".join(f"{n} sessions" for n in sessions)
        + " | source "
        + " / ".join(str(n) for n in (32, 48))
        + " |",
        "|---|" + "---|" * (len(sessions) + 1),
    ]
    for p in policies:
        src = SOURCE.get(p)
        srcs = "–" if src is None else f"{_pct(src.hit32)} / {_pct(src.hit48)}"
        cells = " | ".join(_pct(mean(p, n, "hit_rate")) for n in sessions)
        lines.append(f"| {label[p]} | {cells} | {srcs} |")
    ws = " · ".join(f"{n}: {mean(policies[0], n, 'working_set_ratio'):.2f}" for n in sessions)
    lines.append("")
    lines.append(f"working set ÷ cache (source 0.93 at 32, 1.34 at 48): {ws}")
    lines.append("")
    cols = [
        ("median uncached", "median_uncached_tokens", "median48"),
        ("redundant/req", "redundant_prefill_per_request", "redundant48"),
        ("placement/req", "placement_miss_per_request", None),
        ("dependency/req", "dependency_miss_per_request", "dependency48"),
        ("capacity/req", "capacity_miss_per_request", None),
        ("resident ckpts", "resident_checkpoints", "resident48"),
    ]
    lines.append(f"At {hi} sessions, ours (source):")
    lines.append("")
    lines.append("| policy | " + " | ".join(c[0] for c in cols) + " |")
    lines.append("|---|" + "---|" * len(cols))
    for p in policies:
        src = SOURCE.get(p)
        parts: list[str] = []
        for _, col, scol in cols:
            ours = _tok(mean(p, hi, col))
            theirs: float | None = None
            if scol is not None and src is not None:
                theirs = getattr(src, scol)
            elif col == "placement_miss_per_request":
                theirs = SOURCE_PLACEMENT.get(p)
            parts.append(ours if theirs is None else f"{ours} ({_tok(theirs)})")
        lines.append(f"| {label[p]} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(DEFAULT_CORPUS))
    ap.add_argument("--model", default="glm-5.3-flash")
    ap.add_argument("--capacity-blocks", type=int, default=2531)
    ap.add_argument("--sessions", default="32,48")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--opt", action="append", default=[], metavar="POLICY:KEY=VALUE")
    ap.add_argument(
        "--subagents",
        choices=("skip", "inline", "concurrent"),
        default="skip",
        help="skip: left out, as the source's replay (default); inline: replayed in the "
        "parent's slot; concurrent: beside the parent",
    )
    ap.add_argument(
        "--rules",
        choices=("defaults", "source", "engine"),
        default="defaults",
        help="defaults: each policy's own rules (the source's words, issue 22; 'engine' is "
        "the old name); source: every allocation stamped at its use (SOURCE_RULES, the set "
        "that reproduced the source's table on the corpus before its recalibration)",
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--api-scale",
        type=float,
        default=1.0,
        help="multiply every recorded request duration, tool gaps kept (the share of the "
        "cache live requests pin; docs/policy-research.md)",
    )
    ap.add_argument(
        "--gap-context",
        type=float,
        default=0.0,
        metavar="POWER",
        help="multiply each tool gap by (prompt / mean prompt)^POWER (an experiment: time per "
        "turn growing with the context)",
    )
    ap.add_argument(
        "--gap-shape",
        metavar="MEDIAN,SIGMA,LONG_SHARE",
        help="reshape the tool gaps rank for rank (gaps_reshaped): a lognormal (MEDIAN s, "
        "SIGMA) with LONG_SHARE of the gaps past the 300 s cap",
    )
    ap.add_argument("--csv", type=Path)
    args = ap.parse_args()

    if not Path(args.trace).exists():
        print(
            f"{args.trace}: no such corpus; synthesize one with "
            "`python -m replay traces synth` or pass --trace",
            file=sys.stderr,
        )
        return 2
    shape = parse_gap_shape(args.gap_shape) if args.gap_shape else None
    t0 = time.perf_counter()
    trace = load_corpus(args.trace, "skip" if args.subagents == "skip" else "keep")
    if args.api_scale != 1.0:
        trace = scale_durations(trace, args.api_scale)
        print(f"request durations × {args.api_scale:g} (tool gaps as recorded)")
    if args.gap_context:
        trace = gaps_with_context(trace, args.gap_context)
        print(f"tool gaps × (prompt / mean prompt)^{args.gap_context:g}")
    if shape is not None:
        med, sig, share = shape
        trace = gaps_reshaped(trace, med, sig, share)
        print(f"tool gaps reshaped: lognormal ({med:g} s, σ {sig:g}), {share:.1%} past the cap")
    print(f"loaded {args.trace} in {time.perf_counter() - t0:.1f} s (subagents: {args.subagents})")

    policies = args.policies.split(",")
    sessions = [int(x) for x in args.sessions.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    given = parse_opts(args.opt)
    base = SOURCE_RULES if args.rules == "source" else {}  # defaults / engine: the policy's
    opts = {p: {**base, **given.get(p, {})} for p in policies}
    configs = [
        SimConfig(
            p,
            n,
            seed=s,
            model=args.model,
            capacity_blocks=args.capacity_blocks,
            policy_opts=opts.get(p, {}),
            subagents=args.subagents,
        )
        for p in policies
        for n in sessions
        for s in seeds
    ]
    t0 = time.perf_counter()
    rows = run_configs(trace, configs, args.workers)
    print(
        f"{len(configs)} runs in {time.perf_counter() - t0:.0f} s wall; capacity "
        f"{args.capacity_blocks} blocks; seeds {args.seeds}; trace timing; rules {args.rules}"
        + (f" ({', '.join(f'{k}={v}' for k, v in base.items())})" if base else "")
    )
    label = {p: p + "".join(f" {k}={v}" for k, v in given.get(p, {}).items()) for p in policies}
    print()
    print(table(rows, policies, sessions, label))
    if args.csv:
        with args.csv.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
