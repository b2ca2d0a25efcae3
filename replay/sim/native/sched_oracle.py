"""vLLM 0.32's own v1 Scheduler behind the engine model's calls: the oracle of issue 22.

Our engine model (`replay.sim.engine.core`, the `vllm` cache policy) is checked request by
request against vLLM's KVCacheManager, but its scheduling under pressure (admission gate,
allocation per step, preemption, when blocks are freed) never was. `OracleCore` puts vLLM's
real `Scheduler` (`vllm_sched_worker.py`, a worker process in `.venv-vllm`) where
`EngineCore` stands: it has the calls `EngineExecutor` makes (`add`, `step`, `has_work`,
`cancel`, the queues, the counters), so the simulator's sessions, tool gaps, warm-up stagger
and inline subagents drive it unchanged. Each step's duration is our
`StepClock.step_seconds` of the tokens vLLM scheduled: a chunk [a, b) while a request is
before max(prompt, num_tokens - 1), as vLLM's `_mamba_block_aligned_split` tells a prefill,
else a decode. `replay()` runs one engine-timed run with it or with our engine model
(`LoggedCore`), through the same wiring as `replay.sim.runner.simulate`, and logs every step
(`StepLog`) for a per-minute series. The command line: experiments/vllm_scheduler_oracle.py.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replay.resume import Resume
from replay.sim import compiled
from replay.sim.driver import SimRequest
from replay.sim.engine.cache import SimCache
from replay.sim.engine.clock import StepClock
from replay.sim.engine.core import EngineCore, EngineCounters, EngineStall, Sequence, StepResult
from replay.sim.engine.rules import rules_for
from replay.sim.events import EventLoop
from replay.sim.measures import summarize
from replay.sim.native.tokens import TokenSource
from replay.sim.native.worker import (
    ENGINES,
    ENV_PYTHON,
    SETUP_HINT,
    SUPPORTED_VLLM,
    EngineSpec,
    NativeError,
    Worker,
)
from replay.sim.runner import (
    RunMeter,
    SimConfig,
    replay_sessions,
    run_shape,
    scaled_settings,
    to_record,
)
from replay.traces.model import Trace

ENGINE = "vllm-scheduler"
ENGINES.setdefault(
    ENGINE,
    EngineSpec(
        "vLLM",
        "vllm",
        ENV_PYTHON,
        SUPPORTED_VLLM,
        SETUP_HINT,
        Path(__file__).with_name("vllm_sched_worker.py"),
    ),
)
MINUTE = 60.0


@dataclass(frozen=True, slots=True)
class OracleResume(Resume):
    """Where vLLM resumed a request, and its longest single-group (KV) hit."""

    kv: int = -1


@dataclass
class StepLog:
    """Per-step figures of one run, for the per-minute series."""

    # (t, duration, running, waiting, blocks held, preempted, state blocks evicted, their
    # summed seconds in the free queue; the last two the oracle's only, NaN for our model)
    rows: list[tuple[float, float, int, int, int, int, float, float]] = field(default_factory=list)
    # t, prompt, cached, KV hit (the oracle's longest single-group hit; -1: not known)
    admits: list[tuple[float, int, int, int]] = field(default_factory=list)

    def add(
        self,
        t: float,
        res: StepResult,
        running: int,
        waiting: int,
        held: int,
        kv: dict[int, int] | None = None,
        evicted: tuple[float, float] = (float("nan"), float("nan")),
    ) -> None:
        self.rows.append((t, res.duration, running, waiting, held, len(res.preempted), *evicted))
        for s in res.started:
            assert s.resume is not None
            k = kv.get(s.rid, -1) if kv is not None else -1
            self.admits.append((t, s.prompt_len, s.resume.cached, k))

    def minutes(self, scale: float) -> list[dict[str, float]]:
        acc: dict[int, dict[str, float]] = collections.defaultdict(
            lambda: collections.defaultdict(float)
        )
        for t, dur, run, wait, held, pre, ev, age in self.rows:
            a = acc[int(t // MINUTE)]
            a["steps"] += 1
            a["dur"] += dur
            a["run"] += run
            a["wait"] += wait
            a["held"] += held
            a["pre"] += pre
            a["ev"] += ev
            a["age"] += age
        for t, n, c, kv in self.admits:
            a = acc[int(t // MINUTE)]
            a["prompt"] += n
            a["cached"] += c
            a["kv"] += kv if kv >= 0 else float("nan")
            a["admitted"] += 1
        out = []
        for m in sorted(acc):
            a = acc[m]
            k = a["steps"] or 1
            out.append(
                {
                    "t": m * MINUTE,
                    "steps": int(a["steps"]),
                    "hit": a["cached"] / a["prompt"] if a["prompt"] else float("nan"),
                    "kv_hit": a["kv"] / a["prompt"] if a["prompt"] else float("nan"),
                    "admitted": int(a["admitted"]),
                    "running": a["run"] / k,
                    "waiting": a["wait"] / k,
                    "held": a["held"] / k,
                    "preempted": int(a["pre"]),
                    "ms_per_real_step": 1000 * a["dur"] / k / scale,
                    # the oracle's Mamba state blocks evicted, and their mean seconds in
                    # the free queue (from freed to evicted)
                    "state_evicted": a["ev"],
                    "state_age_s": a["age"] / a["ev"] if a["ev"] else float("nan"),
                }
            )
        return out


class _Blocks:
    """What `EngineExecutor` reads of an engine's cache."""

    def __init__(self, block_tokens: int, capacity_blocks: int):
        self.block_tokens = block_tokens
        self.capacity_blocks = capacity_blocks


