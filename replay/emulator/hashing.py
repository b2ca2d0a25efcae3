"""Prefix identity from token ids: chained block hashes, like vLLM's prefix cache.

A prompt is cut into units of `unit` tokens; unit i's key hashes units 0..i, so two prompts
share key i exactly when their first (i+1)·unit tokens are equal (up to 64-bit collisions).
The emulator judges a client's prompts from the ids it receives and nothing else.

Vectorised with numpy so a 200K-token prompt hashes in about a millisecond: each unit is
reduced with a fixed random multiplier per position (a universal hash), mixed, and the keys
are chained as a polynomial prefix sum — key_i = mix(Σ_{j≤i} h_j·P^(i−j)) — computed with a
cumulative sum of h_j·P^(−j) (P odd, so invertible modulo 2^64; uint64 wraps modulo 2^64).
Positions that are not unit multiples (a request's exact end) get keys on demand.
"""

from __future__ import annotations

import numpy as np

from replay.splitmix import M2, mix64

_P = 0x9E3779B97F4A7C15  # odd: invertible modulo 2^64
_P_INV = pow(_P, -1, 1 << 64)
_MAX_UNIT = 4096


# Per-position multipliers, fixed for the process (seeded: keys are stable across runs).
_MULT = np.random.default_rng(0x5EED).integers(
    1, np.iinfo(np.int64).max, size=_MAX_UNIT, dtype=np.int64
).astype(np.uint64) | np.uint64(1)


class _Powers:
    """P^i and P^-i modulo 2^64, grown on demand."""

    def __init__(self) -> None:
        self.pos = np.ones(1, dtype=np.uint64)
        self.neg = np.ones(1, dtype=np.uint64)

    def ensure(self, n: int) -> None:
        if n <= self.pos.shape[0]:
            return
        size = max(n, 2 * self.pos.shape[0])
        pos = np.empty(size, dtype=np.uint64)
        neg = np.empty(size, dtype=np.uint64)
        p = q = 1
        for i in range(size):  # once per process, a few thousand steps
            pos[i], neg[i] = p, q
            p = (p * _P) & 0xFFFFFFFFFFFFFFFF
            q = (q * _P_INV) & 0xFFFFFFFFFFFFFFFF
        self.pos, self.neg = pos, neg


_POWERS = _Powers()


def _unit_hashes(tokens: np.ndarray, unit: int) -> np.ndarray:
    """One mixed hash per full unit of `tokens` (uint64 [n // unit])."""
    n = tokens.shape[0] // unit
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    blocks = tokens[: n * unit].astype(np.uint64).reshape(n, unit)
    with np.errstate(over="ignore"):
        return mix64((blocks * _MULT[:unit]).sum(axis=1, dtype=np.uint64) + np.uint64(unit))


def _chain(
    tokens: np.ndarray, unit: int, first: int = 0, prev_sum: np.uint64 | None = None
) -> tuple[np.ndarray, np.uint64]:
    """Keys of units `first`.. of `tokens[first*unit:]`, continuing the running sum
    `prev_sum` of the units before; returns the keys and the new running sum."""
    if not 0 < unit <= _MAX_UNIT:
        raise ValueError(f"hash unit must be in 1..{_MAX_UNIT} tokens, got {unit}")
    h = _unit_hashes(tokens[first * unit :], unit)
    n = h.shape[0]
    start = np.uint64(0) if prev_sum is None else prev_sum
    if n == 0:
        return h, start
    _POWERS.ensure(first + n)
    with np.errstate(over="ignore"):
        s = np.cumsum(h * _POWERS.neg[first : first + n], dtype=np.uint64) + start
        return mix64(s * _POWERS.pos[first : first + n]), np.uint64(s[-1])


def chain_keys(tokens: np.ndarray, unit: int) -> np.ndarray:
    """Chained prefix keys for every full unit of `tokens` (uint64 [len // unit])."""
    return _chain(np.asarray(tokens, dtype=np.int64), unit)[0]


_NO_KEYS = np.zeros(0, dtype=np.uint64)


