"""The hybrid-state cache simulator.

- The cache model (shared with the emulator): `HybridCache` driven online through
  `lookup / begin / reserve / prefill_done / finish` (see `replay.sim.cache` for how),
  `make_policy(name, profile, **opts)` for the policies in `POLICY_NAMES`, and prefix
  identities `TokenPrefix` (token ids) and `LineagePrefix` (the simulator's).
- The engine model the emulators serve and `--timing engine` runs: `replay.sim.engine`
  (scheduler), `replay.sim.clock` (step clock, token scale), `replay.sim.engine_cache` (the
  policy's cache as the scheduler sees it; `replay.sim.kv_lru` a plain KV cache).
- Whole runs: `simulate(trace, SimConfig(...))` and sweeps (`replay.sim.sweep`), which
  `replay simulate` drives.
"""

from __future__ import annotations

from typing import Any

from replay.sim.compiled import use_build

use_build(__path__)  # the compiled cache modules, when built from these sources (see there)

from replay.sim.cache import CacheError, Handle, HybridCache, ResumeInfo  # noqa: E402
from replay.sim.keys import LineagePrefix, Prefix, TokenPrefix  # noqa: E402
from replay.sim.policies import POLICY_NAMES, Policy, PolicyError, make_policy  # noqa: E402

__all__ = [
    "POLICY_NAMES",
    "CacheError",
    "Handle",
    "HybridCache",
    "LineagePrefix",
    "Policy",
    "PolicyError",
    "Prefix",
    "ResumeInfo",
    "SimConfig",
    "SimResult",
    "TokenPrefix",
    "make_policy",
    "simulate",
]


def __getattr__(name: str) -> Any:
    # Whole runs pull in the trace, workload and run-directory layers (pandas, pyarrow);
    # the cache alone (what the emulator imports) stays light.
    if name in ("SimConfig", "SimResult", "simulate"):
        from replay.sim import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'replay.sim' has no attribute {name!r}")
