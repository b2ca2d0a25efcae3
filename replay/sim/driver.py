"""The simulator's clock and sessions: a small deterministic event loop running one process
per session slot (and per subagent), following `replay.workload`'s replay rules.

A process is a generator that yields `Wait(seconds)` or `Send(request)`; the executor (trace
or engine timing: `replay.sim.executors`, `replay.sim.engine_timing`) decides when a sent
request completes and resumes the process then, on the event loop of `replay.sim.events`.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from replay.records import over_context
from replay.sim.cache.keys import LineagePrefix
from replay.sim.events import EventLoop
from replay.traces.lineage import Lineage, common_blocks
from replay.traces.model import Trajectory
from replay.workload import Assignment, Spawn, Workload


@dataclass(slots=True)
class SimRequest:
    """One request of the replay, with its sequence identity and what happened to it."""

    slot: int
    conv: int  # the conversation (assignment instance) it belongs to
    trajectory: Trajectory
    index: int
    priming: bool
    gap_s: float
    n: int  # prompt tokens
    out: int  # output tokens
    seq: LineagePrefix  # prompt + output
    ideal_hint: int
    scheduled_s: float = 0.0
    sent_s: float | None = None
    first_token_s: float | None = None
    done_s: float | None = None
    status: str = "ok"
    error: str | None = None
    info: object = None  # the cache's ResumeInfo at send time
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Wait:
    seconds: float


@dataclass(frozen=True, slots=True)
class Send:
    request: SimRequest


Process = Generator[Wait | Send, None, None]


class Executor(Protocol):
    def submit(self, req: SimRequest, done: Callable[[], None]) -> None: ...


def shared_with(prev: SimRequest | None, tr: Trajectory, i: int, m: int | None = None) -> int:
    """Tokens request `i` shares with its lineage predecessor's prompt + output under exact
    continuation: a prompt that extends the predecessor's prompt (at hash granularity, its
    partial last block aside) continues its output too; otherwise (a context edit) only
    the shared hash blocks count. `m`: the shared leading blocks, where already known."""
    if prev is None:
        return 0
    g = tr.block_size
    if m is None:
        m = common_blocks(tr.blocks(i), prev.trajectory.blocks(prev.index))
    n = int(tr.input_tokens[i])
    if n >= prev.n and m >= prev.n // g:
        return min(prev.n + prev.out, n)
    return min(m * g, n, prev.n)


class Sessions:
    """Starts one process per session slot and turns trajectories into `SimRequest`s."""

    def __init__(self, loop: EventLoop, executor: Executor, workload: Workload, end_s: float):
        self.loop = loop
        self.executor = executor
        self.workload = workload
        self.end_s = end_s
        self.requests: list[SimRequest] = []
        self._seq_ids = itertools.count(1)
        self._conv_ids = itertools.count(1)
        self.context_blocks: dict[int, int] = {}  # conversation -> tokens of its latest state
        self.finished_conversations = 0
        self.assignments = 0  # top-level assignments started
        self.reused_assignments = 0  # ... of which replay a trajectory already replayed
        self.trajectories_replayed: set[str] = set()
        # Called with (now, conversation, tokens or None) whenever a conversation's latest
        # context changes or the conversation ends (the working-set integral).
        self.on_context: Callable[[float, int, int | None], None] | None = None
        self._lineages: dict[Trajectory, Lineage] = {}  # computed once per trajectory
        # The engine's context in tokens (None: unbounded): a request whose prompt and
        # output exceed it is not sent and is recorded as an overflow, as the live client
        # records it (`replay.records.over_context`); the session goes on to its next turn.
        self.context_tokens: int | None = None

    def release(self) -> None:
        """Drop the run's requests, lineages and pending events once it is over and its
        records are made (`replay.sim.runner.release`)."""
        self.requests.clear()
        self._lineages.clear()
        self.loop.clear()

    def start(self) -> None:
        for slot in range(self.workload.cfg.sessions):
            self._run(self._session(slot))

    def _run(self, proc: Process) -> None:
        try:
            cmd = next(proc)
        except StopIteration:
            return
        if isinstance(cmd, Wait):
            self.loop.at(self.loop.now + cmd.seconds, lambda: self._run(proc))
        else:
            req = cmd.request
            error = over_context(req.n, req.out, self.context_tokens)
            if error is None:
                self.executor.submit(req, lambda: self._run(proc))
            else:
                req.status, req.error, req.done_s = "overflow", error, self.loop.now
                self.loop.at(self.loop.now, lambda: self._run(proc))

    def recorded(self) -> list[SimRequest]:
        """The requests a run records: every one sent, and every one refused before it was
        sent (too long for the context), as the live client records both."""
        return [r for r in self.requests if r.sent_s is not None or r.status == "overflow"]

    def _session(self, slot: int) -> Process:
        for a in self.workload.session_assignments(slot):
            if self.loop.now >= self.end_s:
                return
            self.assignments += 1
            self.reused_assignments += a.reuse > 0
            self.trajectories_replayed.add(a.trajectory.id)
            yield from self._assignment(a, None)

    def _context(self, conv: int, tokens: int | None) -> None:
        if tokens is None:
            self.context_blocks.pop(conv, None)
        else:
            self.context_blocks[conv] = tokens
        if self.on_context is not None:
            self.on_context(self.loop.now, conv, tokens)

    def _assignment(self, a: Assignment, parent: SimRequest | None) -> Process:
        conv = next(self._conv_ids)
        by_turn: dict[int, list[Spawn]] = defaultdict(list)
        for sp in a.spawns():
            by_turn[sp.after_turn].append(sp)
        inline = a.subagents == "inline"
        spent = 0.0  # seconds inline subagents took since the last request completed
        if inline:
            t0 = self.loop.now
            yield from self._inline(a, by_turn.get(-1, ()), parent)
            spent = self.loop.now - t0
        else:
            self._spawn(a, by_turn.get(-1, ()), parent)
        issued: dict[int, SimRequest] = {}  # this conversation's completed requests by index
        try:
            for turn in a.turns():
                # The recorded gap already spans the subagents the parent waited for.
                wait = max(turn.gap_s - spent, 0.0)
                if wait > 0:
                    yield Wait(wait)
                if self.loop.now >= self.end_s:
                    return
                link, m = self._link(a.trajectory, turn.index, issued, parent)
                req = self._request(a, conv, turn.index, turn.priming, turn.gap_s, link, m)
                yield Send(req)
                if req.status == "ok":
                    issued[turn.index] = req
                    self._context(conv, req.n + req.out)
                if inline:
                    t0 = self.loop.now
                    yield from self._inline(a, by_turn.get(turn.index, ()), req)
                    spent = self.loop.now - t0
                else:
                    self._spawn(a, by_turn.get(turn.index, ()), req)
        finally:
            self._context(conv, None)
            self.finished_conversations += 1

    def _inline(self, a: Assignment, spawns: Iterable[Spawn], parent: SimRequest | None) -> Process:
        """Subagents replayed in the parent's slot, one after the other."""
        for sp in spawns:
            if sp.delay_s > 0:
                yield Wait(sp.delay_s)
            if self.loop.now >= self.end_s:
                return
            yield from self._assignment(a.child(sp), parent)

    def _spawn(self, a: Assignment, spawns: Iterable[Spawn], parent: SimRequest | None) -> None:
        for sp in spawns:
            self.loop.at(self.loop.now + sp.delay_s, self._starter(a.child(sp), parent))

    def _starter(self, a: Assignment, parent: SimRequest | None) -> Callable[[], None]:
        return lambda: self._run(self._assignment(a, parent))

    def _link(
        self, tr: Trajectory, i: int, issued: dict[int, SimRequest], parent: SimRequest | None
    ) -> tuple[SimRequest | None, int | None]:
        """The request that request `i` descends from and the blocks they share (None: to be
        compared): the conversation's first request descends from the parent's request (a
        subagent's branch point); later ones from the earlier request of the trajectory with
        the longest common block prefix (`Lineage`) — not simply the one just before, which
        may be a side call sharing nothing."""
        if not issued:
            return parent, None
        lin = self._lineages.get(tr)
        if lin is None:
            lin = self._lineages[tr] = Lineage(tr)
        # The predecessor, or where it was never replayed the closest replayed request.
        j, m = lin.among(i, issued)  # `issued`: ascending request index
        return (issued[j], m) if j >= 0 else (None, 0)

    def _request(
        self,
        a: Assignment,
        conv: int,
        i: int,
        priming: bool,
        gap: float,
        prev: SimRequest | None,
        m: int | None = None,
    ) -> SimRequest:
        tr = a.trajectory
        n, out = int(tr.input_tokens[i]), int(tr.output_tokens[i])
        shared = shared_with(prev, tr, i, m)
        seq = LineagePrefix(
            next(self._seq_ids), n + out, prev.seq if prev is not None else None, shared
        )
        req = SimRequest(a.slot, conv, tr, i, priming, gap, n, out, seq, min(shared, n))
        req.scheduled_s = self.loop.now
        self.requests.append(req)
        return req


def api_seconds(tr: Trajectory, i: int, fallback: float) -> float:
    """The recorded request duration, or `fallback` where the trace has none."""
    v = float(tr.api_time[i])
    return fallback if math.isnan(v) or v < 0 else v
