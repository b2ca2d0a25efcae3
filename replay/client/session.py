"""Replaying the workload against one engine: session slots, turns, subagents, retries.

Each session slot takes its trajectories from the workload's seeded sequence (the same for
every engine), sends turn after turn, waiting the capped tool gap (divided by the time scale)
after the previous request completes, and starts subagents as concurrent child sessions.
Every request becomes a `RequestRecord` handed to `emit` the moment it ends, whatever its
fate: ok, error, timeout, overflow (not sent: longer than the engine's context) or cancelled.
A failed turn is retried after a backoff a bounded number of times; then the trajectory is
abandoned and the slot takes the next one. An engine that went away is simply tried again by
the next turn or trajectory, so it is picked up when it comes back.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from replay.client.fleet import ClientFleet, conversation_key
from replay.client.ideal import AlignRuleIndex, PrefixIndex
from replay.engines.adapters import Adapter, Body, StreamResult
from replay.prompts import Context, PromptBuilder
from replay.records import RequestRecord, over_context
from replay.workload import Assignment, Spawn, Turn, Workload


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    time_scale: float = 1.0  # tool gaps and spawn delays are divided by this
    # Record times are wall seconds times this: 1 for real engines; X for emulators started
    # with --time-scale X (they run X times faster than the GPU they model), so their
    # records are in the modelled clock.
    clock_scale: float = 1.0
    retries: int = 3  # attempts after the first before a trajectory is abandoned
    backoff_s: float = 2.0  # wall seconds before the first retry, doubled each time
    backoff_max_s: float = 30.0
    # Prompts longer than this are built in a worker thread (numpy releases the GIL), so a
    # huge prompt does not hold the event loop while other sessions' chunks arrive.
    offload_tokens: int = 32_768


@dataclass
class LiveStats:
    """What the live panel shows for one engine; updated as records are emitted."""

    sessions: int
    clock_scale: float = 1.0  # records' seconds per wall second (see SessionPolicy)
    in_flight: int = 0
    done: int = 0
    errors: int = 0
    overflows: int = 0
    cancelled: int = 0
    abandoned: int = 0
    assignments: int = 0  # top-level trajectories started
    reused_assignments: int = 0  # ... that replay a trajectory this run replayed before
    prompt_tokens: int = 0
    cached_tokens: int = 0
    ideal_cached_tokens: int = 0
    output_tokens: int = 0
    recent_output: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=20000))
    ttft_ms: deque[float] = field(default_factory=lambda: deque(maxlen=2000))
    last_error: str | None = None

    def observe(self, rec: RequestRecord, now_ns: int) -> None:
        if rec.status == "ok":
            self.done += 1
            self.prompt_tokens += rec.prompt_tokens
            self.cached_tokens += rec.cached_tokens or 0
            self.ideal_cached_tokens += rec.ideal_cached_tokens
            self.output_tokens += rec.output_tokens
            self.recent_output.append((now_ns, rec.output_tokens))
            if rec.first_token_s is not None and rec.sent_s is not None:
                self.ttft_ms.append((rec.first_token_s - rec.scheduled_s) * 1e3)
        elif rec.status == "overflow":
            self.overflows += 1
        elif rec.status == "cancelled":
            self.cancelled += 1
        else:
            self.errors += 1
            self.last_error = rec.error

    def output_per_min(self, now_ns: int, span_s: float = 60.0) -> float:
        cut = now_ns - int(span_s * 1e9)
        toks = sum(n for t, n in self.recent_output if t >= cut)
        return toks * 60.0 / span_s / self.clock_scale  # per minute of the records' clock

    def ttft_pct(self, q: float) -> float | None:
        return float(np.percentile(np.fromiter(self.ttft_ms, float), q)) if self.ttft_ms else None

    @property
    def hit_rate(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


class EngineSessions:
    """All session slots of one engine: the sessions it replays, their prompts and live stats."""

    def __init__(
        self,
        name: str,
        adapter: Adapter,
        workload: Workload,
        builder: PromptBuilder,
        *,
        t0_ns: int,
        emit: Callable[[RequestRecord], None],
        context_tokens: int | None = None,
        policy: SessionPolicy | None = None,
        first_ordinals: dict[int, int] | None = None,
        slots: list[int] | None = None,
        fleet: ClientFleet | None = None,
        align_block: int | None = None,
    ):
        self.name = name
        # An engine of replicas (replay.client.fleet): its first adapter builds the bodies,
        # the fleet routes each request to one of them.
        self.fleet = fleet
        self.adapter = fleet.adapter if fleet is not None else adapter
        self.workload = workload
        self.builder = builder
        self.t0_ns = t0_ns
        self._emit = emit
        self.context_tokens = context_tokens
        self.policy = policy or SessionPolicy()
        self.first_ordinals = first_ordinals or {}
        # The session slots this process replays (a worker of `--workers K` owns every K-th
        # slot, replay.client.workers); None: all of them.
        self.slots = list(range(workload.cfg.sessions)) if slots is None else list(slots)
        self.index = PrefixIndex()
        # A hybrid engine in vLLM's align mode (preflight read its block): each record also
        # gets the ideal under that engine's own checkpoint rule (`rule_ideal_tokens`).
        self.rule = AlignRuleIndex(align_block) if align_block else None
        self.stats = LiveStats(sessions=workload.cfg.sessions, clock_scale=self.policy.clock_scale)

    async def close(self) -> None:
        for a in self.fleet.adapters if self.fleet is not None else [self.adapter]:
            await a.close()

    # time ------------------------------------------------------------------------------
    def _s(self, ns: int | None) -> float | None:
        return None if ns is None else (ns - self.t0_ns) / 1e9 * self.policy.clock_scale

    async def _sleep_until(self, ns: int) -> None:
        delay = (ns - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)

    def emit(self, rec: RequestRecord) -> None:
        self.stats.observe(rec, time.perf_counter_ns())
        self._emit(rec)

    # sessions --------------------------------------------------------------------------
    async def run(self) -> None:
        """Run every session slot until cancelled (the orchestrator ends the run)."""
        await asyncio.gather(*(self._session(s) for s in self.slots))

    async def _session(self, slot: int) -> None:
        start = self.first_ordinals.get(slot, 0)
        for a in itertools.islice(self.workload.session_assignments(slot), start, None):
            self.stats.assignments += 1
            self.stats.reused_assignments += a.reuse > 0
            await self._assignment(a)

    async def _assignment(self, a: Assignment) -> bool:
        """Replay one trajectory (and its subagents); False if it was abandoned."""
        ctx = self.builder.context(a.trajectory, a.identity)
        children: list[asyncio.Task[bool]] = []
        by_turn: dict[int, list[Spawn]] = defaultdict(list)
        for sp in a.spawns():
            by_turn[sp.after_turn].append(sp)
        scale = self.policy.time_scale
        inline = a.subagents == "inline"
        finished = True
        try:
            now = time.perf_counter_ns()
            if inline:
                await self._inline(a, by_turn.pop(-1, []), now)
            else:
                self._spawn(a, by_turn.pop(-1, []), now, children)
            prev_done = now
            for turn in a.turns():
                # Inline subagents ran inside the recorded gap (it spans them): the turn is
                # due a gap after the previous request, or when they are done if later.
                scheduled = prev_done + int(turn.gap_s / scale * 1e9)
                await self._sleep_until(scheduled)
                scheduled = max(scheduled, time.perf_counter_ns()) if inline else scheduled
                ok, prev_done = await self._turn(ctx, a, turn, scheduled)
                if not ok:
                    self.stats.abandoned += 1
                    finished = False
                    break
                if inline:
                    await self._inline(a, by_turn.get(turn.index, []), prev_done)
                else:
                    self._spawn(a, by_turn.get(turn.index, []), prev_done, children)
            if children:
                await asyncio.gather(*children)
        finally:
            for c in children:
                c.cancel()
            if children:
                await asyncio.gather(*children, return_exceptions=True)
            ctx.release()
        return finished

    def _spawn(
        self, a: Assignment, spawns: list[Spawn], at_ns: int, into: list[asyncio.Task[bool]]
    ) -> None:
        for sp in spawns:
            into.append(asyncio.create_task(self._child(a.child(sp), at_ns, sp.delay_s)))

    async def _inline(self, a: Assignment, spawns: list[Spawn], at_ns: int) -> None:
        """Subagents replayed in the parent's slot, one after the other."""
        for sp in spawns:
            await self._child(a.child(sp), at_ns, sp.delay_s)
            at_ns = time.perf_counter_ns()

    async def _child(self, a: Assignment, at_ns: int, delay_s: float) -> bool:
        await self._sleep_until(at_ns + int(delay_s / self.policy.time_scale * 1e9))
        return await self._assignment(a)

    # one turn --------------------------------------------------------------------------
    def _prepare(
        self, ctx: Context, i: int, out: int
    ) -> tuple[np.ndarray, int, Body | None, bool | None, tuple[int, int] | None]:
        prompt = ctx.prompt(i)
        extends = ctx.extends_previous(prompt)
        n = len(prompt)
        if over_context(n, out, self.context_tokens) is not None:
            return prompt, 0, None, extends, None
        ideal = min(self.index.longest_prefix(prompt), max(n - 1, 0))
        rule = None
        if self.rule is not None:  # (state hit, the junction it would pin)
            hit = self.rule.state_hit(prompt)
            rule = (hit, self.rule.junction(ideal, hit))
        return prompt, ideal, self.adapter.request_body(prompt, out), extends, rule

    async def _turn(
        self, ctx: Context, a: Assignment, turn: Turn, scheduled_ns: int
    ) -> tuple[bool, int]:
        tr, i = a.trajectory, turn.index
        out = max(int(tr.output_tokens[i]), 1)
        big = int(tr.input_tokens[i]) > self.policy.offload_tokens
        prep = await asyncio.to_thread(self._prepare, ctx, i, out) if big else None
        prompt, ideal, body, extends, rule = prep or self._prepare(ctx, i, out)
        api = float(tr.api_time[i])
        blocks = self.workload.prefix_blocks(tr, i)  # aiperf's theoretical counts
        attempt = 0
        while True:
            rec = RequestRecord(
                engine=self.name,
                session=a.slot,
                trajectory=tr.id,
                agent=tr.agent_id or "main",
                turn=i,
                scheduled_s=self._s(scheduled_ns) or 0.0,
                prompt_tokens=len(prompt),
                ideal_cached_tokens=ideal,
                rule_ideal_tokens=rule[0] if rule is not None else None,
                expected_output_tokens=out,
                tool_gap_s=turn.gap_s,
                priming=turn.priming,
                attempt=attempt,
                trace_prompt_tokens=int(tr.input_tokens[i]),
                trace_latency_s=api if math.isfinite(api) else None,
                extends_previous=extends,
                theoretical_hit_blocks=blocks[0] if blocks is not None else None,
                theoretical_blocks=blocks[1] if blocks is not None else None,
            )
            if body is None:
                rec.status = "overflow"
                rec.error = over_context(len(prompt), out, self.context_tokens)
                self.emit(rec)
                ctx.completed(i, prompt, [])
                return True, time.perf_counter_ns()
            res = StreamResult()
            self.stats.in_flight += 1
            try:
                if self.fleet is not None:
                    key = conversation_key(a.slot, a.identity, rec.agent)
                    req = self.fleet.request(rec, prompt, key)
                    await self.fleet.generate(rec, req, body, res)
                else:
                    await self.adapter.generate(body, res)
            except asyncio.CancelledError:
                self._fill(rec, res)
                rec.status, rec.error = "cancelled", "cancelled at the end of the run"
                self.emit(rec)
                raise
            finally:
                self.stats.in_flight -= 1
            self._fill(rec, res)
            self.emit(rec)
            if res.status == "ok":
                ctx.completed(i, prompt, res.output_ids)
            if res.first_token_ns is not None:
                # The engine computed this prompt (and the ids it fed back): later requests
                # of this engine could ideally resume from it. After `completed`, the
                # context hands it as a view of its buffer, not a copy.
                self.index.insert(ctx.computed(prompt, res.output_ids))
                if self.rule is not None and rule is not None:
                    self.rule.served(prompt, rule[1])
            if res.status == "ok":
                return True, res.done_ns or time.perf_counter_ns()
            attempt += 1
            if attempt > self.policy.retries:
                return False, time.perf_counter_ns()
            p = self.policy
            await asyncio.sleep(min(p.backoff_s * 2 ** (attempt - 1), p.backoff_max_s))
            scheduled_ns = time.perf_counter_ns()

    def _fill(self, rec: RequestRecord, res: StreamResult) -> None:
        rec.sent_s = self._s(res.send_ns) if res.send_ns else None
        rec.first_token_s = self._s(res.first_token_ns)
        rec.done_s = self._s(res.done_ns)
        rec.cached_tokens = res.cached_tokens
        # By tier where the engine split them per request (SGLang's cached_tokens_details).
        rec.cached_tokens_host, rec.cached_tokens_external = res.cached_host, res.cached_external
        rec.output_tokens = res.output_tokens or len(res.output_ids)
        rec.finish_reason = res.finish_reason
        rec.status = res.status  # type: ignore[assignment]
        rec.error = res.error
        if not self.adapter.exact_ids and res.prompt_tokens is not None:
            rec.prompt_tokens = res.prompt_tokens  # a text endpoint counts its own tokens
