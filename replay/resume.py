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
# The record's columns of a tiered cache (issue 34): of the cached tokens, those host memory
# and an external store served. Written only by a run that has tiers (`replay.records`).
TIER_COLUMNS: tuple[str, ...] = ("cached_tokens_host", "cached_tokens_external")


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
    # Of `cached`, the tokens served from host memory and from an external store (issue 34;
    # the GPU's share is the rest). Null where the cache has no such tier.
    cached_host: int | None = None
    cached_external: int | None = None

    def capped(self, cached: int) -> Resume:
        """The same lookup, resuming at `cached` instead (the engine recomputes the rest):
        the tokens cut are the prefix's last, so they come off the outer tiers first."""
        host, ext = self.cached_host, self.cached_external
        cut = max(self.cached - cached, 0)
        if ext is not None and cut:
            ext, cut = max(ext - cut, 0), max(cut - ext, 0)
        if host is not None and cut:
            host = max(host - cut, 0)
        return Resume(
            cached,
            self.ideal,
            self.checkpoint_pos,
            self.resident_pos,
            self.placement_miss,
            self.dependency_miss,
            self.capacity_miss,
            host,
            ext,
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

    def tier_columns(self) -> dict[str, int | None]:
        """The record's columns of the tiers (`TIER_COLUMNS`): null without tiers."""
        return {
            "cached_tokens_host": self.cached_host,
            "cached_tokens_external": self.cached_external,
        }
