"""Experiment: what our `sglang` holds at the demo's load and why its hit rate is 0 (issue 22,
the pressure clause; docs/native-policies.md "SGLang under the demo's pressure").

    .venv/bin/python experiments/sglang_demo_pressure.py        # seeds 0-2, ~1 min

The demo's load: the bundled sample, its token scale, 48 sessions, inline subagents, engine
timing, warm-up TIMED_WARMUP_S. Printed: per seed the hit rate, TTFT and the miss split; for
seed 0 what running requests hold (KV blocks, state slots) and the fate of each finished
request's end state (how long after its request ended it was evicted, and by what); then one
row per variant, each changing one thing the engine model or the policy does:

- `per-step`: the engine allocates `sglang`'s KV chunk by chunk (it runs it up front because
  `SglangCache` has its own `reserve`; docs/engine-model.md), so its SGLang gate and
  retraction rules apply;
- `refresh`: SGLang's waiting-prefix refresh (`schedule_policy.py` L278-298: every 32
  scheduling passes each waiting request's matched state is used, head last), which the
  engine model does not have;
- `430 slots`: the state pool the source gives SGLang ("about 430 checkpoints ... beside
  5.9M tokens of KV") beside the same KV pool.

Instruments the simulator by wrapping its methods, so it runs the interpreted modules.
"""

from __future__ import annotations

import os

os.environ["REPLAY_SIM_INTERPRETED"] = "1"  # the wrappers below must see every call

import collections
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from replay.sim.cache import hybrid as cache_mod
from replay.sim.engine import cache as ec
from replay.sim.engine import core as engine_mod
from replay.sim.runner import SimConfig, SimResult, simulate
from replay.traces import load_trace, sample_path
from replay.traces.scale import resolve_token_scale
from replay.workload import TIMED_WARMUP_S


@contextmanager
def patched(obj: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, make(old))
    try:
        yield
    finally:
        setattr(obj, name, old)


def run(seed: int, opts: dict[str, Any] | None = None) -> SimResult:
    trace = load_trace(sample_path())
    cfg = SimConfig(
        policy="sglang",
        sessions=48,
        seed=seed,
        timing="engine",
        token_scale=resolve_token_scale(trace, None),
        warmup_s=TIMED_WARMUP_S,
        subagents="inline",
        policy_opts=opts or {},
    )
    return simulate(trace, cfg)


def line(res: SimResult) -> str:
    s, e = res.summary, res.engine
    lo, hi = res.config.window
    recs = [
        r
        for r in res.records
        if r.status == "ok" and not r.priming and r.first_token_s and lo <= r.first_token_s < hi
    ]
    p = sum(r.prompt_tokens for r in recs) or 1
    miss = {
        k: sum(getattr(r, k) or 0 for r in recs) / p for k in ("capacity_miss", "dependency_miss")
    }
    return (
        f"hit {s['hit_rate']:.1%}, TTFT p50 / p90 {s['ttft_p50_s']:.1f} / {s['ttft_p90_s']:.1f} s, "
        f"waiting {e['waiting_mean']:.1f}, running {e['running_mean']:.1f}; misses (share of "
        f"the prompt): capacity {miss['capacity_miss']:.2f}, dependency {miss['dependency_miss']:.2f}"
    )


def holdings() -> None:
    """Seed 0: what running requests hold, and when each finished request's end state goes."""
    acc: collections.Counter[str] = collections.Counter()
    ends: dict[int, float] = {}
    gone: dict[int, tuple[float, str]] = {}

    def step(orig: Any) -> Any:
        def f(self: Any, now: float) -> Any:
            r = orig(self, now)
            c = self.cache
            acc["steps"] += 1
            acc["kv"] += c.cache.resident_blocks + c.cache.private_blocks
            acc["states"] += c.cache.resident_states + c.cache.private_states
            for seq in self.running:
                h = c._handles.get(seq.rid)
                if h is not None:
                    acc["req"] += 1
                    acc["ctx"] += -(-(seq.prompt_len + seq.generated) // c.block_tokens)
                    acc["held"] += len(h.pinned) + h.reserved_blocks
                    acc["slots"] += h.reserved_states + (h.state is not None)
                    acc["slots"] += h.held_state is not None
            return r

        return f

    def emit(orig: Any) -> Any:
        def f(self: Any, seq: Any, t: float, result: Any) -> None:
            orig(self, seq, t, result)
            if seq.done_t == t and t > 900:
                full, n = seq.kv()
                info = self.cache.cache.lookup(full, n, t)
                if info.state is not None:
                    ends[info.state.uid] = t

        return f

    def drop(orig: Any) -> Any:
        def f(self: Any, s: Any) -> None:
            if s.resident and s.uid in ends and s.uid not in gone:
                stack = "".join(traceback.format_stack(limit=12))
                why = next((w for w in ("reserve", "prefill_done", "finish") if w in stack), "?")
                gone[s.uid] = (self.clock - ends[s.uid], why)
            orig(self, s)

        return f

    with (
        patched(engine_mod.EngineCore, "step", step),
        patched(engine_mod.EngineCore, "_emit", emit),
        patched(cache_mod.HybridCache, "drop_state", drop),
    ):
        run(0)
    n, q = acc["steps"] or 1, acc["req"] or 1
    print(
        f"seed 0, time-averaged: KV in use {acc['kv'] / n:,.0f} blocks, states {acc['states'] / n:.0f}; "
        f"a running request: context {acc['ctx'] / q:.1f} blocks, holds {acc['held'] / q:.1f} "
        f"blocks and {acc['slots'] / q:.2f} state slots"
    )
    ages = sorted(a for a, _ in gone.values())
    why = collections.Counter(w for _, w in gone.values())
    med = ages[len(ages) // 2] if ages else float("nan")
    print(
        f"end states of requests ending after 900 s: {len(ends)}, evicted {len(gone)} "
        f"(median {med:.1f} s after their request ended; by {dict(why)})"
    )


def refresh(orig: Any) -> Any:
    def f(self: Any, now: float) -> Any:
        c = self.cache.cache
        if self.waiting and len(self.running) < c.max_running:
            self._passes = getattr(self, "_passes", 0) + 1
            if self._passes % 32 == 1:  # WAITING_PREFIX_REFRESH_INTERVAL
                for seq in reversed(list(self.waiting)[:128]):  # head last
                    prompt, n = seq.lookup_prefix()
                    info = c.lookup(prompt, n, now, seq.hint)
                    if info.state is not None:
                        c.eviction.on_resume(info.state, now)
        return orig(self, now)

    return f


def main() -> int:
    for seed in range(3):
        print(f"seed {seed}: {line(run(seed))}", flush=True)
    holdings()
    grow = property(lambda self: True)
    for seed in range(3):
        with patched(ec.SimCache, "can_grow", lambda _: grow):
            print(f"per-step, seed {seed}: {line(run(seed))}", flush=True)
        with patched(engine_mod.EngineCore, "step", refresh):
            print(f"refresh, seed {seed}: {line(run(seed))}", flush=True)
        big = {"state_slots": 430, "kv_tokens": 1336 * 4352}
        print(f"430 slots, seed {seed}: {line(run(seed, big))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
