"""The host tier's oracle (issue 34, point 2): vLLM 0.32's own scheduler with its native KV
offloading connector and CPU manager (`vllm_host_worker.py`, in the vLLM environment) and our
engine model's `vllm` cache with its host tier (`replay.sim.cache.tiers.HostTier`, rule
"connector"), given the same requests one after another; per request, the prefix tokens each
found on the GPU and in host memory.

Both sides hold the same room: the GPU pool of `capacity` blocks (the engine's pool has one
more, its null block), and the host's chunks as vLLM's CPU manager counts them
(`cpu_bytes_to_use` over its bytes per chunk), one chunk per KV block and per state group, so
a state costs `checkpoint_blocks` chunks as in the model's one pool. The engine's transfers
complete in the step they are issued (the worker's stub): the oracle compares where hits come
from, not their timing. `scripts/tier_agreement.py` prints the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from replay.profiles import ModelProfile
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.keys import LineagePrefix
from replay.sim.cache.policies import make_policy
from replay.sim.cache.tiers import HostTier
from replay.sim.native.tokens import TokenSource
from replay.sim.native.turns import interleaved
from replay.sim.native.worker import ENGINES, ENV_PYTHON, SETUP_HINT, EngineSpec, Worker

ENGINE = "vllm-host"
ENGINES.setdefault(
    ENGINE,
    EngineSpec(
        "vLLM (offloading connector)",
        "vllm",
        ENV_PYTHON,
        ("0.32.",),  # the connector's rules tiers.py cites
        SETUP_HINT,
        Path(__file__).with_name("vllm_host_worker.py"),
    ),
)

B = 16  # the cross-check workloads' block, as scripts/native_agreement.py
STATE_BLOCKS = 2


class Req(Protocol):
    """A request as `replay.sim.native.crosscheck.Req` holds it (that module is the run
    driver's layer, so not imported here): `n` prompt and `out` output tokens, continuing
    the first `shared` tokens of request `parent`'s sequence (-1: none)."""

    @property
    def n(self) -> int: ...
    @property
    def out(self) -> int: ...
    @property
    def parent(self) -> int: ...
    @property
    def shared(self) -> int: ...


@dataclass(frozen=True)
class Turn:
    """One request of `conversations` (a `Req`)."""

    n: int
    out: int
    parent: int
    shared: int


@dataclass(frozen=True)
class Hit:
    """Where one request's prefix hit: tokens from the GPU cache and from host memory."""

    gpu: int
    host: int


def profile(blocks: int) -> ModelProfile:
    """The tiny hybrid profile of scripts/native_agreement.py with a `blocks`-block cache."""
    return ModelProfile.model_validate(
        {
            "name": "tiny",
            "model": "tiny hybrid",
            "gpus": 1,
            "block_tokens": B,
            "blocks_per_engine": blocks,
            "checkpoint_blocks": STATE_BLOCKS,
            "prefill_cost_d": 1.862e-5,
            "prefill_cost_e": 3.33e-6,
            "cost_unit_tokens": 100,
            "chunk_tokens": 2 * B,
            "context_tokens": 4096,
        }
    )


def _sequences(reqs: Sequence[Req]) -> list[LineagePrefix]:
    seqs: list[LineagePrefix] = []
    for i, r in enumerate(reqs):
        parent = seqs[r.parent] if r.parent >= 0 else None
        seqs.append(LineagePrefix(i + 1, r.n + r.out, parent, r.shared if parent else 0))
    return seqs


def engine_config(capacity: int, cpu_bytes: int) -> dict[str, Any]:
    """The worker's `init`: the scheduler oracle's defaults, one request at a time."""
    return {
        "block": B,
        "num_blocks": capacity + 1,  # the pool's null block is never handed out
        "state_blocks": STATE_BLOCKS,
        "retention": 0,
        "max_model_len": 4096,
        "vocab_size": 32000,
        "token_budget": 2048,
        "max_num_seqs": 64,
        "long_prefill_threshold": 0,
        "cpu_bytes": cpu_bytes,
    }


def run_engine(
    worker: Worker, reqs: Sequence[Req], capacity: int, cpu_bytes: int
) -> tuple[list[Hit], int]:
    """vLLM's hits per request (requests run one after another, in order) and its host
    chunks. `worker` must be fresh: `init` builds a new engine."""
    ans = worker.call("init", config=engine_config(capacity, cpu_bytes))
    tokens = TokenSource(32000)
    out: list[Hit] = []
    for i, (r, seq) in enumerate(zip(reqs, _sequences(reqs), strict=True)):
        got = worker.call("run", tokens.ids(seq, 0, r.n + r.out), rid=f"r{i}", n=r.n)
        out.append(Hit(int(got["gpu"]), int(got["host"])))
    return out, int(ans["host_chunks"])


def run_model(reqs: Sequence[Req], capacity: int, host_blocks: int) -> list[Hit]:
    """Our model's hits per request: the `vllm` policy's cache with a one-pool host tier of
    `host_blocks` blocks, the requests one after another."""
    prof = profile(capacity)
    cache: HybridCache = make_policy("vllm", prof).make_cache(prof)
    cache.host = HostTier(cache, host_blocks, None, "connector", 1.0, 1.0)
    return model_hits(cache, reqs, capacity)


def model_hits(cache: HybridCache, reqs: Sequence[Req], capacity: int) -> list[Hit]:
    """The hits of our cache (with its host tier) per request, the requests one after
    another, each finished before the next is looked up (as the engines' oracles run)."""
    out: list[Hit] = []
    t = 0.0
    for r, seq in zip(reqs, _sequences(reqs), strict=True):
        info = cache.lookup(seq, r.n, t)
        h = cache.begin(seq, r.n, info, t)
        if not cache.reserve(h, r.n + r.out, t):
            raise RuntimeError(f"a {r.n}-token prompt does not fit {capacity} blocks")
        out.append(Hit(info.resume_pos - info.host_tokens, info.host_tokens))
        cache.prefill_done(h, t)
        t += 1.0
        cache.finish(h, seq, r.n + r.out, t)
        t += 1.0
    return out


def conversations(rng: np.random.Generator, conv: int = 4, turns: int = 5) -> list[Turn]:
    """Conversations taking turns (a, b, c, d, a, b, ...), each turn the previous turn's
    prompt and output plus new text: with a GPU cache smaller than their working set, a
    conversation's prefix has left the GPU by its next turn and is found in host memory."""
    return [Turn(*r) for r in interleaved(rng, B, conv, turns, (3, 6))]


def agreement(ours: list[Hit], theirs: list[Hit]) -> dict[str, Any]:
    """Totals and the requests that differ (index, ours, theirs)."""
    differ = [(i, a, b) for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    return {
        "requests": len(ours),
        "gpu": (sum(h.gpu for h in ours), sum(h.gpu for h in theirs)),
        "host": (sum(h.host for h in ours), sum(h.host for h in theirs)),
        "agree": 1 - len(differ) / max(len(ours), 1),
        "differ": differ,
    }
