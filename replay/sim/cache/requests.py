"""What the cache hands its callers: where a request resumes (`ResumeInfo`, the lookup's
working state), the live request's bookkeeping (`Handle`), and the error for misusing the API
(with the capacity rule the cache core checks a block count by, `bounded_capacity`). What
leaves a cache, for the engine model and the request record, is `replay.resume.Resume`
(`ResumeInfo.resume`; re-exported here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mypy_extensions import mypyc_attr

from replay.resume import Resume
from replay.sim.cache.keys import Prefix
from replay.sim.cache.nodes import Block, State

__all__ = ["CacheError", "Handle", "Resume", "ResumeInfo", "bounded_capacity"]


# Open to interpreted subclasses in the compiled build: vLLM's own cache manager extends both
# (`replay.sim.native.vllm_cache`).
@mypyc_attr(allow_interpreted_subclasses=True)
@dataclass(slots=True)
class ResumeInfo:
    """Where a request can resume, and why not further (positions in tokens): the cache's
    working copy, which policies adjust; `resume()` is what leaves the cache.

    ideal ≥ checkpoint ≥ resident ≥ resume; redundant prefill = ideal − resume, split as
    placement (ideal − checkpoint), capacity (checkpoint − resident) and dependency
    (resident − resume) misses: the source's Equation 5 (`replay.resume.Resume`)."""

    prompt_len: int
    ideal_pos: int  # longest prefix any earlier request computed
    checkpoint_pos: int  # nearest ≤ ideal where a checkpoint was ever taken
    resident_pos: int  # nearest such position whose KV is still resident
    resume_pos: int  # where the engine actually resumes
    kv_pos: int  # longest resident KV prefix (what a KV-only cache could reuse)
    state: State | None = None  # the checkpoint resumed from
    chain: list[Block] = field(default_factory=list)  # resident blocks of the prompt's path
    path: list[Block] = field(default_factory=list)  # every known full block of that path
    # A cache with a host tier (`replay.sim.cache.tiers`, issue 34): whether it has one, the
    # prompt tokens served from host memory, the blocks a load moves (KV and state), and
    # what it loads (host-only entries that are GPU-resident again once the prompt is in).
    tiered: bool = False
    host_tokens: int = 0
    load_blocks: int = 0
    host_blocks: list[Block] = field(default_factory=list)
    host_state: State | None = None
    # An external store behind host memory (`tiers.ExternalStore`): the prompt tokens it
    # served and the blocks it moves into host memory (the loads above include them).
    external_tokens: int = 0
    external_load_blocks: int = 0

    @property
    def redundant(self) -> int:
        return self.ideal_pos - self.resume_pos

    @property
    def placement_miss(self) -> int:
        return self.ideal_pos - self.checkpoint_pos

    @property
    def capacity_miss(self) -> int:
        return self.checkpoint_pos - self.resident_pos

    @property
    def dependency_miss(self) -> int:
        return self.resident_pos - self.resume_pos

    def cap_before_last_token(self, block: int) -> None:
        """Cap this lookup at n − 1 tokens, as vLLM and SGLang cap a hit (the last prompt token
        is recomputed for its logits): resume from the deepest usable state at or below
        n − 1 (on a block whose KV is resident), cap the resident and checkpoint positions
        there too, and keep the resident blocks up to the resume point only (`block`: tokens
        per block); the KV past it is recomputed into blocks of the request's own."""
        cap = max(self.prompt_len - 1, 0)
        if self.resume_pos > cap:
            self.resume_pos, self.state = 0, None
            for b in reversed(self.chain):
                if b.end > self.kv_pos:
                    continue
                best = max(
                    (s for s in b.rstates if s.pos <= cap), key=lambda s: s.pos, default=None
                )
                if best is not None:
                    self.resume_pos, self.state = best.pos, best
                    break
        self.resident_pos = max(self.resume_pos, min(self.resident_pos, cap))
        self.checkpoint_pos = max(self.resident_pos, min(self.checkpoint_pos, cap))
        self.chain = self.chain[: self.resume_pos // block]

    def resume(self) -> Resume:
        """This lookup as it leaves the cache (`replay.resume.Resume`)."""
        return Resume(
            self.resume_pos,
            self.ideal_pos,
            self.checkpoint_pos,
            self.resident_pos,
            self.placement_miss,
            self.dependency_miss,
            self.capacity_miss,
            cached_host=self.host_tokens if self.tiered else None,
            cached_external=self.external_tokens if self.tiered else None,
        )


@mypyc_attr(allow_interpreted_subclasses=True)
@dataclass(slots=True)
class Handle:
    """A live request: what it pins and what memory it holds privately until `finish`."""

    prefix: Prefix
    prompt_len: int
    resume_pos: int
    state: State | None
    pinned: list[Block]
    known: list[Block] = field(default_factory=list)  # the lookup's full-block path
    reserved_blocks: int = 0
    reserved_states: int = 0  # live state buffer + placed checkpoints
    placements: list[int] = field(default_factory=list)  # cached when the prefill is done
    late_placements: list[int] = field(default_factory=list)  # inside the last, partial block
    tail: Block | None = None  # that block, pinned while the request runs
    early_states: list[State] = field(default_factory=list)  # cached at prefill_done
    held_state: State | None = None  # the latest of them, held until the request ends
    total_len: int = 0
    start_s: float = 0.0  # when it began (the `block_stamp="start"` rule stamps blocks so)
    reserved: bool = False
    prefilled: bool = False
    # What it loads from host memory (`ResumeInfo.host_blocks` / `host_state`).
    host_blocks: list[Block] = field(default_factory=list)
    host_state: State | None = None


@mypyc_attr(native_class=False)  # mypyc compiles no subclass of a built-in exception
class CacheError(RuntimeError):
    """Misuse of the cache API (a bug in the caller, not bad input)."""


def bounded_capacity(
    policy: str, own: int | None, override: int | None, pooled: bool
) -> int | None:
    """The blocks a cache holds when handed the block count `override` while its policy holds
    `own` by itself (None: unbounded): `replay.sim.cache.capacity`'s rules 2-4, here so that the
    cache core applies them without importing the resolver (which imports the policies)."""
    if own is None:
        return None  # rule 2: an unbounded policy stays unbounded
    if override is None or override == own:
        return own
    if pooled:  # rule 4: the pools are sized before the cache is built
        raise CacheError(
            f"policy '{policy}' sizes its state and KV pools from the engine's memory: pass "
            f"the block count ({override}) to replay.sim.cache.capacity.resolve_capacity (the "
            "--capacity-blocks / --blocks setting), not to the cache"
        )
    return override
