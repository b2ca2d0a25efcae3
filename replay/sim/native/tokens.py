"""Token ids for an engine's own cache code, which hashes real token blocks.

A `TokenPrefix` (the emulator's) already holds the ids it was built from. A `LineagePrefix`
(the simulator's) holds only its descent, "the first `shared` tokens of the parent, then its
own"; its ids are drawn the way the live client draws synthesised ids (`replay.prompts`'
`TokenSpace`: a counter hash of (namespace, position), clear of the vocabulary's reserved
ends), with the sequence that first produced a position as the namespace. So two sequences
have equal ids at [0, p) exactly when the lineage says they share p tokens, which is what
the simulator's own policies see.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from replay.prompts import TokenSpace
from replay.sim.cache.keys import LineagePrefix, Prefix


class TokenSource:
    """Token ids for the prefixes a cache is given (one per cache: the salt is fixed)."""

    def __init__(self, vocab_size: int, salt: int = 0):
        self.space = TokenSpace(vocab_size, salt)

    def ids(self, prefix: Prefix, a: int, b: int) -> np.ndarray:
        """Ids of positions [a, b) of `prefix` as int32."""
        b = min(b, prefix.length)
        if b <= a:
            return np.zeros(0, dtype=np.int32)
        toks = getattr(prefix, "tokens", None)
        if toks is not None:
            return np.asarray(toks[a:b], dtype=np.int32)
        if not isinstance(prefix, LineagePrefix):
            raise TypeError(f"cannot draw token ids for a {type(prefix).__name__}")
        parts: list[np.ndarray] = []
        # Token t is the last one of the prefix [0, t+1): its origin is that prefix's.
        k = bisect_left(prefix.bounds, a + 1)
        t = a
        while t < b:
            hi = min(prefix.bounds[k], b)
            pos = np.arange(t, hi, dtype=np.uint64)
            keys = self.space.block_keys(prefix.origins[k], pos)
            parts.append(self.space.tokens(keys, 1))
            t = hi
            k += 1
        return np.concatenate(parts) if len(parts) > 1 else parts[0]
