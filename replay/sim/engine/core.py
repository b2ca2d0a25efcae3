"""The engine model: continuous batching with chunked prefill over a policy's cache.

One model for both executors: `replay simulate --timing engine` steps it on a virtual clock
(`replay.sim.engine_timing.EngineExecutor`) and `replay serve-sim` on the wall clock behind HTTP
(`replay.emulator.runner`). Pure and synchronous: `EngineCore.step(now)` plans one
forward pass at model time `now`, returns its duration (`replay.sim.engine.clock.StepClock`) and what
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
`park`. The last prefill chunk yields the first token.

Memory (`replay.sim.engine.rules`, each rule an option with the engine code it follows): a
request's blocks are taken step by step as it computes (`allocation="step"`), behind an
admission gate (vLLM: its prompt must fit beside what running requests hold; SGLang: prompt
plus output, beside running requests' remaining output); when a running request's next
blocks cannot be had the newest running request (vLLM) or the decoding request with the
fewest output tokens (SGLang) is preempted: it leaves with nothing of its own cached but
what its finished prefill already placed, goes back to the head of the queue and recomputes
its prompt and output so far from whatever the cache still holds. `allocation="upfront"`
(the model before issue 22) reserves prompt plus output at admission and never preempts.
A step that can do nothing while work is pending raises `EngineStall` (never a silent
spin or a stranded request).
"""

from __future__ import annotations

import contextlib
from collections import deque
from typing import Literal

from mypy_extensions import mypyc_attr

from replay.sim.engine.cache import EngineCache, GrowingCache, Resume
from replay.sim.engine.clock import StepClock
from replay.sim.engine.rules import EngineRules, rules_for
from replay.sim.engine.sequence import (
    EngineCounters,
    EngineStall,
    Sequence,
    StepResult,
    TokenSink,
)
from replay.sim.engine.step import Chunk, PerStepScheduling

__all__ = [
    "Admission",
    "EngineCore",
    "EngineCounters",
    "EngineStall",
    "Sequence",
    "StepResult",
    "TokenSink",
    "admission_for",
]

Admission = Literal["schedule", "park"]


def admission_for(name: str) -> Admission:
    """How engine (or policy) `name` admits requests: FlashState parks waiting requests'
    resume states; vLLM and SGLang look a request up only when they schedule it."""
    return "park" if name.startswith("flashstate") else "schedule"


