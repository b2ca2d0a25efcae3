"""The engine model: continuous batching with chunked prefill over a policy's cache.

One model for both executors: `replay simulate --timing engine` steps it on a virtual clock
(`replay.sim.executors.EngineExecutor`) and `replay serve-sim` on the wall clock behind HTTP
(`replay.emulator.runner`). Pure and synchronous: `EngineCore.step(now)` plans one
forward pass at model time `now`, returns its duration (`replay.sim.clock.StepClock`) and what
it produced, and applies the effects to the cache at the step's end.

One step, as vLLM's v1 scheduler builds it (vllm/v1/core/sched/scheduler.py, `schedule()`):
running requests are served first, each decoding sequence one token, each prefilling one a
chunk of at most `prefill_cap_tokens` (`--long-prefill-token-threshold`) out of what is left
of `max_batched_tokens` (the token budget); a chunk that does not finish its prompt ends on a
block boundary where the cache aligns states to blocks (`--mamba-cache-mode align`). Then
waiting requests are taken first come, first served while the budget and `max_batch`
(`--max-num-seqs`) allow: each is looked up in the prefix cache and its blocks allocated when
it is scheduled (`get_computed_blocks`, then `allocate_slots`); when the blocks cannot be
had it stays at the head of the queue and the ones behind it wait too (FCFS `break`).
SGLang's scheduler looks a request up in its radix tree when it forms a prefill batch
(`match_prefix` in `get_new_batch_prefill`): the same rule here. FlashState additionally
parks the state a waiting request will resume from (the fork's eviction.py: "parks units
that a waiting request is about to resume from"), so a queue does not evict it: admission
`park`. The last prefill chunk yields the first token. Every sequence reserves room for its
prompt plus output when admitted (vLLM allocates per step and preempts when short; with
whole-request reservation nothing is ever preempted, see README "Engine model").
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from replay.sim.clock import StepClock
from replay.sim.engine_cache import EngineCache, Resume
from replay.sim.keys import Prefix

Admission = Literal["schedule", "park"]
_NO_IDS = np.zeros(0, dtype=np.int64)


def admission_for(name: str) -> Admission:
    """How engine (or policy) `name` admits requests: FlashState parks waiting requests'
    resume states; vLLM and SGLang look a request up only when they schedule it."""
    return "park" if name.startswith("flashstate") else "schedule"


class TokenSink(Protocol):
    """Where a sequence's generated tokens go (the HTTP stream)."""

    def push(self, count: int, finished: bool) -> None:
        """`count` more tokens of the sequence's output are ready; `finished` on the last."""
        ...


@dataclass(eq=False)
class Sequence:
    """One request inside the engine (lengths in the trace's tokens)."""

    rid: int
    prompt: Prefix
    max_tokens: int
    output_ids: np.ndarray = field(default_factory=lambda: _NO_IDS)  # the emulator's ids
    sink: TokenSink | None = None
    prompt_len: int = -1  # default: the prompt's length
    full: Prefix | None = None  # prompt + output identity known up front (the simulator's)
    hint: int = 0  # the ideal resume position where the caller knows it (the simulator)
    arrival: float = 0.0
    resume: Resume | None = None
    computed: int = 0  # prompt positions whose KV exists
    generated: int = 0
    first_token_t: float | None = None
    done_t: float | None = None
    cancelled: bool = False
    rejected: bool = False  # the cache can never hold it

    def __post_init__(self) -> None:
        if self.prompt_len < 0:
            self.prompt_len = self.prompt.length

    @property
    def prefilling(self) -> bool:
        return self.computed < self.prompt_len

    def kv(self) -> tuple[Prefix, int]:
        """The sequence whose KV exists at the end, and its length: the prompt plus every
        generated token but the last (whose KV is never computed)."""
        n = self.prompt_len + max(self.generated - 1, 0)
        if self.full is not None:
            return self.full, n
        full: Prefix = self.prompt.extended(self.output_ids[: self.generated - 1])  # type: ignore[attr-defined]
        return full, n


