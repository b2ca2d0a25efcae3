"""LMCache as the oracle of our external store's `lmcache` rule (issue 34, point 2): LMCache
0.5.6's own storage code (`lmcache_worker.py`, in `.venv-lmcache`; it says what is LMCache's
and what is stood in) and our engine model's `vllm` cache with a host tier and an
`ExternalStore` that holds no states (`replay.sim.cache.tiers`, rule 5), given the same
requests one after another; per request, the prompt's prefix tokens whose KV the store holds.

What is compared: rule 5 says the store holds a copy of what host memory holds (which holds a
copy of the GPU's, rule 1) and keeps what host memory drops while it fits, the one longest
external-only first out; so the KV our store holds for a prompt is its leading blocks that are
on the GPU, in host memory or external-only. LMCache's is what `LMCacheEngine.lookup` answers
for the prompt: its leading chunks still in its CPU backend. Our host is given fewer blocks
than the GPU, so (rule 2) it holds nothing host-only and everything the GPU drops goes to the
store at once, as a store written through from the GPU would hold it. The store's room is
LMCache's, measured (chunks × chunk / block blocks). What the store served a hybrid resume
(`ResumeInfo.external_tokens`) is ours only: LMCache's engine stores per-token KV and has no
place for a state, the reason the `lmcache` store holds none.

`scripts/lmcache_agreement.py` prints the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.policies import make_policy
from replay.sim.cache.requests import ResumeInfo
from replay.sim.cache.tiers import STORE_HOLDS_STATES, ExternalStore, HostTier
from replay.sim.native.host_oracle import B, Req, _sequences, profile
from replay.sim.native.tokens import TokenSource
from replay.sim.native.worker import ENGINES, EngineSpec, Worker

ENGINE = "lmcache"
VENV = ".venv-lmcache"
ENGINES.setdefault(
    ENGINE,
    EngineSpec(
        "LMCache",
        "lmcache",
        "REPLAY_LMCACHE_PYTHON",
        ("0.5.6",),  # the version scripts/setup_lmcache_cpu.sh pins
        "run `bash scripts/setup_lmcache_cpu.sh` (LMCache 0.5.6 and a CPU torch in "
        f"{VENV}, about 1.6 GB)",
        Path(__file__).with_name("lmcache_worker.py"),
        VENV,
    ),
)

HOST_BLOCKS = 8  # fewer than any case's GPU blocks: our host holds nothing host-only


@dataclass(frozen=True)
class Setup:
    """One case: a `capacity`-block GPU cache, LMCache chunks of `chunk` tokens with room
    for `chunks` of them, storing the output tokens too (`decode`) or the prompt's only."""

    capacity: int
    chunk: int
    chunks: int
    decode: bool


@dataclass(frozen=True)
class Held:
    """One request's prompt prefix whose KV the store holds, and (ours) what it served."""

    store: int
    served: int = 0


def run_engine(worker: Worker, reqs: Sequence[Req], s: Setup) -> tuple[list[Held], int]:
    """LMCache's held tokens per request (requests one after another, in order) and its room
    in chunks as measured. `init` builds a fresh engine."""
    ans = worker.call("init", config={"chunk": s.chunk, "chunks": s.chunks, "decode": s.decode})
    out: list[Held] = []
    for i, (r, ids) in enumerate(zip(reqs, token_ids(reqs), strict=True)):
        got = worker.call("run", ids, rid=f"r{i}", n=r.n)
        out.append(Held(int(got["held"])))
    return out, int(ans["capacity"])


def token_ids(reqs: Sequence[Req]) -> list[np.ndarray]:
    """Each request's prompt and output token ids (a continuation repeats its parent's)."""
    tokens = TokenSource(32000)
    return [tokens.ids(seq, 0, r.n + r.out) for r, seq in zip(reqs, _sequences(reqs), strict=True)]


def written(reqs: Sequence[Req], chunk: int, decode: bool) -> list[int]:
    """Per request, the longest prefix of its prompt in whole chunks that an earlier request
    wrote under LMCache's write rule as vLLM's connector applies it: each request's full
    chunks of its prompt, and of its output too only with `decode` (`save_decode_cache`;
    `save_unfull_chunk` False drops a partial last chunk). What the store could hold were
    nothing ever evicted: its eviction is the rest."""
    ids = token_ids(reqs)
    out: list[int] = []
    for i, r in enumerate(reqs):
        best = 0
        for j in range(i):
            q = reqs[j]
            end = (q.n + q.out if decode else q.n) // chunk * chunk
            a, b = ids[i][: r.n], ids[j][:end]
            m = min(len(a), len(b))
            neq = np.flatnonzero(a[:m] != b[:m])
            lcp = int(neq[0]) if len(neq) else m
            best = max(best, lcp // chunk * chunk)
        out.append(best)
    return out


def store_held(info: ResumeInfo, tier: HostTier, n: int) -> int:
    """The leading tokens of an `n`-token prompt whose KV our store holds (a copy of a block
    on the GPU or in host memory, or the block external-only)."""
    ext = tier.external
    assert ext is not None
    held = 0
    for b in info.path:
        if not (b.resident or b in tier.blocks or b in ext.blocks):
            break
        held = min(b.end, n)
    return held


def run_model(
    reqs: Sequence[Req], s: Setup, store_chunks: int, store: str = "lmcache"
) -> list[Held]:
    """Our store's held tokens per request: the `vllm` policy's cache with a host tier of
    `HOST_BLOCKS` blocks and a `store` of `store_chunks` chunks, the requests one after
    another, each finished before the next is looked up."""
    prof = profile(s.capacity)
    cache: HybridCache = make_policy("vllm", prof).make_cache(prof)
    tier = HostTier(cache, HOST_BLOCKS, None, "connector", 1.0, 1.0)
    cache.host = tier
    blocks = store_chunks * s.chunk // B
    tier.external = ExternalStore(tier, blocks, STORE_HOLDS_STATES[store], 1.0, 1.0)
    out: list[Held] = []
    t = 0.0
    for r, seq in zip(reqs, _sequences(reqs), strict=True):
        info = cache.lookup(seq, r.n, t)
        held = store_held(info, tier, r.n)
        h = cache.begin(seq, r.n, info, t)
        if not cache.reserve(h, r.n + r.out, t):
            raise RuntimeError(f"a {r.n}-token prompt does not fit {s.capacity} blocks")
        out.append(Held(held, info.external_tokens))
        cache.prefill_done(h, t)
        t += 1.0
        cache.finish(h, seq, r.n + r.out, t)
        t += 1.0
    return out


def agreement(ours: list[int], theirs: list[int]) -> dict[str, Any]:
    """Totals and the requests that differ (index, ours, theirs)."""
    differ = [(i, a, b) for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    return {
        "requests": len(ours),
        "tokens": (sum(ours), sum(theirs)),
        "agree": 1 - len(differ) / max(len(ours), 1),
        "differ": differ,
    }
