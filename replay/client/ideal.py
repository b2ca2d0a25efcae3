"""The ideal resume position: the longest prefix of a prompt that any earlier request of the
same engine computed (an unbounded cache that never evicts and matches token by token).

A computed sequence is a request's prompt plus the ids it generated except the last (the
last generated token was never fed back, so it has no KV). Sequences are indexed as a trie
over fixed chunks of tokens, keyed by a chained hash of the chunks so far; each node keeps the
distinct chunks that followed it, so the match is exact to the token even inside a chunk.
"""

from __future__ import annotations

import numpy as np


def _lcp_bytes(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on prefix equality: O(log n) slice compares
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixIndex:
    """Every computed sequence of one engine; `longest_prefix` answers the ideal cache hit."""

    def __init__(self, chunk_tokens: int = 256):
        self.chunk = chunk_tokens
        self._next: dict[int, set[bytes]] = {}

    @staticmethod
    def _bytes(ids: np.ndarray | list[int]) -> bytes:
        return np.ascontiguousarray(ids, dtype=np.int32).tobytes()

    def insert(self, ids: np.ndarray | list[int]) -> None:
        b = self._bytes(ids)
        cb = self.chunk * 4
        h = 0
        nxt = self._next
        for start in range(0, len(b), cb):
            piece = b[start : start + cb]
            nxt.setdefault(h, set()).add(piece)
            if len(piece) < cb:
                break
            h = hash((h, piece))

    def longest_prefix(self, ids: np.ndarray | list[int]) -> int:
        """Tokens of `ids` (from the start) that some inserted sequence also starts with."""
        b = self._bytes(ids)
        cb = self.chunk * 4
        h = 0
        nxt = self._next
        matched = 0
        while matched < len(b):
            kids = nxt.get(h)
            if not kids:
                break
            piece = b[matched : matched + cb]
            if len(piece) == cb and piece in kids:
                matched += cb
                h = hash((h, piece))
                continue
            head = piece[:4]
            # A snapshot: huge prompts are looked up in a worker thread while the loop's
            # thread may be inserting into this very set.
            best = max((_lcp_bytes(piece, k) for k in tuple(kids) if k[:4] == head), default=0)
            matched += best
            break
        return matched // 4

    @property
    def nodes(self) -> int:
        return len(self._next)


def computed_sequence(prompt: np.ndarray, generated: list[int] | np.ndarray) -> np.ndarray:
    """What the engine holds KV for after serving `prompt` and generating `generated`."""
    gen = np.asarray(generated, dtype=np.int32)
    if len(gen) <= 1:
        return np.asarray(prompt, dtype=np.int32)
    return np.concatenate([np.asarray(prompt, dtype=np.int32), gen[:-1]])