# Compiled (`replay.sim.compiled`), yet open to interpreted subclasses (the scheduler
# oracle's logging core, tests' spinning cores).
@mypyc_attr(allow_interpreted_subclasses=True)
class EngineCore(PerStepScheduling):
    """Scheduler and step clock of one engine; the cache is the policy's.

    `rules`: how it holds memory (default: the engine's own, `rules_for` the cache's
    policy). A cache that cannot allocate step by step (a plain KV cache, a native engine's)
    runs with `allocation="upfront"`."""

    def __init__(
        self,
        clock: StepClock,
        cache: EngineCache,
        admission: Admission = "schedule",
        rules: EngineRules | None = None,
    ) -> None:
        self.clock = clock
        self.cache = cache
        self.admission = admission
        name = getattr(cache, "policy", None)
        self.policy = name if isinstance(name, str) else type(cache).__name__
        rules = rules or rules_for(self.policy)
        self._grower: GrowingCache | None = None
        if rules.allocation == "step":
            if isinstance(cache, GrowingCache) and cache.can_grow:
                self._grower = cache
            else:
                rules = rules.with_(allocation="upfront")
        self.rules = rules
        self.max_batch = clock.profile.max_batch
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.counters = EngineCounters()
        # After a failed admission, retry only once memory may have been freed (a request
        # finished or left): a cache that evicts while trying must not churn every step.
        self._blocked = False
        # A cache with a host tier (issue 34) says how long a request's load takes
        # (`SimCache.load_seconds`); None: no tier, and nothing below changes a step.
        self._loads = (
            getattr(cache, "load_seconds", None)
            if getattr(cache, "host", None) is not None
            else None
        )
        self._step_load = 0.0  # the longest load an `in-step` engine runs in this step
        # Whether a step's `emitted` lists every token (the emulator streams each one) or
        # only first tokens and ends, all a virtual-clock executor reads (it sets False: a
        # fleet's decode steps then make no tuple per sequence per token).
        self.every_token = True

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

    def _chunk_end(self, start: int, budget: int, target: int) -> int:
        """Where a chunk from `start` ends: at most the budget and the cap; one that does not
        finish the prompt ends on a block boundary, or (rule `subblock_chunks` off, vLLM's
        align mode when a block is no wider than the cap) is not run at all (`start`)."""
        cap = self.clock.prefill_cap_tokens
        end = min(target, start + budget, start + cap)
        if end < target:
            bt = self.cache.block_tokens
            aligned = end - end % bt
            if aligned > start:
                end = aligned
            elif not self.rules.subblock_chunks and bt <= min(self.clock.budget_tokens, cap):
                end = start
        return end

    def _no_aligned_chunk(self, seq: Sequence, budget: int) -> bool:
        """Up front: whether `seq` surely gets no chunk in this step's remaining `budget`
        (rule `subblock_chunks` off): less than a block is left and, even from the ideal
        resume position the caller knows, its prompt does not end within it."""
        if self.rules.subblock_chunks:
            return False
        bt = self.cache.block_tokens
        if budget >= bt or bt > min(self.clock.budget_tokens, self.clock.prefill_cap_tokens):
            return False
        return seq.target - min(seq.hint, seq.target - 1) > budget

    def _started(self, seq: Sequence, resume: Resume) -> bool:
        """Bookkeeping of a scheduled request; whether it is its first scheduling."""
        # An engine always computes at least the last token before the next (its logits).
        if resume.cached > seq.target - 1:
            resume = resume.capped(max(seq.target - 1, 0))
        seq.computed = resume.cached
        self.running.append(seq)
        if seq.resume is not None:  # rescheduled after a preemption
            return False
        seq.resume = resume
        self.counters.prompt_tokens += seq.prompt_len
        self.counters.cached_tokens += resume.cached
        if resume.cached_host is not None:  # a cache with tiers: the shares by tier
            self.counters.cached_tokens_host += resume.cached_host
            self.counters.cached_tokens_external += resume.cached_external or 0
        return True

    def _admit_head(self, now: float) -> Sequence | None:
        """Schedule the oldest waiting request if the cache can hold it (up front)."""
        seq = self.waiting[0]
        prompt, n = seq.lookup_prefix()
        reserve = seq.prompt_len + seq.max_tokens
        resume = self.cache.admit(seq.rid, prompt, n, reserve, now, seq.hint)
        if resume is None:
            self._blocked = True
            return None
        self.waiting.popleft()
        self._started(seq, resume)
        if self._loads is not None:  # up front: every load runs in the step (`in-step`)
            self._step_load = max(self._step_load, self._loads(seq.rid))
        return seq

    def _reject(self, seq: Sequence, now: float, result: StepResult) -> None:
        """Nothing else runs and `seq` cannot be held: it never will be."""
        seq.rejected = seq.cancelled = True
        self.cache.abort(seq.rid, now)
        self.counters.requests_aborted += 1
        result.rejected.append(seq)
        self._blocked = False

    def step(self, now: float) -> StepResult:
        """Plan and apply one forward pass starting at model time `now`."""
        result = StepResult(0.0)
        self._step_load = 0.0
        if self._grower is not None:
            decoding, chunks, budget = self._schedule_running_per_step(now, result)
        else:
            decoding, chunks, budget = self._schedule_running(now)
        if self.waiting and not result.preempted:  # vLLM: a step that preempted admits nobody
            if self._grower is not None:
                self._schedule_waiting_per_step(now, budget, chunks, result)
            else:
                self._schedule_waiting(now, budget, chunks, result)
        if not decoding and not chunks:
            wait = self._load_wait(now) if self._loads is not None else 0.0
            if wait > 0:  # only requests waiting for their loads: the engine idles until one is in
                result.duration = wait
                return result
            if self.has_work() and not result.changed:
                head = (self.running or list(self.waiting))[0]
                raise EngineStall(
                    f"{self.policy}: the engine can run nothing at t={now:.6f} s though "
                    f"{len(self.running)} requests run and {len(self.waiting)} wait "
                    f"(request {head.rid}: {head.computed} of {head.target} positions "
                    f"computed, {head.generated} of {head.max_tokens} tokens; rules "
                    f"{self.rules})"
                )
            return result
        duration = self.clock.step_seconds(len(decoding), [(a, b) for _, a, b in chunks])
        if self._step_load > duration:  # rule host_load `in-step`: the loads run with it
            duration = self._step_load
        end_t = now + duration
        result.duration = duration
        result.decoding = len(decoding)
        if chunks:
            result.prefill_tokens = sum(b - a for _, a, b in chunks)
            for seq, a, b in chunks:
                self.cache.prefill(seq.rid, a, b, end_t)
                seq.computed = b
                if b == seq.target:
                    if seq.first_token_t is None:
                        seq.first_token_t = end_t
                    self._emit(seq, end_t, result)
        emit = self._emit
        if self.every_token:
            for seq in decoding:
                emit(seq, end_t, result)
        else:  # only first tokens and ends are reported; the rest is counted
            quiet = 0
            for seq in decoding:
                g = seq.generated
                if g == 0 or g + 1 >= seq.max_tokens:  # `_emit`'s own test of an end
                    emit(seq, end_t, result)
                else:
                    seq.generated = g + 1
                    quiet += 1
            self.counters.generation_tokens += quiet
        self.counters.steps += 1
        self.counters.busy_s += duration
        return result

    def _load_wait(self, now: float) -> float:
        """Seconds until the first running request waiting for its host load has it (0:
        none waits)."""
        ready = [s.ready_t for s in self.running if s.ready_t > now]
        return min(ready) - now if ready else 0.0

    # up front (allocation="upfront") -------------------------------------------------------
    def _schedule_running(self, now: float) -> tuple[list[Sequence], list[Chunk], int]:
        decoding = [s for s in self.running if not s.prefilling]
        budget = max(0, self.clock.budget_tokens - len(decoding))
        chunks: list[Chunk] = []
        for seq in self.running:
            if budget <= 0:
                break
            if seq.prefilling:
                end = self._chunk_end(seq.computed, budget, seq.target)
                if end > seq.computed:
                    chunks.append((seq, seq.computed, end))
                    budget -= end - seq.computed
        return decoding, chunks, budget

    def _schedule_waiting(
        self, now: float, budget: int, chunks: list[Chunk], result: StepResult
    ) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_batch:
            if self._blocked and self.running:
                break
            if self._no_aligned_chunk(self.waiting[0], budget):
                break  # vLLM: no block-aligned chunk fits what is left of the budget
            new = self._admit_head(now)
            if new is None and not self.running and self.cache.unpark_all(now):
                new = self._admit_head(now)  # parked states yield before the head is lost
            if new is None:
                if not self.running:
                    self._reject(self.waiting.popleft(), now, result)
                    continue
                break  # FCFS: later requests wait behind the head
            result.started.append(new)  # up front nothing is preempted: a first start
            end = self._chunk_end(new.computed, budget, new.target)
            if end > new.computed:
                chunks.append((new, new.computed, end))
                budget -= end - new.computed

    def _emit(self, seq: Sequence, t: float, result: StepResult) -> None:
        seq.generated = generated = seq.generated + 1
        self.counters.generation_tokens += 1
        done = generated >= seq.max_tokens
        result.emitted.append((seq, 1, done))
        if done:
            seq.done_t = t
            self.running.remove(seq)
            full, n = seq.kv()
            self.cache.finish(seq.rid, full, n, t)
            self._blocked = False
            self.counters.requests_finished += 1
