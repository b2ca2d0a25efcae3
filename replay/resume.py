"""Where a request resumed and why it fell short: one type for the simulator's caches, the
engine model the emulator serves, and the request record (`replay.records`).

A cache's lookup works on its own scratch (`replay.sim.cache.requests.ResumeInfo`: the tree path
and checkpoint it found, positions the policy adjusts), and what leaves the cache is this:
`replay.sim.engine.cache.EngineCache.admit` returns it, the engine model keeps it on the
sequence (`Sequence.resume`, which the emulator's responses read `cached` from), and a
simulated request's record takes its columns (`RequestRecord.set_resume`).
"""

from __future__ import annotations

from dataclasses import dataclass

# The request record's columns a `Resume` fills (the run directory's names: DESIGN.md).
RESUME_COLUMNS: tuple[str, ...] = (
    "cached_tokens",
    "ideal_cached_tokens",
    "resume_pos",
    "checkpoint_pos",
    "resident_pos",
    "placement_miss",
    "dependency_miss",
    "capacity_miss",
)


@dataclass(frozen=True, slots=True)
class Resume:
    """Where a request resumes, and (when the cache knows) why not later.

    `cached` is the resume position: the prompt tokens the engine reuses. `ideal` is the
    longest prefix any earlier request computed; ideal ≥ checkpoint ≥ resident ≥ resume,
    and the redundant prefill ideal − resume splits into placement (ideal − checkpoint),
    capacity (checkpoint − resident) and dependency (resident − resume) misses: the
    source's Equation 5. Null where the cache does not say (a plain KV cache)."""

    cached: int
    ideal: int | None = None
    checkpoint_pos: int | None = None
    resident_pos: int | None = None
    placement_miss: int | None = None
    dependency_miss: int | None = None
    capacity_miss: int | None = None

    def capped(self, cached: int) -> Resume:
        """The same lookup, resuming at `cached` instead (the engine recomputes the rest)."""
        return Resume(
            cached,
            self.ideal,
            self.checkpoint_pos,
            self.resident_pos,
            self.placement_miss,
            self.dependency_miss,
            self.capacity_miss,
        )

    def columns(self) -> dict[str, int | None]:
        """The request record's values (`RESUME_COLUMNS`): the engine reused `cached`
        tokens; the ideal is the resume position where the cache does not know better."""
        return {
            "cached_tokens": self.cached,
            "ideal_cached_tokens": self.ideal if self.ideal is not None else self.cached,
            "resume_pos": self.cached,
            "checkpoint_pos": self.checkpoint_pos,
            "resident_pos": self.resident_pos,
            "placement_miss": self.placement_miss,
            "dependency_miss": self.dependency_miss,
            "capacity_miss": self.capacity_miss,
        }