class OracleCore:
    """vLLM's own Scheduler behind `EngineCore`'s calls (see the module docstring)."""

    policy = ENGINE

    def __init__(self, clock: StepClock, worker: Worker, config: dict[str, Any], log: StepLog):
        self.clock = clock
        self.worker = worker
        self.log = log
        p = clock.profile
        self.cache = _Blocks(p.block_tokens, int(config["num_blocks"]) - 1)
        ans = worker.call("init", config=config)
        self.settings: dict[str, Any] = ans["settings"]
        self.used = int(ans["used"])
        self.tokens = TokenSource(p.vocab_size)
        self.seqs: dict[str, Sequence] = {}
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.counters = EngineCounters()
        self.rejected = 0
        self.evicted_kv = self.evicted_states = 0  # cached blocks evicted, by kind

    def add(self, seq: Sequence) -> None:
        rid = str(seq.rid)
        full = seq.full if seq.full is not None else seq.prompt
        ids = self.tokens.ids(full, 0, seq.prompt_len + seq.max_tokens)
        if len(ids) != seq.prompt_len + seq.max_tokens:
            raise NativeError(
                f"request {rid}: the simulator's prefix holds {len(ids)} tokens, not the "
                f"{seq.prompt_len} prompt + {seq.max_tokens} output tokens the oracle needs"
            )
        if seq.max_tokens == 0:
            # A recorded output of 0 tokens: our engine model still emits the first token,
            # and the live client asks for max(output, 1) (replay/client/session.py); vLLM
            # needs max_tokens >= 1. That token's id is never computed into KV (a request's
            # last token never is) nor part of a later prompt: any id serves.
            ids = np.concatenate([ids, ids[-1:]])
        self.worker.call("add", ids, rid=rid, n=seq.prompt_len)
        self.seqs[rid] = seq
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    def cancel(self, seq: Sequence, now: float) -> None:
        rid = str(seq.rid)
        if rid not in self.seqs:
            return
        self._drop(rid)
        self.worker.call("abort", rid=rid)
        self.counters.requests_aborted += 1

    def _drop(self, rid: str) -> Sequence:
        seq = self.seqs.pop(rid)
        if seq in self.running:
            self.running.remove(seq)
        else:
            self.waiting.remove(seq)
        return seq

    def step(self, now: float) -> StepResult:
        ans = self.worker.call("step", t=now)  # the time: for a debugging worker only
        result = StepResult(0.0)
        decoding, chunks = 0, []
        for rid in ans["preempted"]:
            seq = self.seqs[rid]
            self.running.remove(seq)
            self.waiting.insert(0, seq)
            seq.preemptions += 1
            self.counters.preemptions += 1
            result.preempted.append(seq)
        kv: dict[int, int] = {}
        for rid, a, b, prefill, hit, kv_hit in ans["scheduled"]:
            seq = self.seqs[rid]
            if seq in self.waiting:
                self.waiting.remove(seq)
                self.running.append(seq)
            if hit >= 0:  # first scheduling: the cached tokens vLLM computed on admission
                ideal = min(max(hit, seq.hint), seq.prompt_len)
                seq.resume = OracleResume(hit, ideal, kv=kv_hit)
                self.counters.prompt_tokens += seq.prompt_len
                self.counters.cached_tokens += hit
                kv[seq.rid] = kv_hit
                result.started.append(seq)
            if prefill:
                chunks.append((a, b))
                result.prefill_tokens += b - a
            else:
                decoding += 1
        done = set(ans["finished"])
        if ans["scheduled"]:
            result.duration = self.clock.step_seconds(decoding, chunks)
            result.decoding = decoding
            end_t = now + result.duration
            for rid in ans["emitted"]:
                seq = self.seqs[rid]
                seq.generated += 1
                self.counters.generation_tokens += 1
                if seq.first_token_t is None:
                    seq.first_token_t = end_t
                fin = rid in done
                result.emitted.append((seq, 1, fin))
                if fin:
                    seq.done_t = end_t
                    self._drop(rid)
                    self.counters.requests_finished += 1
            self.counters.steps += 1
            self.counters.busy_s += result.duration
        elif self.has_work():
            if self.running or not self.waiting:
                raise EngineStall(
                    f"{ENGINE}: vLLM's scheduler scheduled nothing at t={now:.6f} s with "
                    f"{len(self.running)} running and {len(self.waiting)} waiting"
                )
            # Nothing runs and the head cannot be admitted: vLLM would wait forever (its
            # frontend refuses a prompt longer than max_model_len; this is one the pool
            # cannot hold). Rejected, as our engine model rejects it.
            seq = self.waiting[0]
            self.worker.call("abort", rid=str(seq.rid))
            self._drop(str(seq.rid))
            seq.rejected = seq.cancelled = True
            self.rejected += 1
            self.counters.requests_aborted += 1
            result.rejected.append(seq)
        if (ans["running"], ans["waiting"]) != (len(self.running), len(self.waiting)):
            raise EngineStall(
                f"{ENGINE}: the adapter's queues ({len(self.running)} running, "
                f"{len(self.waiting)} waiting) disagree with vLLM's ({ans['running']}, "
                f"{ans['waiting']}) at t={now:.6f} s"
            )
        self.used = int(ans["used"])
        n_ev, age = ans["evicted"]["state"]
        self.evicted_kv += ans["evicted"]["kv"][0]
        self.evicted_states += n_ev
        self.log.add(now, result, len(self.running), len(self.waiting), self.used, kv, (n_ev, age))
        return result


