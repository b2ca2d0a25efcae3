"""Which earlier request of a trajectory a request descends from: the lineage the simulator
links its requests by (`replay.sim.driver`) and the live prompt builder continues
(`replay.prompts`), one rule for both so an emulated or live run sends the prefix the
simulator predicts.

A request does not always extend the request just before it: an agent's small side call
(a title, a summary, a safety check) has a prompt of its own, and the main turn after it
extends the main turn *before* the side call. So a request's predecessor is the earlier
request of the same trajectory sharing the longest leading run of hash blocks with it (ties:
the latest), or none when no earlier request shares even its first block.

Trace hash ids are prefix-chained (an id names a block together with everything before it,
as the Weka/Mooncake traces and `replay.traces.synth` define them), so "some earlier request
has id x at position d" means it shares the first d + 1 blocks. That turns the search into a
few vectorised column probes (the ids of every earlier request at one position) instead of a
comparison with each earlier request. Each result is checked with a real prefix comparison,
so ids that are not chained only make the search slower, never wrong.

Answers are computed on first use, once per (trajectory, request), and memoised: several
sessions replay the same trajectory, and only the requests a run reaches are ever computed.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from replay.traces.model import Trajectory

_UNKNOWN = -2


def common_blocks(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading hash blocks two requests share."""
    m = min(a.shape[0], b.shape[0])
    if m == 0:
        return 0
    differ = a[:m] != b[:m]
    k = int(differ.argmax())  # the first True (a boolean argmax stops there), else 0
    return k if differ[k] else m


class Lineage:
    """Per request of one trajectory: its predecessor and the blocks they share."""

    __slots__ = ("_depth", "_ids", "_lens", "_longest", "_off", "_pred", "tr")

    def __init__(self, tr: Trajectory):
        self.tr = tr
        n = tr.num_requests
        self._off = tr.hash_offsets.astype(np.int64, copy=False)
        self._ids = tr.hash_ids
        self._lens = np.diff(self._off)
        # _longest[j]: the most blocks any of requests 0..j has. A probe at position d among
        # requests before i - 1 is needed only if one of them reaches past d; in a growing
        # conversation none does, so a continuation costs one prefix comparison.
        self._longest = np.maximum.accumulate(self._lens) if n else self._lens
        self._pred = np.full(n, _UNKNOWN, dtype=np.int64)
        self._depth = np.zeros(n, dtype=np.int64)

    def predecessor(self, i: int) -> tuple[int, int]:
        """(j, blocks): the earlier request sharing the longest block prefix with request
        `i` (the latest on a tie) and how many blocks they share; (-1, 0) if none shares
        its first block."""
        j = int(self._pred[i])
        if j == _UNKNOWN:
            j, d = self._search(i)
            self._pred[i], self._depth[i] = j, d
            return j, d
        return j, int(self._depth[i])

    def among(self, i: int, replayed: Collection[int]) -> tuple[int, int]:
        """(j, blocks) as `predecessor`, when the predecessor is among the `replayed` requests
        (those a run sent and got back, in ascending order); when it is not (it precedes the
        replay's start, or it failed), the replayed request before `i` sharing the most
        blocks, the latest on a tie; (-1, 0) when none shares the first block (rare: no
        index, a comparison with each)."""
        j, d = self.predecessor(i)
        if j < 0 or j in replayed:
            return j, d
        best, best_d = -1, 0
        mine = self._blocks(i)
        for k in replayed:
            if k >= i:
                continue
            c = common_blocks(mine, self._blocks(k))
            if c > 0 and c >= best_d:
                best, best_d = k, c
        return best, best_d

    def last_links(self, start: int) -> np.ndarray:
        """Per request: the last request `among` links to it when every request from `start`
        on is replayed in order (-1: none). Past that request nothing descends from it, so
        whoever keeps what a request sent and got back may let it go."""
        out = np.full(self.tr.num_requests, -1, dtype=np.int64)
        for x in range(start + 1, self.tr.num_requests):
            j, _ = self.among(x, range(start, x))
            if j >= 0:
                out[j] = x
        return out

    def _blocks(self, j: int) -> np.ndarray:
        return self._ids[self._off[j] : self._off[j + 1]]

    def _latest_with(self, i: int, d: int, x: int) -> np.ndarray:
        """Earlier requests (latest first) whose block at position `d` is `x`."""
        lens = self._lens[:i]
        cand = np.flatnonzero(lens > d)
        if cand.shape[0] == 0:
            return cand
        hit = cand[self._ids[self._off[cand] + d] == x]
        return hit[::-1]

    def _search(self, i: int) -> tuple[int, int]:
        if i == 0:
            return -1, 0
        mine = self._blocks(i)
        # The request just before is the usual answer (a continuation): start from it.
        best, d = i - 1, common_blocks(mine, self._blocks(i - 1))
        # Deeper: some earlier request with this request's block at position d shares more.
        while d < mine.shape[0] and i >= 2 and self._longest[i - 2] > d:
            for j in self._latest_with(i - 1, d, int(mine[d])):
                c = common_blocks(mine, self._blocks(int(j)))
                if c > d:
                    best, d = int(j), c
                    break
            else:
                break
        if d == 0:
            return -1, 0
        if best == i - 1:
            return best, d
        # Ties go to the latest request sharing all d blocks.
        for j in self._latest_with(i, d - 1, int(mine[d - 1])):
            if int(j) <= best:
                break
            if common_blocks(mine, self._blocks(int(j))) >= d:
                best = int(j)
                break
        return best, d
