"""Generated workloads to hold two caches side by side, request by request.

Each workload is a list of `Req`: a sequence (prompt + output) that descends from an earlier
request's sequence, a start time and a duration. `drive(cache, reqs)` runs them through the
online cache API in time order (starts and finishes interleave when requests overlap) and
returns what each request got: its cached tokens, or -1 when it could not be admitted.
`compare(a, b)` counts the requests that differ. Used by the cross-check tests
(tests/unit/replay/sim/test_sim_native_vllm.py) and `scripts/native_agreement.py`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.keys import LineagePrefix
from replay.sim.native.turns import interleaved


@dataclass(frozen=True)
class Req:
    n: int  # prompt tokens
    out: int  # output tokens
    parent: int  # index of the request whose sequence it continues (-1: none)
    shared: int  # tokens it shares with that sequence
    start: float
    hold: float = 1.0


def drive(
    cache: HybridCache, reqs: list[Req], after: Callable[[HybridCache], None] | None = None
) -> list[int]:
    """Cached tokens per request (-1: not admitted), in the order given; `after(cache)` is
    called after every start and finish."""
    seqs: list[LineagePrefix | None] = [None] * len(reqs)
    got = [-1] * len(reqs)
    events: list[tuple[float, int, int, object]] = []  # (time, kind 0=finish 1=start, i, h)
    for i, r in enumerate(reqs):
        heapq.heappush(events, (r.start, 1, i, None))
    while events:
        t, kind, i, h = heapq.heappop(events)
        r = reqs[i]
        if kind == 0:
            seq = seqs[i]
            assert seq is not None
            cache.finish(h, seq, r.n + r.out, t)  # type: ignore[arg-type]
            if after is not None:
                after(cache)
            continue
        parent = seqs[r.parent] if r.parent >= 0 else None
        seq = LineagePrefix(i + 1, r.n + r.out, parent, r.shared if parent else 0)
        seqs[i] = seq
        info = cache.lookup(seq, r.n, t)
        hd = cache.begin(seq, r.n, info, t)
        if not cache.reserve(hd, r.n + r.out, t):
            cache.abort(hd, t)
            continue
        got[i] = info.resume_pos
        cache.prefill_done(hd, t)
        heapq.heappush(events, (t + r.hold, 0, i, hd))
        if after is not None:
            after(cache)
    return got


def compare(a: list[int], b: list[int]) -> tuple[int, int, int]:
    """(total cached tokens of a, of b, requests that differ)."""
    return (
        sum(max(x, 0) for x in a),
        sum(max(x, 0) for x in b),
        sum(x != y for x, y in zip(a, b, strict=True)),
    )


# workloads (B: the block size; every length is drawn with numpy's Generator(seed)) ----------


def chains(rng: np.random.Generator, B: int, conv: int = 3, turns: int = 6) -> list[Req]:
    """Multi-turn conversations: each prompt is the previous prompt + output + new text."""
    out: list[Req] = []
    t = 0.0
    for _ in range(conv):
        prev = -1
        n = int(rng.integers(B, 4 * B))
        for _ in range(turns):
            o = int(rng.integers(1, B))
            shared = out[prev].n + out[prev].out if prev >= 0 else 0
            out.append(Req(n, o, prev, shared, t))
            prev = len(out) - 1
            n = out[prev].n + out[prev].out + int(rng.integers(1, 3 * B))
            t += 2.0
    return out


def block_multiples(rng: np.random.Generator, B: int, turns: int = 8) -> list[Req]:
    """Prompts and prompt + output that end exactly on block boundaries."""
    out: list[Req] = []
    prev, t = -1, 0.0
    n = 2 * B
    for _ in range(turns):
        o = B if rng.random() < 0.5 else int(rng.integers(1, B))
        shared = out[prev].n + out[prev].out if prev >= 0 else 0
        out.append(Req(n, o, prev, shared, t))
        prev = len(out) - 1
        grow = int(rng.integers(1, 3)) * B
        n = -(-(out[prev].n + out[prev].out + 1) // B) * B + grow - B
        t += 2.0
    return out


def siblings(rng: np.random.Generator, B: int, groups: int = 3, kids: int = 4) -> list[Req]:
    """A root prompt, then several requests sharing a prefix of it and diverging."""
    out: list[Req] = []
    t = 0.0
    for _ in range(groups):
        root_n = int(rng.integers(4 * B, 8 * B))
        out.append(Req(root_n, int(rng.integers(1, B)), -1, 0, t))
        root = len(out) - 1
        t += 2.0
        cut = int(rng.integers(B, root_n - B))
        for _ in range(kids):
            n = cut + int(rng.integers(1, 4 * B))
            out.append(Req(n, int(rng.integers(1, B)), root, cut, t))
            t += 2.0
    return out


def edits(rng: np.random.Generator, B: int, turns: int = 10) -> list[Req]:
    """A conversation whose context is sometimes cut back (compaction, edited history)."""
    out: list[Req] = []
    prev, t = -1, 0.0
    n = int(rng.integers(2 * B, 5 * B))
    for _ in range(turns):
        o = int(rng.integers(1, B))
        if prev < 0:
            shared = 0
        elif rng.random() < 0.4:  # an edit: keep only part of the previous sequence
            shared = int(rng.integers(1, out[prev].n))
            n = shared + int(rng.integers(1, 3 * B))
        else:
            shared = out[prev].n + out[prev].out
        out.append(Req(n, o, prev, shared, t))
        prev = len(out) - 1
        n = out[prev].n + out[prev].out + int(rng.integers(1, 3 * B))
        t += 2.0
    return out


def tight(rng: np.random.Generator, B: int, conv: int = 5, turns: int = 6) -> list[Req]:
    """Several conversations interleaved and overlapping in time, in a cache too small for
    them all: evictions decide the hits."""
    out: list[Req] = []
    t = 0.0
    for n, o, prev, shared in interleaved(rng, B, conv, turns, (2, 5)):
        out.append(Req(n, o, prev, shared, t, hold=float(rng.uniform(0.5, 3.0))))
        t += float(rng.uniform(0.2, 1.5))
    return out


WORKLOADS: dict[str, Callable[[np.random.Generator, int], list[Req]]] = {
    "chains": chains,
    "block-multiples": block_multiples,
    "siblings": siblings,
    "edits": edits,
    "tight": tight,
}
