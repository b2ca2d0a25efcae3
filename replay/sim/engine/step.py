"""The engine model's scheduling when blocks are allocated step by step
(`replay.sim.engine.rules`, allocation="step"): running requests take the blocks each step
needs, a request short of them preempts (vLLM: the newest running; SGLang: the decoding one
with the fewest outputs), and waiting requests pass the engine's admission gate. A mixin of
`replay.sim.engine.core.EngineCore`; the rules and their engine code are in `replay.sim.engine.rules`."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from mypy_extensions import mypyc_attr

from replay.sim.engine.cache import EngineCache, GrowingCache
from replay.sim.engine.clock import StepClock
from replay.sim.engine.rules import SGLANG_CLIP_MAX_NEW_TOKENS, EngineRules
from replay.sim.engine.sequence import EngineCounters, Resume, Sequence, StepResult

Chunk = tuple[Sequence, int, int]  # a prefill chunk [a, b) of a sequence


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled; EngineCore's subclasses may not be
class PerStepScheduling:
    """Allocation per step for `EngineCore` (which sets these attributes)."""

    clock: StepClock
    cache: EngineCache
    admission: str
    rules: EngineRules
    max_batch: int
    waiting: deque[Sequence]
    running: list[Sequence]
    counters: EngineCounters
    _grower: GrowingCache | None
    _blocked: bool
    _loads: Callable[[int], float] | None
    _step_load: float

    # EngineCore's, shared by both allocations (defined there; a compiled class cannot
    # declare them for the type checker alone).
    def _chunk_end(self, start: int, budget: int, target: int) -> int:
        raise NotImplementedError

    def _started(self, seq: Sequence, resume: Resume) -> bool:
        raise NotImplementedError

    def _reject(self, seq: Sequence, now: float, result: StepResult) -> None:
        raise NotImplementedError

    def _schedule_running_per_step(
        self, now: float, result: StepResult
    ) -> tuple[list[Sequence], list[Chunk], int]:
        """Running requests in order, each taking the blocks its step needs (decode: the
        token it computes; prefill: its chunk); when they cannot be had, preempt."""
        decoding: list[Sequence] = []
        chunks: list[Chunk] = []
        running = self.running
        # A running request prefills while it has positions left to compute; whether one
        # does is read as it is reached below (nothing before it in the loop changes that
        # but a preemption, which also takes it out of the step).
        n_decoding = 0
        for s in running:
            if s.computed >= s.target:
                n_decoding += 1
        budget = max(0, self.clock.budget_tokens - n_decoding)
        if n_decoding == len(running):
            # Every running request decodes (most steps): each runs when its blocks cover
            # the token it computes, and the loop below is only needed when one is short.
            for s in running:
                if s.prompt_len + s.generated > s.room:
                    break
            else:
                return list(running), chunks, budget
        gone: set[int] = set()  # ids of the requests preempted in this step
        for seq in list(running):
            if gone and id(seq) in gone:
                continue
            computed = seq.computed
            pre = computed < seq.target
            if pre:
                if seq.ready_t > now:
                    continue  # rule host_load `async`: its blocks are still loading
                end = self._chunk_end(computed, budget, seq.target)
                if budget <= 0 or end <= computed:
                    continue  # vLLM: nothing to schedule for it this step, the next may run
                need = end
            else:
                need = seq.prompt_len + seq.generated  # the KV of the token it decodes
            if need > seq.room:
                n_before = len(result.preempted)
                outcome = self._grow(seq, need, now, result)
                gone.update(id(s) for s in result.preempted[n_before:])
                if outcome == "gone":
                    break  # vLLM: the request could not be scheduled; nor can later ones
                if outcome == "stalled":
                    continue
            if pre:
                chunks.append((seq, computed, need))
                budget -= need - computed
            else:
                decoding.append(seq)
        if gone:  # a victim scheduled earlier in this step does not run
            decoding = [s for s in decoding if id(s) not in gone]
            chunks = [c for c in chunks if id(c[0]) not in gone]
        return decoding, chunks, budget

    def _grow(self, seq: Sequence, tokens: int, now: float, result: StepResult) -> str:
        """Take room for `seq` to hold `tokens` positions: "ok", "stalled" (no room and no
        one to preempt: it waits a step) or "gone" (it was preempted or rejected)."""
        grower = self._grower
        assert grower is not None
        while (room := grower.grow(seq.rid, tokens, now)) is None:
            victim = self._victim()
            if victim is None:
                return "stalled"
            if victim is seq and len(self.running) == 1:
                if self.cache.unpark_all(now):
                    continue  # parked states yield before the only request is lost
                self.running.remove(seq)
                self._reject(seq, now, result)
                return "gone"
            self._preempt(victim, now, result)
            if victim is seq:
                return "gone"
        seq.room = room
        return "ok"

    def _victim(self) -> Sequence | None:
        """Who is preempted when a running request cannot grow (rule `preemption`)."""
        rule = self.rules.preemption
        if rule == "none" or not self.running:
            return None
        if rule == "fewest-output":
            dec = [s for s in self.running if not s.prefilling]
            if dec:  # SGLang retracts decoding requests: fewest outputs, longest input
                return min(dec, key=lambda s: (s.generated, -s.prompt_len))
        return self.running[-1]

    def _preempt(self, seq: Sequence, now: float, result: StepResult) -> None:
        """Recompute preemption: its blocks go (what its finished prefill placed stays
        cached), it goes back to the head of the queue to recompute what it had."""
        self.running.remove(seq)
        self.cache.abort(seq.rid, now)
        seq.target = seq.prompt_len + seq.generated
        seq.computed = seq.room = 0
        seq.ready_t = 0.0  # a load in flight is dropped with its blocks
        seq.preemptions += 1
        self.counters.preemptions += 1
        self.waiting.appendleft(seq)
        if self.admission == "park":
            prompt, n = seq.lookup_prefix()
            self.cache.park(seq.rid, prompt, n, now, seq.hint)
        result.preempted.append(seq)
        self._blocked = False

    def _gate(self, seq: Sequence) -> tuple[int, int]:
        """The admission gate for `seq` (rule `gate`): the tokens of it that must fit, and
        the blocks running requests are promised beyond what they hold."""
        prompt_tokens = seq.target
        if self.rules.gate == "prompt":
            return prompt_tokens, 0
        bt, clip = self.cache.block_tokens, SGLANG_CLIP_MAX_NEW_TOKENS
        out = sum(min(s.max_tokens - s.generated, clip) for s in self.running)
        left = sum(-(-(s.target - s.computed) // bt) for s in self.running if s.prefilling)
        own = min(seq.max_tokens - seq.generated, clip)
        return prompt_tokens + own, left + -(-out // bt)

    def _await_load(
        self,
        seq: Sequence,
        resume: Resume,
        start: int,
        now: float,
        ready_t: float,
        result: StepResult,
    ) -> bool:
        """Rule host_load `async` (vLLM): the admitted head of the queue takes the blocks of
        what it loads (the positions up to `start`) and runs once they are in, at `ready_t`;
        the next waiting request may be scheduled meanwhile. False (it was given back and
        waits) when those blocks cannot be had."""
        grower = self._grower
        assert grower is not None
        room = grower.grow(seq.rid, start, now)
        if room is None:
            grower.unadmit(seq.rid, now)
            self._blocked = True
            return False
        self.waiting.popleft()
        seq.room = room
        seq.ready_t = ready_t
        if self._started(seq, resume):
            result.started.append(seq)
        return True

    def _schedule_waiting_per_step(
        self, now: float, budget: int, chunks: list[Chunk], result: StepResult
    ) -> None:
        grower = self._grower
        assert grower is not None
        while self.waiting and budget > 0 and len(self.running) < self.max_batch:
            if self._blocked and self.running:
                break
            seq = self.waiting[0]
            prompt, n = seq.lookup_prefix()
            gate_tokens, committed = self._gate(seq)
            resume = grower.admit_step(seq.rid, prompt, n, gate_tokens, committed, now, seq.hint)
            if resume is None and not self.running and self.cache.unpark_all(now):
                resume = grower.admit_step(
                    seq.rid, prompt, n, gate_tokens, committed, now, seq.hint
                )
            if resume is None:
                if not self.running:
                    self._reject(self.waiting.popleft(), now, result)
                    continue
                self._blocked = True
                break  # FCFS: later requests wait behind the head
            start = min(resume.cached, max(seq.target - 1, 0))
            load = self._loads(seq.rid) if self._loads is not None else 0.0
            if load > 0 and self.rules.host_load == "async":
                if self._await_load(seq, resume, start, now, now + load, result):
                    continue
                if not self.running:
                    self._reject(self.waiting.popleft(), now, result)
                    continue
                break
            self._step_load = max(self._step_load, load)
            end = self._chunk_end(start, budget, seq.target)
            if end <= start:  # vLLM: no block-aligned chunk fits the budget: `break`
                grower.unadmit(seq.rid, now)
                break
            room = grower.grow(seq.rid, end, now)
            if room is None:
                grower.unadmit(seq.rid, now)
                if not self.running:
                    self._reject(self.waiting.popleft(), now, result)
                    continue
                self._blocked = True
                break
            self.waiting.popleft()
            seq.room = room
            if self._started(seq, resume):
                result.started.append(seq)
            chunks.append((seq, seq.computed, end))
            budget -= end - seq.computed
