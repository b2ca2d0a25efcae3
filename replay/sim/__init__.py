"""The hybrid-state cache simulator, in three layers (each imports only those below it):

- `replay.sim.cache`: the cache model and its policies (shared with the emulator):
  `HybridCache` driven online through `lookup / begin / reserve / prefill_done / finish` (see
  `replay.sim.cache.hybrid` for how), `make_policy(name, profile, **opts)` for the policies in
  `POLICY_NAMES` (`replay.sim.cache.policies`), prefix identities `TokenPrefix` (token ids) and
  `LineagePrefix` (the simulator's), a cache's capacity, and `kv_lru`, a plain KV cache. Its
  hot modules run compiled when built (`replay.sim.compiled`).
- `replay.sim.engine`: the engine model the emulators serve and `--timing engine` runs: the
  scheduler (`core`, with `step`, `sequence`, `rules`), the step clock and token scale
  (`clock`, `scale`), and the policy's cache as the scheduler sees it (`cache`).
- here, the run driver and fleets: whole runs, `simulate(trace, SimConfig(...))`
  (`replay.sim.runner`, on the event loop of `replay.sim.driver`), sweeps
  (`replay.sim.sweep`), which `replay simulate` drives, and fleets of replicas
  (`replay.sim.fleet`).

`replay.sim.native` runs the engines' own cache code as oracles: its caches are policies of
the cache model, its scheduler oracle drives whole runs.
"""

from __future__ import annotations

from typing import Any

from replay.sim.compiled import use_build

use_build(
    __path__, ""
)  # the compiled engine-timing executor, when built from these sources (see there)

from replay.sim.cache.hybrid import CacheError, Handle, HybridCache, ResumeInfo  # noqa: E402
from replay.sim.cache.keys import LineagePrefix, Prefix, TokenPrefix  # noqa: E402
from replay.sim.cache.policies import (  # noqa: E402
    POLICY_NAMES,
    Policy,
    PolicyError,
    make_policy,
)

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
