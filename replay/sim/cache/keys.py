"""Prefix identities: how the cache tells that two sequences share their first p tokens.

The cache never sees tokens or trace hash ids. It asks a `Prefix` for `key_at(p)`, an integer
that identifies the prefix [0, p) of a sequence: two prefixes with equal keys at p hold the
same p tokens (so a KV block ending at p, or a recurrent checkpoint taken at exactly p, can be
shared). Two implementations:

- `TokenPrefix` (for the emulator, which has real token ids): chained keys at a fixed
  granularity g (64 tokens, like the trace's hash blocks) plus, for a position inside a
  g-chunk, a hash of the chunk's first tokens. Exact for any position.
- `LineagePrefix` (for the simulator, which has only lengths and hash-id prefix relations):
  a sequence is its parent's first `shared` tokens followed by tokens of its own, so the
  identity of [0, p) is "the sequence that first produced position p" and p. Exact under
  the lineage the simulator builds, and O(log turns) per key.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Protocol

# Keys pack (origin sequence, position) into one int; positions stay below 2**32.
_POS_BITS = 32


class Prefix(Protocol):
    """What the cache needs to know about a sequence: its length and its prefix keys."""

    @property
    def length(self) -> int: ...

    def key_at(self, p: int) -> int:
        """Identity of the prefix [0, p) for 1 ≤ p ≤ length."""
        ...


class TokenPrefix:
    """A token-id sequence keyed by chained hashes at granularity `g` (deterministic:
    Python hashes tuples of ints identically in every process)."""

    __slots__ = ("_chain", "_salt", "g", "tokens")

    def __init__(self, tokens: Sequence[int], g: int = 64, salt: int = 0):
        self.tokens = list(tokens)
        self.g = g
        self._salt = salt
        chain: list[int] = []
        prev = hash(("prefix", salt))
        for i in range(0, len(self.tokens) - len(self.tokens) % g, g):
            prev = hash((prev, tuple(self.tokens[i : i + g])))
            chain.append(prev)
        self._chain = chain  # chain[k] identifies the prefix [0, (k+1)·g)

    @property
    def length(self) -> int:
        return len(self.tokens)

    def key_at(self, p: int) -> int:
        k, rest = divmod(p, self.g)
        if rest == 0:
            return self._chain[k - 1]
        base = self._chain[k - 1] if k else hash(("prefix", self._salt))
        return hash((base, tuple(self.tokens[k * self.g : p]), "partial"))

    def extended(self, more: Sequence[int]) -> TokenPrefix:
        """This sequence followed by `more` (e.g. the prompt plus the generated ids)."""
        return TokenPrefix([*self.tokens, *more], self.g, self._salt)


class LineagePrefix:
    """A sequence defined by descent: the first `shared` tokens of `parent`, then its own.

    `bounds[k]`/`origins[k]`: positions p ≤ bounds[k] (and above bounds[k-1]) were first
    produced by sequence `origins[k]`. Sequence ids must be unique within one cache.
    """

    __slots__ = ("bounds", "length", "origins", "seq_id")

    def __init__(
        self,
        seq_id: int,
        length: int,
        parent: LineagePrefix | None = None,
        shared: int = 0,
    ):
        self.seq_id = seq_id
        self.length = length
        shared = min(shared, length, parent.length) if parent is not None else 0
        if parent is None or shared <= 0:
            self.bounds = [length]
            self.origins = [seq_id]
            return
        k = bisect_left(parent.bounds, shared)
        bounds = parent.bounds[:k]
        origins = parent.origins[:k]
        bounds.append(shared)
        origins.append(parent.origins[k])
        if length > shared:
            bounds.append(length)
            origins.append(seq_id)
        self.bounds = bounds
        self.origins = origins

    def key_at(self, p: int) -> int:
        return (self.origins[bisect_left(self.bounds, p)] << _POS_BITS) | p

    def keys_every(self, step: int, upto: int) -> list[int]:
        """`key_at(p)` for p = step, 2·step, … ≤ min(upto, length), in one merge pass."""
        out: list[int] = []
        bounds, origins = self.bounds, self.origins
        k, last = 0, min(upto, self.length)
        for p in range(step, last + 1, step):
            while bounds[k] < p:
                k += 1
            out.append((origins[k] << _POS_BITS) | p)
        return out

    def common_prefix(self, other: LineagePrefix) -> int:
        """Length of the longest common prefix with `other` (exact under the lineage)."""
        return common_prefix_length(self, other, 0, min(self.length, other.length))


def common_prefix_length(a: Prefix, b: Prefix, lo: int, hi: int) -> int:
    """The longest common prefix of `a` and `b` within [lo, hi], given they share `lo`
    tokens: keys agree on a prefix-closed set of positions, so a binary search finds it."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.key_at(mid) == b.key_at(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def shared_length(q: Prefix, src: Prefix, lo: int, hi: int) -> int:
    """Length of the common prefix of `q` and `src` within [lo, hi], given they share `lo`
    (the end checked first: a sibling usually holds all of it or little)."""
    hi = min(hi, q.length, src.length)
    if hi <= lo:
        return lo
    if q.key_at(hi) == src.key_at(hi):
        return hi
    return common_prefix_length(q, src, lo, hi - 1)
