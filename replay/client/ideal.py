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


class AlignRuleIndex:
    """The ideal resume position under a hybrid vLLM's `align` prefix caching (an unbounded
    cache that never evicts, but keeps recurrent states only where vLLM 0.32 keeps them).

    vLLM's rule, as its code applies it at the default retention (0):
    - a prompt of n tokens leaves a reusable state at ⌊(n−1)/B⌋·B (`kv_cache_coordinator.py`
      `replay_boundaries` returns n − 1; `MambaManager.reachable_block_mask` floors it to the
      block); the generated tokens' states are not kept;
    - a request whose attention (KV) hit reaches past its state hit pins a state at that KV
      hit, the shared-prefix junction (`kv_cache_manager.py` `get_computed_blocks`:
      `shared_prefix_boundary = num_new_computed_tokens + num_uncached`);
    - a hit is the deepest kept state at or below n − 1 whose prefix the prompt starts with
      (hits are capped at n − 1, `max_cache_hit_length`), its KV being resident (always,
      in an unbounded cache).
    States are keyed by a chained hash of the prompt's B-token blocks up to the state."""

    def __init__(self, block_tokens: int):
        self.block = block_tokens
        self._states: set[int] = set()

    def _chain(self, ids: np.ndarray | list[int], upto_blocks: int) -> list[int]:
        b = np.ascontiguousarray(ids, dtype=np.int32).tobytes()
        cb = self.block * 4
        out: list[int] = []
        h = 0
        for k in range(upto_blocks):
            h = hash((h, b[k * cb : (k + 1) * cb]))
            out.append(h)
        return out

    def state_hit(self, prompt: np.ndarray | list[int]) -> int:
        """Tokens of `prompt` a state is kept for (a multiple of the block, at most n − 1)."""
        n = len(prompt)
        if n <= 1 or not self._states:
            return 0
        chain = self._chain(prompt, (n - 1) // self.block)
        for k in range(len(chain), 0, -1):
            if chain[k - 1] in self._states:
                return k * self.block
        return 0

    def junction(self, kv_hit: int, state_hit: int) -> int:
        """The state position a request pins: its KV hit floored to the block, when that
        reaches past its state hit (0: none)."""
        j = kv_hit // self.block * self.block
        return j if j > state_hit else 0

    def served(self, prompt: np.ndarray | list[int], junction: int = 0) -> None:
        """Keep the states a served `prompt` leaves: at ⌊(n−1)/B⌋·B and at its junction."""
        n = len(prompt)
        if n <= 1:
            return
        last = (n - 1) // self.block
        chain = self._chain(prompt, last)
        for k in {last, junction // self.block}:
            if 0 < k <= len(chain):
                self._states.add(chain[k - 1])
