"""Mooncake's store as the oracle of our external store's `mooncake` rule (issue 34, point 2):
Mooncake 0.3.13's own master and client (`mooncake_worker.py`, in `.venv-mooncake`; it says
what is Mooncake's and what is stood in) and our engine model's `vllm` cache with a host tier
and an `ExternalStore` that holds states (`replay.sim.cache.tiers`, rule 5), given the same
requests one after another; per request, the prompt's prefix tokens whose KV the store holds
and the deepest of them with a state there.

The write stream is the model's: each finished request's full blocks (prompt and output,
rule 1: the store holds a copy of every block the GPU keeps) under prefix-hash keys, and a
state object for each state the model's store holds on the request's path that was not
written before (the states the `vllm` policy keeps there). So what differs is what the
store keeps: Mooncake's allocator, leases and eviction against rule 5's room (its capacity
less its copies of the GPU's and the host's entries, external-only entries oldest first out).
Our host is given fewer blocks than the GPU (rule 2: it holds nothing host-only, what the GPU
drops goes to the store at once); the store's room is Mooncake's, measured, in blocks.

`scripts/mooncake_agreement.py` prints the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.nodes import State
from replay.sim.cache.policies import make_policy
from replay.sim.cache.requests import ResumeInfo
from replay.sim.cache.tiers import STORE_HOLDS_STATES, ExternalStore, HostTier
from replay.sim.native.host_oracle import STATE_BLOCKS, B, Req, _sequences, profile
from replay.sim.native.lmcache_oracle import HOST_BLOCKS, agreement, store_held, token_ids
from replay.sim.native.worker import ENGINES, EngineSpec, Worker

ENGINE = "mooncake"
VENV = ".venv-mooncake"
ENGINES.setdefault(
    ENGINE,
    EngineSpec(
        "Mooncake",
        "mooncake",
        "REPLAY_MOONCAKE_PYTHON",
        ("0.3.13",),  # the version scripts/setup_mooncake_cpu.sh pins
        "run `bash scripts/setup_mooncake_cpu.sh` (mooncake-transfer-engine-non-cuda "
        f"0.3.13.post1 in {VENV}, about 150 MB)",
        Path(__file__).with_name("mooncake_worker.py"),
        VENV,
    ),
)

__all__ = ["ENGINE", "Held", "Setup", "agreement", "init", "measure", "run_engine", "run_model"]


@dataclass(frozen=True)
class Setup:
    """One case: a `capacity`-block GPU cache and a store with room for `blocks` blocks."""

    capacity: int
    blocks: int
    watermark: float = 0.9  # Mooncake's eviction_high_watermark_ratio (its default)


@dataclass(frozen=True)
class Held:
    """One request's prompt prefix whose KV the store holds, and the deepest position of it
    with a state in the store (a hybrid resume's reach from the store alone)."""

    store: int
    usable: int


@dataclass(frozen=True)
class Step:
    """What the model wrote for one request: the state positions new to the store."""

    held: Held
    states: list[int]


def _usable(info: ResumeInfo, tier: HostTier, held: int) -> int:
    """The deepest state on the prompt's path within `held` that our store holds (a copy of
    a GPU or host state, or an external-only one)."""
    ext = tier.external
    assert ext is not None
    best = 0
    for b in info.path:
        if b.index * B >= held:
            break
        for s in b.states:
            if best < s.pos <= held and (s.resident or s in tier.states or s in ext.states):
                best = s.pos
    return best


def _held_states(cache: HybridCache, tier: HostTier, seq: object, end: int) -> list[State]:
    """The states our store holds on a sequence's path up to `end` tokens."""
    ext = tier.external
    assert ext is not None
    info = cache.lookup(seq, end, 0.0)  # type: ignore[arg-type]
    return [
        s for b in info.path for s in b.states if s.resident or s in tier.states or s in ext.states
    ]


def run_model(reqs: Sequence[Req], s: Setup, store_blocks: int) -> list[Step]:
    """Our store per request, the `vllm` policy's cache with a host tier of `HOST_BLOCKS`
    blocks and a `mooncake` store of `store_blocks` blocks (states `STATE_BLOCKS` each),
    the requests one after another, each finished before the next is looked up."""
    prof = profile(s.capacity)
    cache: HybridCache = make_policy("vllm", prof).make_cache(prof)
    tier = HostTier(cache, HOST_BLOCKS, None, "connector", 1.0, 1.0)
    cache.host = tier
    tier.external = ExternalStore(tier, store_blocks, STORE_HOLDS_STATES["mooncake"], 1.0, 1.0)
    out: list[Step] = []
    written: set[int] = set()
    t = 0.0
    for r, seq in zip(reqs, _sequences(reqs), strict=True):
        info = cache.lookup(seq, r.n, t)
        held = store_held(info, tier, r.n)
        usable = _usable(info, tier, held)
        h = cache.begin(seq, r.n, info, t)
        if not cache.reserve(h, r.n + r.out, t):
            raise RuntimeError(f"a {r.n}-token prompt does not fit {s.capacity} blocks")
        cache.prefill_done(h, t)
        t += 1.0
        cache.finish(h, seq, r.n + r.out, t)
        t += 1.0
        new = [x for x in _held_states(cache, tier, seq, r.n + r.out) if id(x) not in written]
        written.update(id(x) for x in new)
        out.append(Step(Held(held, usable), sorted({x.pos for x in new})))
    return out


def init(worker: Worker, s: Setup) -> dict[str, Any]:
    """An empty Mooncake store for case `s`: the worker's answer (`capacity`, its room in
    blocks as measured; `bytes`, a block's; `master`, the master's process id)."""
    cfg = {"block": B, "blocks": s.blocks, "state_blocks": STATE_BLOCKS, "watermark": s.watermark}
    return worker.call("init", config=cfg)


def measure(worker: Worker, s: Setup) -> int:
    """An empty Mooncake store for case `s`: its room in blocks, as measured."""
    return int(init(worker, s)["capacity"])


def run_engine(
    worker: Worker, reqs: Sequence[Req], steps: Sequence[Step]
) -> tuple[list[Held], int]:
    """Mooncake's held tokens per request, given the model's writes (`steps`), into the store
    `measure` emptied; and the puts it refused for want of room."""
    out: list[Held] = []
    refused = 0
    for i, (r, ids, st) in enumerate(zip(reqs, token_ids(reqs), steps, strict=True)):
        got = worker.call("run", ids, rid=f"r{i}", n=r.n, states=st.states)
        out.append(Held(int(got["held"]), int(got["usable"])))
        refused += int(got["refused"])
    return out, refused
