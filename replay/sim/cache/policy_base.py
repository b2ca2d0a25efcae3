"""The pieces a cache policy is made of: where checkpoints go (placement), what is evicted
(an `Eviction`, in `replay.sim.cache.eviction`), and a few switches. Concrete policies and their
registry live in `replay.sim.cache.policies`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from replay.profiles import ModelProfile
from replay.sim.cache.hybrid import HybridCache

if TYPE_CHECKING:
    from replay.sim.cache.requests import ResumeInfo
    from replay.sim.cache.store import CacheStore, Eviction


class PolicyError(ValueError):
    """An unknown policy or option; the message names it and lists what is known."""


def _align_down(x: int, step: int) -> int:
    return (x // step) * step


def engine_cache_blocks(profile: ModelProfile) -> int:
    """Blocks one engine's cache holds: the profile's `blocks_per_engine`. Under tensor
    parallelism each block is split across the GPUs, so GLM-5.3-Flash on 2×B200 has the
    source's "entire 2,531-block cache" per engine, not per GPU (`--capacity-blocks` for
    what-ifs)."""
    return profile.blocks_per_engine


class Placement:
    """Where a request writes checkpoints: during prefill of [r, n) and when it ends at e."""

    captures_end = False  # it writes a checkpoint when the request ends

    @property
    def holds_last_state(self) -> bool:
        """The request holds its latest prefill checkpoint until it ends (unless it
        captures a later one then)."""
        return not self.captures_end

    def prefill_positions(self, r: int, n: int, block: int) -> list[int]:
        return []

    def end_positions(self, n: int, e: int, block: int) -> list[int]:
        return []


class NoPlacement(Placement):
    """KV only: no checkpoints at all."""


class ChunkBoundaries(Placement):
    """vLLM: prefill chunks of at most `chunk` tokens end on block boundaries and a state is
    written at each chunk end, so: every ⌊chunk/B⌋ blocks from the resume point plus the
    prompt's last block boundary. Never during decode, never at the request's end."""

    def __init__(self, chunk: int, grid: int | None = None):
        self.chunk = chunk
        self.grid = grid  # the alignment; None: the KV block

    def prefill_positions(self, r: int, n: int, block: int) -> list[int]:
        step = self.grid or block
        last = _align_down(n, step)
        out: list[int] = []
        pos = r
        while pos < last:
            nxt = _align_down(pos + self.chunk, step)
            if nxt <= pos:
                nxt = _align_down(pos, step) + step
            pos = min(nxt, last)
            out.append(pos)
        return out


class Grid(ChunkBoundaries):
    """SGLang: chunk ends aligned to a 256-token grid, the prompt's last grid point, and the
    last grid point of the finished sequence (it tracks states on the grid during decode)."""

    captures_end = True

    def __init__(self, chunk: int, grid: int = 256):
        super().__init__(chunk, grid)

    def end_positions(self, n: int, e: int, block: int) -> list[int]:
        g = self.grid or block
        p = _align_down(e, g)
        return [p] if p > n else []


class EveryN(Placement):
    """Dense: a checkpoint every `every` tokens of prefill."""

    def __init__(self, every: int):
        self.every = every

    def prefill_positions(self, r: int, n: int, block: int) -> list[int]:
        first = _align_down(r, self.every) + self.every
        return list(range(first, n + 1, self.every))


class ArbitraryState(ChunkBoundaries):
    """ASC: vLLM's chunk-end states, plus an exact checkpoint at the prompt's end (in-chunk
    export) and at the request's end (exact capture; the terminal block is kept)."""

    captures_end = True

    def prefill_positions(self, r: int, n: int, block: int) -> list[int]:
        out = super().prefill_positions(r, n, block)
        if n > r and (not out or out[-1] != n):
            out.append(n)
        return out

    def end_positions(self, n: int, e: int, block: int) -> list[int]:
        return [e] if e > n else []


