"""Issue 22, step 3: why whole-state LRU ranked below per-block LRU on the real corpus.

One modelling rule toggled at a time (`replay.sim.cache.policy_base.RULES`, applied to every
policy of the row; a rule a policy does not use leaves it unchanged), on the real corpus in
the source's replay (trace timing, subagents left out, 2,531 blocks), printing per toggle the
hit rate of vllm-like, asc-unit-lru and flashstate-eq7 at each load and whole-state LRU's
lead over vllm-like, beside the independent re-implementation's figures (issue 22). With
`--working-set` it prints, instead, the working set under each candidate definition.

    .venv/bin/python experiments/lru_ranking.py [--trace ../shared/traces/kvct-dev.jsonl.gz]
        [--sessions 48,64,80,96] [--seeds 0] [--toggles baseline,stamp-write,...]
        [--working-set] [--workers 2]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from policy_table import run_configs, without_subagents

from replay.config_paths import REAL_CORPUS
from replay.sim import driver, runner
from replay.sim.measures import WorkingSet
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace
from replay.traces.model import Trace

REAL_TRACE = REAL_CORPUS
POLICIES = ("vllm-like", "asc-unit-lru", "flashstate-eq7")
# Issue 22: the independent re-implementation of the source's description on kvct-dev
# (trace timing, subagents skipped, 2,531 blocks), hit rate at 48 / 64 / 80 / 96 sessions.
INDEPENDENT: dict[str, tuple[float, ...]] = {
    "vllm-like": (0.805, 0.744, 0.568, 0.371),
    "asc-unit-lru": (0.749, 0.733, 0.655, 0.568),
    "flashstate-eq7": (0.803, 0.712, 0.624, 0.564),
}
INDEPENDENT_WS = (0.71, 0.89, 1.06, 1.24)
INDEPENDENT_SESSIONS = (48, 64, 80, 96)


@dataclass(frozen=True)
class Toggle:
    name: str
    rules: dict[str, Any]
    words: str  # the source's words the toggle is read against (seed 000)


TOGGLES: tuple[Toggle, ...] = (
    Toggle("baseline", {}, "each policy's defaults (the source's reading, issue 22)"),
    Toggle(
        "before-issue-22",
        {"prefill_state_stamp": "end", "hold_chunk_state": True},
        "the defaults before issue 22: every prefill checkpoint stamped with its request's "
        "end, vllm-like's latest chunk state held by its running request",
    ),
    Toggle(
        "stamp-end",
        {"prefill_state_stamp": "end"},
        "a prefill checkpoint no request holds is stamped again when its writer ends",
    ),
    Toggle(
        "chunk-held",
        {"hold_chunk_state": True},
        "vllm-like's running request holds its latest chunk-end state until it ends",
    ),
    Toggle(
        "resume-start",
        {"resume_stamp": "start"},
        "a resumed checkpoint's use is the resume, not the end of the request holding it",
    ),
    Toggle("block-start", {"block_stamp": "start"}, "a block's use is the hit / allocation"),
    Toggle(
        "source-fit",
        {"block_stamp": "start", "prefill_state_stamp": "write", "resume_stamp": "start"},
        "every allocation stamped at its use (policy_table.py's SOURCE_RULES)",
    ),
    Toggle(
        "ancestor-stamp",
        {"ancestor_stamp": True},
        "a hit by a descendant refreshes the checkpoints above it",
    ),
    Toggle(
        "no-resume-pin",
        {"pin_resumed_state": False},
        "the running request does not hold the checkpoint it resumed from",
    ),
    Toggle(
        "no-state-buffer",
        {"live_state_buffer": False},
        "a running request holds no checkpoint-sized live-state buffer",
    ),
    Toggle(
        "free-stranded",
        {"free_stranded_states": True},
        "ghost states (checkpoints whose KV went) are freed with the KV",
    ),
    Toggle("free-orphan-kv", {"free_orphan_kv": True}, "KV no checkpoint needs is freed"),
)


def load_real(path: str) -> Trace:
    """The trace with subagents left out, cached as a pickle in the temp folder (the
    corpus's own folder may be read-only)."""
    src = Path(path)
    if not src.exists():
        raise SystemExit(f"lru_ranking: no trace at {path} (pass --trace)")
    pkl = Path(tempfile.gettempdir()) / f"{src.name}.{src.stat().st_size}.skip.pickle"
    if pkl.exists() and pkl.stat().st_mtime >= src.stat().st_mtime:
        with pkl.open("rb") as fh:
            trace: Trace = pickle.load(fh)
        return trace
    trace = without_subagents(load_trace(path))
    with pkl.open("wb") as fh:
        pickle.dump(trace, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return trace


def _independent(policy: str, n: int) -> str:
    if n not in INDEPENDENT_SESSIONS:
        return "–"
    return f"{INDEPENDENT[policy][INDEPENDENT_SESSIONS.index(n)]:.1%}"


def ranking(
    trace: Trace, toggles: list[Toggle], sessions: list[int], seeds: list[int], workers: int
) -> None:
    configs = [
        SimConfig(p, n, seed=s, policy_opts=dict(t.rules), subagents="skip")
        for t in toggles
        for p in POLICIES
        for n in sessions
        for s in seeds
    ]
    rows = run_configs(trace, configs, workers)

    def hit(t: Toggle, p: str, n: int) -> float:
        sel = [
            r
            for r, c in zip(rows, configs, strict=True)
            if c.policy_opts == t.rules and c.policy == p and c.sessions == n
        ]
        return float(np.mean([r["hit_rate"] for r in sel]))

    def ckpts(t: Toggle, p: str, n: int) -> float:
        sel = [
            r
            for r, c in zip(rows, configs, strict=True)
            if c.policy_opts == t.rules and c.policy == p and c.sessions == n
        ]
        return float(np.mean([r["resident_checkpoints"] for r in sel]))

    loads = " / ".join(str(n) for n in sessions)
    print(
        f"hit rate at {loads} sessions (seeds {seeds}); lead = asc-unit-lru − vllm-like;"
        f" ckpts = resident checkpoints at {max(sessions)}"
    )
    print()
    print(f"| toggle | policy | ours, {loads} | independent | ckpts |")
    print("|---|---|---|---|---|")
    for t in toggles:
        for p in POLICIES:
            ours = " / ".join(f"{hit(t, p, n):.1%}" for n in sessions)
            ind = " / ".join(_independent(p, n) for n in sessions)
            print(f"| {t.name} | {p} | {ours} | {ind} | {ckpts(t, p, max(sessions)):.0f} |")
        lead = " / ".join(
            f"{100 * (hit(t, 'asc-unit-lru', n) - hit(t, 'vllm-like', n)):+.1f}" for n in sessions
        )
        ind_lead = " / ".join(
            f"{100 * (INDEPENDENT['asc-unit-lru'][i] - INDEPENDENT['vllm-like'][i]):+.1f}"
            for i, n in enumerate(INDEPENDENT_SESSIONS)
            if n in sessions
        )
        print(f"| {t.name} | lead (points) | {lead} | {ind_lead} | |")
    print()
    for t in toggles:
        print(f"- {t.name}: {t.words} {t.rules or ''}")


class _Probe(WorkingSet):
    """The measured working set beside candidate definitions, in one run: the same time
    average without the checkpoint, and with each in-flight request's context counted from
    when it is sent (not when it completes)."""

    last: _Probe | None = None

    def __init__(self, window: tuple[float, float], block_tokens: int, checkpoint_blocks: int):
        super().__init__(window, block_tokens, checkpoint_blocks)
        self.kv_only = WorkingSet(window, block_tokens, 0)
        self.at_send = WorkingSet(window, block_tokens, checkpoint_blocks)
        _Probe.last = self

    def update(self, now: float, conv: int, tokens: int | None) -> None:
        super().update(now, conv, tokens)
        self.kv_only.update(now, conv, tokens)
        if tokens is None:
            self.at_send.update(now, conv, None)


def working_set(trace: Trace, sessions: list[int], seed: int) -> None:
    """The working set under each definition (a property of the workload in trace timing:
    every policy replays the same requests at the same times)."""
    orig_ws, orig_request = runner.WorkingSet, driver.Sessions._request

    def request(self: driver.Sessions, a: Any, conv: int, i: int, *rest: Any) -> Any:
        req = orig_request(self, a, conv, i, *rest)
        if _Probe.last is not None:
            _Probe.last.at_send.update(self.loop.now, conv, req.n + req.out)
        return req

    runner.WorkingSet = _Probe  # type: ignore[misc]
    driver.Sessions._request = request  # type: ignore[method-assign,assignment]
    print(
        "| sessions | measured (latest context + 1 checkpoint) | KV only | counted from send |"
        " independent |"
    )
    print("|---|---|---|---|---|")
    try:
        for n in sessions:
            res = simulate(trace, SimConfig("vllm-like", n, seed=seed, subagents="skip"))
            probe = _Probe.last
            assert probe is not None
            cap = res.summary["capacity_blocks"]
            end = res.config.duration_s
            ind = (
                f"{INDEPENDENT_WS[INDEPENDENT_SESSIONS.index(n)]:.2f}"
                if n in INDEPENDENT_SESSIONS
                else "–"
            )
            print(
                f"| {n} | {res.summary['working_set_ratio']:.2f} | "
                f"{probe.kv_only.mean_blocks(end) / cap:.2f} | "
                f"{probe.at_send.mean_blocks(end) / cap:.2f} | {ind} |"
            )
    finally:
        runner.WorkingSet = orig_ws  # type: ignore[misc]
        driver.Sessions._request = orig_request  # type: ignore[method-assign]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(REAL_TRACE))
    ap.add_argument("--sessions", default="48,64,80,96")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--toggles", default=",".join(t.name for t in TOGGLES))
    ap.add_argument("--working-set", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    known = {t.name: t for t in TOGGLES}
    bad = [x for x in args.toggles.split(",") if x not in known]
    if bad:
        raise SystemExit(
            f"lru_ranking: unknown toggle {', '.join(bad)} (known: {', '.join(known)})"
        )
    t0 = time.perf_counter()
    trace = load_real(args.trace)
    print(
        f"{args.trace}: {len(trace.trajectories)} trajectories, subagents left out, "
        f"loaded in {time.perf_counter() - t0:.1f} s; trace timing, 2,531 blocks"
    )
    sessions = [int(x) for x in args.sessions.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    if args.working_set:
        working_set(trace, sessions, seeds[0])
        return 0
    ranking(trace, [known[x] for x in args.toggles.split(",")], sessions, seeds, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
