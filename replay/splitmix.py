"""splitmix64's finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom number
generators", 2014), vectorised over numpy uint64: the one bit mixer that prompt synthesis
(`replay.prompts`) and the emulator's prefix hashing (`replay.emulator.hashing`) share.
"""

from __future__ import annotations

import numpy as np

M1 = np.uint64(0xBF58476D1CE4E5B9)  # the finaliser's two multipliers (odd)
M2 = np.uint64(0x94D049BB133111EB)


def mix64(x: np.ndarray) -> np.ndarray:
    """A bijective avalanche over uint64: every input bit affects every output bit."""
    x = x ^ (x >> np.uint64(30))
    x = x * M1
    x = x ^ (x >> np.uint64(27))
    x = x * M2
    return x ^ (x >> np.uint64(31))
