"""The engine model: continuous batching with chunked prefill, in model seconds.

Pure and synchronous: `EngineCore.step(now)` plans one forward pass at model time `now`,
returns its duration and what it produced, and applies the effects to the cache at the
step's end. `runner.py` maps model time to wall time; tests drive the core directly.

One step, as vLLM's scheduler builds it: every decoding sequence gets one token; the rest
of the token budget (`chunk_tokens`) goes to prompts being prefilled, oldest first, then to
waiting requests admitted in arrival order while the batch has room and the cache can hold
them (head-of-line: a request that does not fit blocks the ones behind it). A chunk that
does not finish its prompt ends on a block boundary. The last prefill chunk yields the
first token. Step time = decode_s_per_step + decode_s_per_seq·decoding + Σ
clock_prefill_seconds of the chunks (the profile's engine clock: its restore-cost model, which
charges attention by position, times `clock_prefill_scale`).
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from replay.engines.emulator.cache import EngineCache, Resume
from replay.engines.emulator.hashing import PrefixKeys
from replay.profiles import ModelProfile


class TokenSink(Protocol):
    """Where a sequence's generated tokens go (the HTTP stream)."""

    def push(self, count: int, finished: bool) -> None:
        """`count` more tokens of the sequence's output are ready; `finished` on the last."""
        ...


@dataclass(eq=False)
class Sequence:
    """One request inside the engine."""

    rid: int
    prompt: PrefixKeys
    max_tokens: int
    output_ids: np.ndarray  # the ids it will generate (deterministic per prompt)
    sink: TokenSink
    arrival: float = 0.0
    resume: Resume | None = None
    computed: int = 0  # prompt positions whose KV exists
    generated: int = 0
    first_token_t: float | None = None
    done_t: float | None = None
    cancelled: bool = False

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def prefilling(self) -> bool:
        return self.computed < self.prompt_len


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


class EngineCore:
    """Scheduler and cost model of one engine; the cache is the policy's."""

    def __init__(self, profile: ModelProfile, cache: EngineCache) -> None:
        self.profile = profile
        self.cache = cache
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.counters = EngineCounters()
        # After a failed admission, retry only once memory may have been freed (a request
        # finished or left): a cache that evicts while trying must not churn every step.
        self._blocked = False

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def cancel(self, seq: Sequence, now: float) -> None:
        """Drop a request whose client went away."""
        if seq.cancelled or seq.done_t is not None:
            return
        seq.cancelled = True
        if seq in self.running:
            self.running.remove(seq)
            self.cache.abort(seq.rid, now)
            self._blocked = False
        else:
            with contextlib.suppress(ValueError):
                self.waiting.remove(seq)
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
        end = min(prompt_len, start + budget)
        if end < prompt_len:
            bt = self.cache.block_tokens
            aligned = end - end % bt
            if aligned > start:
                end = aligned
        return end

    def _admit_head(self, now: float) -> Sequence | None:
        """Admit the oldest waiting request if the cache can hold it."""
        seq = self.waiting[0]
        resume = self.cache.lookup(seq.rid, seq.prompt, now)
        # An engine always computes at least the prompt's last token (it needs its logits).
        cached = min(resume.cached, seq.prompt_len - 1)
        if cached != resume.cached:
            resume = Resume(cached, *_tail(resume))
        if not self.cache.admit(seq.rid, seq.prompt, resume, seq.prompt_len + seq.max_tokens, now):
            self._blocked = True
            return None
        self.waiting.popleft()
        seq.resume = resume
        seq.computed = cached
        self.running.append(seq)
        self.counters.prompt_tokens += seq.prompt_len
        self.counters.cached_tokens += cached
        return seq

    def step(self, now: float) -> StepResult:
        """Plan and apply one forward pass starting at model time `now`."""
        p = self.profile
        decoding = [s for s in self.running if not s.prefilling]
        budget = max(0, p.chunk_tokens - len(decoding))
        chunks: list[tuple[Sequence, int, int]] = []
        for seq in self.running:
            if budget <= 0:
                break
            if seq.prefilling:
                end = self._chunk_end(seq.computed, budget, seq.prompt_len)
                chunks.append((seq, seq.computed, end))
                budget -= end - seq.computed
        started: list[Sequence] = []
        while self.waiting and budget > 0 and len(self.running) < p.max_batch:
            if self._blocked and self.running:
                break
            new = self._admit_head(now)
            if new is None:
                break  # head-of-line: later requests wait behind it, as in FCFS engines
            started.append(new)
            end = self._chunk_end(new.computed, budget, new.prompt_len)
            chunks.append((new, new.computed, end))
            budget -= end - new.computed
        if not decoding and not chunks:
            return StepResult(0.0, started)
        duration = p.decode_s_per_step + p.decode_s_per_seq * len(decoding)
        duration += sum(p.clock_prefill_seconds(a, b) for _, a, b in chunks)
        end_t = now + duration
        result = StepResult(duration, started)
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
            kv = np.asarray(seq.output_ids[: seq.generated - 1])
            self.cache.finish(seq.rid, seq.prompt.extended(kv), t)
            self._blocked = False
            self.counters.requests_finished += 1


def _tail(r: Resume) -> tuple[int | None, ...]:
    return (
        r.ideal,
        r.checkpoint_pos,
        r.resident_pos,
        r.placement_miss,
        r.dependency_miss,
        r.capacity_miss,
    )


def generated_ids(seq: PrefixKeys, count: int, vocab_size: int) -> np.ndarray:
    """The ids a request generates: deterministic in its prompt (like greedy decoding), drawn
    from the vocabulary's ordinary range (the lowest and highest ids of real vocabularies
    hold byte fallbacks and special tokens)."""
    last = int(seq.keys[-1]) if seq.keys.size else 0
    tail = int(seq.tokens[-min(len(seq), 64) :].sum()) if len(seq) else 0
    rng = np.random.default_rng([last & 0xFFFFFFFF, last >> 32, len(seq), tail & 0xFFFFFFFF])
    lo, hi = special_free_range(vocab_size)
    return rng.integers(lo, hi, size=count, dtype=np.int64)


def special_free_range(vocab_size: int) -> tuple[int, int]:
    """[lo, hi) of ids that are neither byte-fallback nor special tokens."""
    lo = min(1000, vocab_size // 8)
    hi = vocab_size - min(1024, vocab_size // 8)
    return lo, max(hi, lo + 1)
