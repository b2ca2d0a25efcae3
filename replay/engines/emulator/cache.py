"""The emulator's view of a prefix cache: the narrow interface the engine clock drives.

The engine model (`engine.py`) never looks inside a cache; it asks where a request can
resume, reserves room for it, reports prefill chunks as they complete (where a policy may
place recurrent checkpoints) and hands finished sequences back. `sim_cache.py` implements
this over the simulator's online cache core (`replay.sim`), so the emulator and
`replay simulate` share one model of each engine's policy.

Positions are token counts from the start of the sequence; times are model seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from replay.engines.emulator.hashing import PrefixKeys


@dataclass(frozen=True, slots=True)
class Resume:
    """Where a request resumes, and (when the cache knows) why not later.

    `cached` is the resume position: the prompt tokens the engine reuses. The other fields
    follow the request columns of the run directory (null where the cache does not say).
    """

    cached: int
    ideal: int | None = None
    checkpoint_pos: int | None = None
    resident_pos: int | None = None
    placement_miss: int | None = None
    dependency_miss: int | None = None
    capacity_miss: int | None = None


class EngineCache(Protocol):
    """What the engine model needs from a cache policy."""

    @property
    def block_tokens(self) -> int:
        """Tokens per cache block (reported as the engine's block size)."""
        ...

    @property
    def capacity_blocks(self) -> int | None:
        """Blocks the cache holds (None: unbounded)."""
        ...

    def lookup(self, rid: int, seq: PrefixKeys, now: float) -> Resume:
        """Where `seq` (a prompt) could resume now. No side effects on residency."""
        ...

    def admit(
        self, rid: int, seq: PrefixKeys, resume: Resume, reserve_tokens: int, now: float
    ) -> bool:
        """Start request `rid` resuming at `resume.cached`, holding room for
        `reserve_tokens` tokens of KV in total (prompt plus output). Evicts what the policy
        chooses; returns False (and changes nothing) when even that cannot make room, so the
        request waits."""
        ...

    def prefill(self, rid: int, start: int, end: int, now: float) -> None:
        """Positions [start, end) of request `rid`'s prompt were computed in one chunk."""
        ...

    def finish(self, rid: int, seq: PrefixKeys, now: float) -> None:
        """Request `rid` ended; `seq` is the prompt plus the generated ids whose KV exists
        (all but the last). The policy keeps what it wants and frees the rest."""
        ...

    def abort(self, rid: int, now: float) -> None:
        """Request `rid` was cancelled before it finished; release it."""
        ...

    def usage(self) -> float:
        """Fraction of the cache's blocks in use (0..1)."""
        ...
