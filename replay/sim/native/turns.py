"""Conversations taking turns: the request shape both cross-check workloads draw
(`replay.sim.native.crosscheck.tight`, timed, and `replay.sim.native.host_oracle.conversations`,
one after another), here once, below both (the cross-check is the run driver's layer, the
host tier's oracle the cache model's)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def interleaved(
    rng: np.random.Generator, B: int, conv: int, turns: int, first_blocks: tuple[int, int]
) -> Iterator[tuple[int, int, int, int]]:
    """`conv` conversations taking turns (a, b, c, a, b, c, ...) for `turns` rounds, per
    request (prompt tokens, output tokens, index of its conversation's previous request or -1,
    tokens it shares with that request: all of its prompt and output). A conversation's first
    prompt is [lo, hi) blocks of `B` tokens (`first_blocks`), each later one the previous
    turn's sequence plus 1 to 2B - 1 new tokens. A request's lengths (output, then prompt) are
    drawn from `rng` when it is yielded, so what a caller draws per request between them stays
    in the same stream order."""
    lo, hi = first_blocks
    lengths: list[int] = []  # per request yielded: prompt + output tokens
    heads = [-1] * conv
    for _ in range(turns):
        for c in range(conv):
            prev = heads[c]
            o = int(rng.integers(1, B))
            if prev < 0:
                n, shared = int(rng.integers(lo * B, hi * B)), 0
            else:
                shared = lengths[prev]
                n = shared + int(rng.integers(1, 2 * B))
            heads[c] = len(lengths)
            lengths.append(n + o)
            yield n, o, prev, shared
