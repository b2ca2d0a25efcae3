"""The prefill cost model: the one place a prefill's seconds are computed.

Prefilling positions [a, b) of a sequence whose [0, a) is cached costs

    cost(a, b) = D·(b − a) + E·((b/u)² − (a/u)²)/2 · u    seconds

(the source's restore cost, seed 000), with D, E and the unit u a model profile's fields
(`replay.profiles.ModelProfile`, where their fit is given). GreedyDual-Size prices every
checkpoint it files by it (the prefill saved per block held), and the engine's step clock is
the same shape times the profile's `clock_prefill_scale` (`clock_seconds`), so calibrating
the clock never changes what is evicted.

It is compiled with the cache model (`replay.sim.compiled`) and reads the profile once: as
the profile's own interpreted method, called from the compiled eviction ~137K times in a
48-session full-size replay, it was 15-20% of FlashState's CPU (issue 36 point 8).
"""

from __future__ import annotations

from replay.profiles import ModelProfile


class PrefillCost:
    """`profile`'s prefill cost: restore seconds (`seconds`) and engine-clock seconds
    (`clock_seconds`) of a span of positions."""

    def __init__(self, profile: ModelProfile) -> None:
        self.d = float(profile.prefill_cost_d)
        self.e = float(profile.prefill_cost_e)
        self.unit = float(profile.cost_unit_tokens)
        self.clock_scale = float(profile.clock_prefill_scale)

    def seconds(self, a: float, b: float) -> float:
        """Seconds to prefill positions [a, b) given [0, a) is cached."""
        if b <= a:
            return 0.0
        u = self.unit
        return self.d * (b - a) + self.e * ((b / u) ** 2 - (a / u) ** 2) / 2 * u

    def clock_seconds(self, a: float, b: float) -> float:
        """Modelled GPU seconds of the same prefill: the engine clock of the emulators and
        of the simulator's `engine` timing."""
        return self.clock_scale * self.seconds(a, b)