# Modelling rules the source's description leaves open, as switches every policy takes
# (experiments/policy_experiments.py toggles them one at a time; docs/policy-research.md and
# docs/policy-table.md). Values: the allowed choices; the first is the default.
RULES: dict[str, tuple[Any, ...]] = {
    # The running request holds its latest prefill checkpoint (not evictable) until it ends,
    # for placements without an end capture; False: evictable as soon as it is written.
    "hold_chunk_state": (True, False),
    # When a checkpoint written during prefill gets its LRU (or GDS) stamp: when the request
    # ends ("end": released with the request's blocks, as an engine whose running request
    # holds every block it wrote), when it is cached unless the running request holds it,
    # then when that request ends ("release": the source's words, the default of the
    # source-simulation policies), or when it is written ("write").
    "prefill_state_stamp": ("end", "release", "write"),
    # When a checkpoint a request resumed from is stamped as used: when that request ends
    # ("end": released with it) or when it starts ("start": the hit).
    "resume_stamp": ("end", "start"),
    # When the KV blocks a request used or wrote get their LRU stamp: when it ends and frees
    # them ("end", vLLM's free queue) or when it starts (the hit and the allocation).
    "block_stamp": ("end", "start"),
    # Whether a hit refreshes the checkpoints on the path below the one resumed from (a hit
    # by a descendant counts as a use of its ancestors): stamped when the request starts.
    "ancestor_stamp": (False, True),
    # Whether the running request pins the checkpoint it resumed from until it ends (False:
    # the resume is stamped as a use at the start, and the state is evictable meanwhile).
    "pin_resumed_state": (True, False),
    # Whether a running request holds a checkpoint-sized buffer for its live recurrent state
    # (vLLM's running request owns its state page; the source lists no such buffer).
    "live_state_buffer": (True, False),
    # Per-allocation policies: whether evicting a KV block also frees the unpinned
    # checkpoints whose path runs through it (False: they stay as "ghost states", resident
    # and useless, until their own turn in the LRU).
    "free_stranded_states": (False, True),
    # Per-allocation policies: whether KV no resident checkpoint and no live request needs
    # (the tail past a path's last checkpoint) is freed when its request ends.
    "free_orphan_kv": (False, True),
}


class Policy:
    """A named cache policy: placement + eviction + switches. Subclasses set `name` and are
    registered automatically; options are keyword arguments named in `options`, plus the
    modelling rules of `RULES` (defaults per policy in `rule_defaults`)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options: ClassVar[dict[str, Any]] = {}
    rule_defaults: ClassVar[dict[str, Any]] = {}
    keep_terminal_block: ClassVar[bool] = False  # keep the request's last partial block
    frees_dependent_states: ClassVar[bool] = False  # evicting a block frees its checkpoints
    # The eviction the policy's cache runs, when it is built from the cache alone (a policy
    # whose eviction takes its options overrides `make_eviction` instead).
    eviction_class: ClassVar[type[Eviction] | None] = None
    registry: ClassVar[dict[str, type[Policy]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.name:
            Policy.registry[cls.name] = cls

    def __init__(self, profile: ModelProfile, **opts: Any):
        unknown = sorted(set(opts) - set(self.options) - set(RULES))
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise PolicyError(
                f"policy '{self.name}' has no option {', '.join(unknown)} (options: {known}) "
                f"- every policy also takes the rule switches {', '.join(RULES)}"
            )
        rules = {k: v[0] for k, v in RULES.items()} | self.rule_defaults
        for k in set(opts) & set(RULES):
            if opts[k] not in RULES[k]:
                allowed = ", ".join(repr(v) for v in RULES[k])
                raise PolicyError(
                    f"policy '{self.name}': rule {k} cannot be {opts[k]!r} (allowed: {allowed})"
                )
            rules[k] = opts.pop(k)
        self.rules: dict[str, Any] = rules
        self.opts: dict[str, Any] = {**self.options, **opts}
        self.profile = profile
        self.placement = self.make_placement(profile)

    def make_placement(self, profile: ModelProfile) -> Placement:
        return ChunkBoundaries(profile.chunk_tokens)

    def make_eviction(self, cache: CacheStore) -> Eviction:
        if self.eviction_class is None:
            raise NotImplementedError(f"policy '{self.name}' names no eviction_class")
        return self.eviction_class(cache)

    def capacity_blocks(self, profile: ModelProfile) -> int | None:
        return engine_cache_blocks(profile)

    def state_slots(self, profile: ModelProfile) -> int | None:
        """Checkpoints in a separate state pool (None: one shared pool)."""
        return None

    def prefill_positions(self, info: ResumeInfo, n: int, block: int) -> list[int]:
        """Where a request resuming as `info` writes checkpoints during its prefill."""
        return self.placement.prefill_positions(info.resume_pos, n, block)

    def make_cache(self, profile: ModelProfile, capacity_blocks: int | None = None) -> HybridCache:
        """The cache this policy runs in (native policies run the engine's own code)."""
        return HybridCache(profile, self, capacity_blocks)

    def adjust(self, info: ResumeInfo) -> None:
        """Turn the cache's view of a lookup into this policy's resume (default: as is)."""
