"""SGLang's HiCache as the oracle of our host tier's "tree" rule (issue 34, point 2): SGLang
0.5.22's own hybrid radix cache with a host KV pool and a host Mamba pool
(`sglang_host_worker.py`, in the SGLang environment; it says what is SGLang's and what is
stood in) and our engine model's `sglang` cache with its two-pool host tier
(`replay.sim.cache.tiers.HostTier`, rule "tree"), given the same requests one after another;
per request, the prefix tokens each found on the GPU and in host memory.

Both sides hold the same room. The device: the profile's `capacity` blocks split into a KV
pool and state slots as SGLang sizes them (`replay.sim.native.sglang_cache.engine_config`,
the `sglang` policy's own split). The host: `--hicache-ratio R` makes SGLang's host KV pool
⌊R × KV tokens⌋ + 1 tokens and its host Mamba pool ⌊R × state slots⌋ + 1 slots
(`mem_cache/pool_host/base.py`, `pool_host/mamba.py:156-164`: the size, then one page
more), the split `tiers.attach_host_tier` makes (in proportion to the device pools); our
tier gets the same, the KV pool in whole blocks. `scripts/hicache_agreement.py` prints the
tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from replay.profiles import ModelProfile
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.policies import make_policy
from replay.sim.cache.tiers import HostTier
from replay.sim.native.host_oracle import STATE_BLOCKS, B, Hit, Req, _sequences, model_hits
from replay.sim.native.sglang_cache import engine_config as sglang_config
from replay.sim.native.tokens import TokenSource
from replay.sim.native.worker import ENGINES, EngineSpec, Worker

ENGINE = "sglang-host"
ENGINES.setdefault(
    ENGINE,
    EngineSpec(
        "SGLang (HiCache)",
        "sglang",
        "REPLAY_SGLANG_PYTHON",
        ("0.5.22",),  # the HiCache rules tiers.py cites
        ENGINES["sglang"].hint,
        Path(__file__).with_name("sglang_host_worker.py"),
    ),
)

# SGLang's grid, track interval and chunk scaled to 16-token blocks, as the GPU tier's oracle
# runs it (scripts/native_agreement.py SGLANG); on a trace, SGLang's own (sglang_cache.py).
OPTS: dict[str, Any] = {"grid": B, "track_interval": B, "chunk": 4 * B}
TRACE_OPTS: dict[str, Any] = {"grid": 256, "track_interval": 256, "chunk": 16384}


@dataclass(frozen=True)
class Setup:
    """One case: a `capacity`-block device of `block`-token blocks, SGLang's `opts`, and
    host pools `ratio` times the device pools (0: no host tier)."""

    capacity: int
    ratio: float
    block: int = B
    opts: dict[str, Any] = field(default_factory=lambda: dict(OPTS))

    def profile(self) -> ModelProfile:
        """The tiny hybrid profile of `host_oracle.profile`, at this block and capacity."""
        return ModelProfile.model_validate(
            {
                "name": "tiny",
                "model": "tiny hybrid",
                "gpus": 1,
                "block_tokens": self.block,
                "blocks_per_engine": self.capacity,
                "checkpoint_blocks": STATE_BLOCKS,
                "prefill_cost_d": 1.862e-5,
                "prefill_cost_e": 3.33e-6,
                "cost_unit_tokens": 100,
                "chunk_tokens": 2 * self.block,
                "context_tokens": 4096 if self.block == B else 262144,
            }
        )

    def bare(self) -> Setup:
        return replace(self, ratio=0.0)

    def engine_config(self) -> dict[str, Any]:
        """The worker's `init`: `sglang-native`'s config and the host pools' ratio."""
        cfg = sglang_config(self.profile(), self.opts, self.capacity)
        return {**cfg, "hicache_ratio": float(self.ratio)}


def run_engine(
    worker: Worker, reqs: Sequence[Req], setup: Setup
) -> tuple[list[Hit], tuple[int, int]]:
    """SGLang's hits per request (one after another, in order) and its host pools' sizes
    (KV tokens, Mamba slots). `init` builds a new cache."""
    ans = worker.call("init", config=setup.engine_config())
    tokens = TokenSource(32000)
    out: list[Hit] = []
    for i, (r, seq) in enumerate(zip(reqs, _sequences(reqs), strict=True)):
        got = worker.call("run", tokens.ids(seq, 0, r.n + r.out), rid=f"r{i}", n=r.n)
        out.append(Hit(int(got["gpu"]), int(got["host"])))
    return out, (int(ans.get("host_kv", 0)), int(ans.get("host_states", 0)))


def model_cache(setup: Setup, host: tuple[int, int]) -> HybridCache:
    """Our `sglang` cache with a two-pool "tree" host tier of `host` (KV tokens, Mamba
    slots; (0, 0): none)."""
    prof = setup.profile()
    cache = make_policy("sglang", prof, **setup.opts).make_cache(prof)
    kv_tokens, slots = host
    if kv_tokens or slots:
        cache.host = HostTier(cache, kv_tokens // setup.block, slots, "tree", 1.0, 1.0)
    return cache


def run_model(reqs: Sequence[Req], setup: Setup, host: tuple[int, int]) -> list[Hit]:
    """Our model's hits per request, the requests one after another."""
    return model_hits(model_cache(setup, host), reqs, setup.capacity)
