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


def _same_memory(x: np.ndarray, y: np.ndarray) -> bool:
    """The same bytes (a prompt looked up in the buffer it was inserted from)."""
    return bool(x.__array_interface__["data"][0] == y.__array_interface__["data"][0])


class _Wide:
    """A node of several children: their references by the chunk's hash (probing on to the
    next integer past a collision) and by the chunk's first token (for the partial match)."""

    __slots__ = ("by_hash", "by_head")

    def __init__(self) -> None:
        self.by_hash: dict[int, int] = {}
        self.by_head: dict[int, list[int]] = {}

    def add(self, piece: bytes, head: int, ref: int) -> None:
        k = hash(piece)
        while k in self.by_hash:
            k += 1
        self.by_hash[k] = ref
        self.by_head.setdefault(head, []).append(ref)


class PrefixIndex:
    """Every computed sequence of one engine; `longest_prefix` answers the ideal cache hit.

    Chunk contents are not copied into the trie: a node (the chained hash of the chunks
    before it) holds references (`stored sequence << 32 | offset`) to its children's chunks
    in the sequences themselves, compared token for token whenever a hash points at them. A
    sequence is kept from its first chunk the trie did not have: as a view when the caller
    handed a read-only array (the prompt builder's conversation buffers, which never change
    what they handed out) and the new part is most of it, otherwise as a compact copy of
    that part. A node of one child stores the child's reference; a node of several, a `_Wide`."""

    def __init__(self, chunk_tokens: int = 256):
        self.chunk = chunk_tokens
        self._kids: dict[int, int | _Wide] = {}
        self._seqs: list[np.ndarray] = []

    @staticmethod
    def _array(ids: np.ndarray | list[int]) -> np.ndarray:
        return np.ascontiguousarray(ids, dtype=np.int32)

    def _piece(self, ref: int) -> bytes:
        off = ref & 0xFFFF_FFFF
        return self._seqs[ref >> 32][off : off + self.chunk].tobytes()

    def _head(self, ref: int) -> int:
        return int(self._seqs[ref >> 32][ref & 0xFFFF_FFFF])

    def _find(self, node: int | _Wide, piece: bytes) -> int | None:
        """The child of `node` whose chunk is exactly `piece`, if any."""
        if type(node) is int:
            return node if self._piece(node) == piece else None
        assert isinstance(node, _Wide)
        k = hash(piece)
        while (ref := node.by_hash.get(k)) is not None:
            if self._piece(ref) == piece:
                return ref
            k += 1
        return None

    def _bad(self, runs: list[list[int]], a: np.ndarray) -> int:
        """The query's token offset of the first chunk in `runs` that is not the query's
        there, -1 if none is. A run `[token offset, reference, chunks]` is chunks followed
        through nodes of one child without comparing them, lying one after the other in a
        stored sequence: compared at once."""
        c = self.chunk
        for m0, r0, k in runs:
            n = k * c
            off = r0 & 0xFFFF_FFFF
            got = self._seqs[r0 >> 32][off : off + n]
            want = a[m0 : m0 + n]
            if len(got) != n or not (_same_memory(got, want) or np.array_equal(got, want)):
                k = min(len(got), n)
                diff = np.flatnonzero(got[:k] != want[:k])
                return m0 + (int(diff[0]) if len(diff) else k) // c * c
        return -1

    def _walk(self, a: np.ndarray, b: bytes) -> tuple[int, int]:
        """Follow the query's full chunks down the trie: the byte offset of the first one no
        inserted sequence has there (or of the query's partial last chunk, or its end) and
        the hash of the node it hangs from."""
        c = self.chunk
        cb = c * 4
        kids = self._kids
        h = 0
        m = 0
        parents: list[int] = []  # the node each full chunk hangs from
        runs: list[list[int]] = []
        last: list[int] = [-1, -1, 0]
        while m + cb <= len(b):
            node = kids.get(h)
            if node is None:
                break
            piece = b[m : m + cb]
            if type(node) is int:
                k = last[2]
                if node == last[1] + k * c and m == (last[0] + k * c) * 4:
                    last[2] = k + 1
                else:
                    last = [m // 4, node, 1]
                    runs.append(last)
            else:
                bad = self._bad(runs, a)
                if bad >= 0:
                    return bad * 4, parents[bad // c]
                runs.clear()
                last = [-1, -1, 0]
                if self._find(node, piece) is None:
                    break
            parents.append(h)
            h = hash((h, piece))
            m += cb
        bad = self._bad(runs, a)
        if bad >= 0:
            return bad * 4, parents[bad // c]
        return m, h

    def insert(self, ids: np.ndarray | list[int]) -> None:
        a = self._array(ids)
        b = a.tobytes()
        cb = self.chunk * 4
        m, h = self._walk(a, b)
        kids = self._kids
        base = -1  # where the kept part of `a` starts, once a chunk is new
        seq = 0
        for start in range(m, len(b), cb):
            piece = b[start : start + cb]
            node = kids.get(h)
            if node is None or self._find(node, piece) is None:
                if base < 0:
                    base = start // 4
                    tail = a[base:]
                    if a.flags.writeable or 2 * len(tail) < len(a):
                        tail = tail.copy()
                    seq = len(self._seqs) << 32
                    self._seqs.append(tail)
                ref = seq | (start // 4 - base)
                if node is None:
                    kids[h] = ref
                else:
                    if type(node) is int:
                        one, node = node, _Wide()
                        node.add(self._piece(one), self._head(one), one)
                        kids[h] = node
                    assert isinstance(node, _Wide)
                    node.add(piece, int(a[start // 4]), ref)
            if len(piece) < cb:
                break
            h = hash((h, piece))

    def longest_prefix(self, ids: np.ndarray | list[int]) -> int:
        """Tokens of `ids` (from the start) that some inserted sequence also starts with."""
        a = self._array(ids)
        b = a.tobytes()
        matched, h = self._walk(a, b)
        node = self._kids.get(h)
        if matched >= len(b) or node is None:
            return matched // 4
        piece = b[matched : matched + self.chunk * 4]
        # A snapshot: huge prompts are looked up in a worker thread while the loop's thread
        # may be inserting into this very node.
        head = int(a[matched // 4])
        if type(node) is int:
            refs: tuple[int, ...] = (node,) if self._head(node) == head else ()
        else:
            assert isinstance(node, _Wide)
            refs = tuple(node.by_head.get(head, ()))
        best = 0
        for ref in refs:
            best = max(best, _lcp_bytes(piece, self._piece(ref)))
        return (matched + best) // 4

    @property
    def nodes(self) -> int:
        return len(self._kids)


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