@dataclass
class EngineCounters:
    """Running totals the metrics endpoint reports (tokens unless named otherwise)."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    generation_tokens: int = 0
    requests_finished: int = 0
    requests_aborted: int = 0
    steps: int = 0
    busy_s: float = 0.0  # model seconds spent in steps


@dataclass
class StepResult:
    duration: float
    started: list[Sequence] = field(default_factory=list)  # admitted this step (resume known)
    emitted: list[tuple[Sequence, int, bool]] = field(default_factory=list)  # seq, tokens, done
    rejected: list[Sequence] = field(default_factory=list)  # can never be admitted


class EngineCore:
    """Scheduler and step clock of one engine; the cache is the policy's."""

    def __init__(
        self, clock: StepClock, cache: EngineCache, admission: Admission = "schedule"
    ) -> None:
        self.clock = clock
        self.cache = cache
        self.admission = admission
        self.max_batch = clock.profile.max_batch
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.counters = EngineCounters()
        # After a failed admission, retry only once memory may have been freed (a request
        # finished or left): a cache that evicts while trying must not churn every step.
        self._blocked = False

    def add(self, seq: Sequence) -> None:
        if self.admission == "park":
            self.cache.park(seq.rid, seq.prompt, seq.prompt_len, seq.arrival, seq.hint)
        self.waiting.append(seq)

    def cancel(self, seq: Sequence, now: float) -> None:
        """Drop a request whose client went away."""
        if seq.cancelled or seq.done_t is not None:
            return
        seq.cancelled = True
        if seq in self.running:
            self.running.remove(seq)
        else:
            with contextlib.suppress(ValueError):
                self.waiting.remove(seq)
        self.cache.abort(seq.rid, now)
        self._blocked = False
        self.counters.requests_aborted += 1

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def _chunk_end(self, start: int, budget: int, prompt_len: int) -> int:
        end = min(prompt_len, start + budget, start + self.clock.prefill_cap_tokens)
        if end < prompt_len:
            bt = self.cache.block_tokens
            aligned = end - end % bt
            if aligned > start:
                end = aligned
        return end

    def _admit_head(self, now: float) -> Sequence | None:
        """Schedule the oldest waiting request if the cache can hold it."""
        seq = self.waiting[0]
        reserve = seq.prompt_len + seq.max_tokens
        resume = self.cache.admit(seq.rid, seq.prompt, seq.prompt_len, reserve, now, seq.hint)
        if resume is None:
            self._blocked = True
            return None
        # An engine always computes at least the prompt's last token (it needs its logits).
        if resume.cached > seq.prompt_len - 1:
            resume = resume.capped(max(seq.prompt_len - 1, 0))
        self.waiting.popleft()
        seq.resume = resume
        seq.computed = resume.cached
        self.running.append(seq)
        self.counters.prompt_tokens += seq.prompt_len
        self.counters.cached_tokens += resume.cached
        return seq

    def _reject_head(self, now: float, result: StepResult) -> None:
        """Nothing runs and the head cannot be admitted: it never will be."""
        seq = self.waiting.popleft()
        seq.rejected = seq.cancelled = True
        self.cache.abort(seq.rid, now)
        self.counters.requests_aborted += 1
        result.rejected.append(seq)
        self._blocked = False

    def step(self, now: float) -> StepResult:
        """Plan and apply one forward pass starting at model time `now`."""
        decoding = [s for s in self.running if not s.prefilling]
        budget = max(0, self.clock.budget_tokens - len(decoding))
        chunks: list[tuple[Sequence, int, int]] = []
        for seq in self.running:
            if budget <= 0:
                break
            if seq.prefilling:
                end = self._chunk_end(seq.computed, budget, seq.prompt_len)
                chunks.append((seq, seq.computed, end))
                budget -= end - seq.computed
        result = StepResult(0.0)
        while self.waiting and budget > 0 and len(self.running) < self.max_batch:
            if self._blocked and self.running:
                break
            new = self._admit_head(now)
            if new is None and not self.running and self.cache.unpark_all(now):
                new = self._admit_head(now)  # parked states yield before the head is lost
            if new is None:
                if not self.running:
                    self._reject_head(now, result)
                    continue
                break  # FCFS: later requests wait behind the head
            result.started.append(new)
            end = self._chunk_end(new.computed, budget, new.prompt_len)
            chunks.append((new, new.computed, end))
            budget -= end - new.computed
        if not decoding and not chunks:
            return result
        duration = self.clock.step_seconds(len(decoding), [(a, b) for _, a, b in chunks])
        end_t = now + duration
        result.duration = duration
        for seq, a, b in chunks:
            self.cache.prefill(seq.rid, a, b, end_t)
            seq.computed = b
            if b == seq.prompt_len:
                seq.first_token_t = end_t
                self._emit(seq, end_t, result)
        for seq in decoding:
            self._emit(seq, end_t, result)
        self.counters.steps += 1
        self.counters.busy_s += duration
        return result

    def _emit(self, seq: Sequence, t: float, result: StepResult) -> None:
        seq.generated += 1
        self.counters.generation_tokens += 1
        done = seq.generated >= seq.max_tokens
        result.emitted.append((seq, 1, done))
        if done:
            seq.done_t = t
            self.running.remove(seq)
            full, n = seq.kv()
            self.cache.finish(seq.rid, full, n, t)
            self._blocked = False
            self.counters.requests_finished += 1