class PrefixKeys:
    """A token sequence with its chained prefix keys at `unit`-token granularity.

    `keys[i]` identifies the prefix of (i+1)·unit tokens. `key_at(pos)` identifies the prefix
    of any length `pos` (the exact end of a request need not be a unit multiple).
    """

    # Token ids are stored as uint32 (vocabularies are far below 2^32), and a finished
    # request's sequence is handed to the cache `retained`: the cache keeps it alive, so
    # its size is the emulator's memory.
    __slots__ = (
        "_bkeys",
        "_block",
        "_length",
        "_memo",
        "_offset",
        "_sum",
        "keys",
        "tokens",
        "unit",
    )
    _MEMO_MAX = 256  # sub-unit keys remembered per sequence

    def __init__(self, tokens: np.ndarray, unit: int) -> None:
        self.tokens = np.ascontiguousarray(tokens, dtype=np.uint32)
        self.unit = unit
        self.keys, self._sum = _chain(self.tokens, unit)
        self._length = int(self.tokens.shape[0])
        self._offset = 0  # position of tokens[0]
        # Keys at every `_block` boundary before the offset (a retained sequence only).
        self._block = 0
        self._bkeys = _NO_KEYS
        self._memo: dict[int, int] = {}

    def __len__(self) -> int:
        return self._length

    @property
    def length(self) -> int:
        """Tokens in the sequence (the `replay.sim.cache.keys.Prefix` protocol)."""
        return self._length

    def extended(self, more: np.ndarray) -> PrefixKeys:
        """This sequence followed by `more` (e.g. the generated ids), keys recomputed only
        for the units that changed."""
        if self._offset:
            raise ValueError("a retained sequence cannot be extended")
        tokens = np.concatenate([self.tokens, np.asarray(more, dtype=np.uint32)])
        out = PrefixKeys.__new__(PrefixKeys)
        out.tokens, out.unit, out._memo = tokens, self.unit, {}
        out._length, out._offset, out._block, out._bkeys = int(tokens.shape[0]), 0, 0, _NO_KEYS
        # Continue the chain from the last full unit: only the new units are hashed.
        first = self.keys.shape[0]
        new_keys, out._sum = _chain(tokens, self.unit, first, self._sum)
        out.keys = np.concatenate([self.keys, new_keys]) if new_keys.size else self.keys
        return out

    def retained(self, keep_from: int, block: int) -> PrefixKeys:
        """A copy for a cache to keep once the request is over: every unit key and the key
        at every `block` boundary, but token ids only from `keep_from` (rounded down to a
        unit) on. The simulator's cache asks a finished sequence about block boundaries and
        about the blocks it created from it, which start at or after the request's resume
        position; so nothing it needs is lost, and memory grows with the tokens that were
        new to the cache rather than with every prompt ever sent."""
        start = max(0, min(keep_from, self._length)) // self.unit * self.unit
        out = PrefixKeys.__new__(PrefixKeys)
        out.unit, out.keys, out._sum, out._memo = self.unit, self.keys, self._sum, {}
        out.tokens = self.tokens[start - self._offset :].copy()
        out._length, out._offset, out._block = self._length, start, block
        out._bkeys = np.array([self.key_at(p) for p in range(block, start + 1, block)], np.uint64)
        return out

    def key_at(self, pos: int) -> int:
        """Key of the prefix of length `pos` (0 < pos ≤ len)."""
        if not 0 < pos <= self._length:
            raise ValueError(f"position {pos} outside 1..{self._length}")
        full, rest = divmod(pos, self.unit)
        if rest == 0:
            return int(self.keys[full - 1])
        known = self._memo.get(pos)
        if known is not None:
            return known
        lo = full * self.unit - self._offset
        if lo < 0 and self._block and pos % self._block == 0:
            return int(self._bkeys[pos // self._block - 1])
        if lo < 0:
            raise ValueError(
                f"position {pos} lies before the tokens this retained sequence keeps "
                f"(from {self._offset}); only unit and block boundaries are known there"
            )
        base = np.uint64(int(self.keys[full - 1]) if full else 0x1234567)
        tail = self.tokens[lo : pos - self._offset].astype(np.uint64)
        with np.errstate(over="ignore"):
            h = (tail * _MULT[:rest]).sum(dtype=np.uint64) + np.uint64(rest) + base * M2
            key = int(mix64(np.array([h], dtype=np.uint64))[0]) | 1  # odd: never a unit key's twin
        if len(self._memo) < self._MEMO_MAX:
            self._memo[pos] = key
        return key

    def common_units(self, other: PrefixKeys) -> int:
        """How many leading units the two sequences share."""
        n = min(self.keys.shape[0], other.keys.shape[0])
        if n == 0:
            return 0
        diff = np.flatnonzero(self.keys[:n] != other.keys[:n])
        return int(diff[0]) if diff.size else n


def generated_ids(seq: PrefixKeys, count: int, vocab_size: int) -> np.ndarray:
    """The ids a request generates: deterministic in its prompt (like greedy decoding), drawn
    from the vocabulary's ordinary range (the lowest and highest ids of real vocabularies
    hold byte fallbacks and special tokens)."""
    last = int(seq.keys[-1]) if seq.keys.size else 0
    tail = int(seq.tokens[-min(len(seq), 64) :].sum()) if len(seq) else 0
    rng = np.random.default_rng([last & 0xFFFFFFFF, last >> 32, len(seq), tail & 0xFFFFFFFF])
    lo, hi = special_free_range(vocab_size)
    return rng.integers(lo, hi, size=count, dtype=np.int64)


def special_free_range(vocab_size: int) -> tuple[int, int]:
    """[lo, hi) of ids that are neither byte-fallback nor special tokens."""
    lo = min(1000, vocab_size // 8)
    hi = vocab_size - min(1024, vocab_size // 8)
    return lo, max(hi, lo + 1)
