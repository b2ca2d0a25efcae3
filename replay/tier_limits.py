"""The range of a cache tier's size and link (issue 34), for every place such a number enters:
the run spec's flags (`replay.runspec.fields.EngineShape`), the emulator's config (a child's
`--config-json` included: `replay.emulator.config`), a run directory's manifest
(`replay.rundir_models`), `replay plan-host --host-gb` and the dashboard's what-if.

This module imports nothing, so each of those layers can read it."""

from __future__ import annotations

import math

# GiB of host memory, or of an external store, per engine: a pebibyte, past any machine's
# memory, so a typo in the exponent is caught before a run is priced or a tier is sized.
MAX_TIER_GB = 1_048_576
# GB/s of a tier's link per GPU: past 100x NVLink's, so a typo is caught as above.
MAX_LINK_GBS = 100_000


def tier_size_problem(value: object) -> str | None:
    """Why `value` is not a tier size in GiB (a finite number in [0, MAX_TIER_GB], not a
    bool), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r} is not a number of GiB"
    if not (math.isfinite(value) and 0 <= value <= MAX_TIER_GB):
        return f"{value:g} is not a size in [0, {MAX_TIER_GB:,}] GiB"
    return None


__all__ = ["MAX_LINK_GBS", "MAX_TIER_GB", "tier_size_problem"]
