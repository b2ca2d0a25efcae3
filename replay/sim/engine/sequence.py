"""What the engine model (`replay.sim.engine.core.EngineCore`) works on and hands back: one
request inside the engine (`Sequence`), one step's result, the running counters, the error
for an engine that can do nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from mypy_extensions import mypyc_attr

from replay.sim.cache.keys import Prefix
from replay.sim.cache.requests import Resume

_NO_IDS = np.zeros(0, dtype=np.int64)


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
    resume: Resume | None = None  # where it resumed when first scheduled
    computed: int = 0  # positions whose KV exists
    generated: int = 0
    first_token_t: float | None = None
    done_t: float | None = None
    cancelled: bool = False
    rejected: bool = False  # the cache can never hold it
    # Positions to compute before the next token: the prompt; after a preemption, the
    # prompt plus the output so far (recompute).
    target: int = -1
    preemptions: int = 0
    room: int = 0  # positions its blocks cover (allocation per step)
    ready_t: float = 0.0  # until then it waits for its host-memory load (rule host_load)

    def __post_init__(self) -> None:
        if self.prompt_len < 0:
            self.prompt_len = self.prompt.length
        if self.target < 0:
            self.target = self.prompt_len

    @property
    def prefilling(self) -> bool:
        return self.computed < self.target

    def lookup_prefix(self) -> tuple[Prefix, int]:
        """What the engine looks up when it schedules the request: its prompt, or after a
        preemption the prompt plus the output so far (vLLM's `request.num_tokens`)."""
        if self.target == self.prompt_len:
            return self.prompt, self.prompt_len
        if self.full is not None:
            return self.full, self.target
        ext: Prefix = self.prompt.extended(self.output_ids[: self.generated])  # type: ignore[attr-defined]
        return ext, self.target

    def kv(self) -> tuple[Prefix, int]:
        """The sequence whose KV exists at the end, and its length: the prompt plus every
        generated token but the last (whose KV is never computed)."""
        n = self.prompt_len + max(self.generated - 1, 0)
        if self.full is not None:
            return self.full, n
        full: Prefix = self.prompt.extended(self.output_ids[: self.generated - 1])  # type: ignore[attr-defined]
        return full, n


@mypyc_attr(
    native_class=False
)  # compiled (`replay.sim.compiled`): an exception stays a Python class
class EngineStall(RuntimeError):
    """The engine has work it can never do (a bug or an impossible setting), raised instead
    of spinning: names the policy, the request and the model time."""


@dataclass
class EngineCounters:
    """Running totals the metrics endpoint reports (tokens unless named otherwise)."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    # Of `cached_tokens`, those a cache with tiers (issue 34) served from host memory and
    # from the external store (`Resume.cached_host` / `cached_external`); 0 without tiers.
    cached_tokens_host: int = 0
    cached_tokens_external: int = 0
    generation_tokens: int = 0
    requests_finished: int = 0
    requests_aborted: int = 0
    preemptions: int = 0
    steps: int = 0
    busy_s: float = 0.0  # model seconds spent in steps


class StepResult:
    """What one engine step did. A plain slotted class, not a dataclass: one is made per
    step (millions in a fleet's run), and the generated `__init__` with four list factories
    cost about twice this one."""

    __slots__ = (
        "decoding",
        "duration",
        "emitted",
        "preempted",
        "prefill_tokens",
        "rejected",
        "started",
    )

    def __init__(
        self,
        duration: float,
        started: list[Sequence] | None = None,
        emitted: list[tuple[Sequence, int, bool]] | None = None,
        rejected: list[Sequence] | None = None,
        preempted: list[Sequence] | None = None,
        decoding: int = 0,
        prefill_tokens: int = 0,
    ) -> None:
        self.duration = duration
        # admitted this step (resume known)
        self.started: list[Sequence] = [] if started is None else started
        # (sequence, tokens, done)
        self.emitted: list[tuple[Sequence, int, bool]] = [] if emitted is None else emitted
        # can never be admitted
        self.rejected: list[Sequence] = [] if rejected is None else rejected
        # back in the queue (recompute)
        self.preempted: list[Sequence] = [] if preempted is None else preempted
        self.decoding = decoding  # sequences that decoded a token
        self.prefill_tokens = prefill_tokens  # prompt (or recomputed) positions computed

    def __repr__(self) -> str:
        return (
            f"StepResult(duration={self.duration!r}, started={self.started!r}, "
            f"emitted={self.emitted!r}, rejected={self.rejected!r}, "
            f"preempted={self.preempted!r}, decoding={self.decoding!r}, "
            f"prefill_tokens={self.prefill_tokens!r})"
        )

    @property
    def changed(self) -> bool:
        """Whether the step did anything (ran a pass, or moved a request in or out)."""
        return bool(self.duration or self.rejected or self.preempted)
