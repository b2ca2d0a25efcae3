"""The engine model: continuous batching with chunked prefill over a policy's cache, on a
step clock with physical parameters.

`core.EngineCore` is the scheduler (`step`: allocating blocks step by step; `sequence`: what
it works on and hands back; `rules`: each engine's memory rules as named options); `clock`
prices a step and `scale` a token-scaled profile; `cache` is the policy's cache
(`replay.sim.cache`) as the scheduler sees it. Both executors drive it: `replay simulate
--timing engine` on a virtual clock (`replay.sim.engine_timing`), the emulator on the wall clock.
It imports the cache model below it, never the run driver above it (`replay.sim`'s top
level).

The hot modules (the scheduler, its sequences and clock) run compiled when a build matches
them (`replay.sim.compiled`), as the cache model's do.
"""

from __future__ import annotations

from replay.sim.compiled import use_build

use_build(__path__, "engine")  # the compiled engine modules, when built from these sources