class LoggedCore(EngineCore):
    """Our engine model, logging each step as `OracleCore` does."""

    log: StepLog

    def step(self, now: float) -> StepResult:
        res = super().step(now)
        held = self.cache.held_blocks() if isinstance(self.cache, SimCache) else 0
        self.log.add(now, res, len(self.running), len(self.waiting), held)
        return res


def _kv_hit(requests: list[SimRequest], window: tuple[float, float]) -> float:
    """The KV-only hit of the requests the summary measures (non-priming, completed, first
    token inside `window`): NaN for our model, which does not report it."""
    prompt = kv = 0
    for r in requests:
        t = r.first_token_s
        if r.priming or r.status != "ok" or r.done_s is None or t is None:
            continue
        if not window[0] <= t < window[1]:
            continue
        if not isinstance(r.info, OracleResume):
            return float("nan")
        prompt += r.n
        kv += r.info.kv
    return kv / prompt if prompt else float("nan")


def oracle_config(clock: StepClock, capacity: int, retention: int | None = 0) -> dict[str, Any]:
    """The worker's settings: the paper's serve command (configs/engines/vllm-glm53-b200.yaml)
    on the token-scaled profile, as our engine model runs it (`replay.sim.engine.clock`: the budgets
    keep their real values per scaled step; blocks and context shrink by the scale).
    `retention`: prefix_cache_retention_interval, 0 as a server resolves it; None (keep
    every state, KVCacheConfig's own default) only as an experiment."""
    p = clock.profile
    return {
        "block": p.block_tokens,
        "num_blocks": capacity + 1,  # the pool's null block is never handed out
        "state_blocks": p.checkpoint_blocks,
        "retention": retention,
        "max_model_len": p.context_tokens,
        "token_budget": clock.budget_tokens,
        "long_prefill_threshold": clock.prefill_cap_tokens,
        "max_num_seqs": p.max_batch,
        "vocab_size": p.vocab_size,
    }


def replay(
    trace: Trace,
    cfg: SimConfig,
    oracle: bool,
    python: str | None = None,
    retention: int | None = 0,
) -> dict[str, Any]:
    """One engine-timed run of `cfg` (policy `vllm`) with our engine model or, `oracle`,
    vLLM's own scheduler; the same wiring as `replay.sim.runner.simulate`."""
    t0 = time.perf_counter()
    profile, settings = scaled_settings(cfg)
    assert settings.capacity is not None
    capacity = settings.capacity.reported_blocks
    clock = StepClock(profile, cfg.token_scale)
    loop = EventLoop(ENGINE if oracle else cfg.policy)
    log = StepLog()
    worker: Worker | None = None
    core: OracleCore | LoggedCore
    if oracle:
        worker = Worker.start(python, engine=ENGINE)
        core = OracleCore(clock, worker, oracle_config(clock, capacity, retention), log)
    else:
        sim_cache = SimCache(settings)
        core = LoggedCore(clock, sim_cache, "schedule", rules_for(cfg.policy))
        core.log = log

    def occupancy() -> tuple[int, int]:
        if isinstance(core, OracleCore):
            return 0, core.used
        c = core.cache
        assert isinstance(c, SimCache)
        return c.cache.resident_states, c.cache.used_blocks

    meter = RunMeter(cfg, profile, occupancy)
    # The executor from its source, for both runs: a compiled one takes an EngineCore only.
    executor_class = compiled.interpreted("engine_timing").EngineExecutor
    executor = executor_class(loop, core, meter.sample, cfg.window)
    try:
        sessions = replay_sessions(trace, cfg, loop, executor, meter, profile)
    finally:
        if worker is not None:
            worker.close()
    name = ENGINE if oracle else cfg.policy
    records = [to_record(r, name, sessions.workload) for r in sessions.recorded()]
    summary = summarize(
        records,
        meter.occ,
        profile,
        policy=name,
        sessions=cfg.sessions,
        seed=cfg.seed,
        timing="engine",
        wall_seconds=time.perf_counter() - t0,
        capacity=capacity,
        working_set_blocks=meter.ws.mean_blocks(cfg.duration_s),
        token_scale=cfg.token_scale,
    )
    summary.update(run_shape(profile, cfg, sessions))
    summary.update(executor.stats.summary())
    summary["preemptions"] = core.counters.preemptions
    summary["admitted_prompt_tokens"] = core.counters.prompt_tokens
    summary["admitted_cached_tokens"] = core.counters.cached_tokens
    summary["finished_requests"] = core.counters.requests_finished
    summary["steps"] = core.counters.steps
    summary["kv_hit_rate"] = _kv_hit(sessions.requests, cfg.window)
    if isinstance(core, OracleCore):
        summary["vllm_settings"] = core.settings
        summary["rejected"] = core.rejected
        summary["evicted_kv_blocks"] = core.evicted_kv
        summary["evicted_state_blocks"] = core.evicted_states
    return {"summary": summary, "minutes": log.minutes(cfg.token_scale), "records": records}
