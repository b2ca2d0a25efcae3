"""The host-memory tier of an engine's cache (issue 34, point 1): what the GPU cache drops
is kept in host memory while it fits, a later request loads it back instead of recomputing
it, and the load's bytes are charged on the step clock (`replay.sim.engine.core`).

The rules, per engine, with the code they come from (vLLM 0.32.0 and SGLang 0.5.22 as
installed in `.venv-vllm`, the versions the GPU tier models; paths inside the packages):

1. What is written, and when: everything the GPU cache keeps, as it is computed (write-
   through). vLLM's offloading connector stores each request's newly computed blocks every
   step (`distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py:1570-1612`,
   `_build_store_jobs` over `num_scheduled_tokens`), Mamba states only at the boundaries the
   GPU cache keeps too (`:1608-1612` passes `(num_prompt_tokens - 1,)` and the shared-prefix
   boundary to `reachable_block_mask`, `:1517-1554`). SGLang's HiCache backs a radix node
   up to the host when it is inserted (`--hicache-write-policy write_through`, its default:
   `arg_groups/fields/memory.py:118-124`; threshold 1: `mem_cache/unified_radix_cache.py:
   525-527`; `unified_cache/unified_tree_core.py:1099-1117` and `:1353`), the node's Mamba
   state with it. So the host holds a copy of what the GPU holds; what it adds is what the
   GPU dropped. Modelled lazily: a block or state enters the host-only set when the GPU
   cache drops it (`HybridCache.drop_block` / `drop_state`), as it would be found there.
2. Room. The host's copies of GPU-resident entries are not evictable (SGLang's host LRU
   holds only nodes evicted from the device: `unified_cache/components/mamba.py:348-355`,
   `unified_tree_core.py:1758-1790` demotes a backed-up device leaf to the host); the rest
   of the host pool holds host-only entries, the one host-only longest first out (vLLM's
   CPU manager: `eviction_policy` "lru" by default, `v1/kv_offload/cpu/spec.py:134`).
   One pool (vLLM, FlashState): KV blocks and states (`checkpoint_blocks` each) share the
   host's blocks, as the connector offloads every KV group's pages of a block together.
   Two pools (SGLang): `--hicache-size` is split between the host KV pool and the host
   Mamba pool in proportion to the device pools' bytes
   (`mem_cache/hybrid_cache/hybrid_pool_assembler.py:183-200`, applied at `:1242-1246`).
3. What resolves a hit across tiers. A resume at p needs the KV of [0, p) and the state at p,
   each on the GPU or in host memory (which holds copies of the GPU's, rule 1); a KV hit
   with no state in either tier is no hit, nor is a state without its KV. vLLM
   ("connector"): the GPU hit r comes first (`get_computed_blocks`); the connector looks up
   the blocks from r on in the host and needs the Mamba state of the hit's end there
   (`offloading/scheduler.py:147-149`: "Mamba depends on a single state", a window of one
   chunk; `:752-880`, `_lookup_complete_chunks`), and loads all of [r, p) and that state
   into new blocks, GPU copies notwithstanding: p − r tokens come from the host. SGLang
   ("tree"): a node matches when its KV is on the device or backed up
   (`unified_cache/components/full.py:107-118`) and its Mamba state is on the device or in
   the host pool (`components/mamba.py:147-158`); only what is host-only is loaded back
   (`:183-188`, `mamba_host_hit_length`), so a state still on the device is reused beside
   KV from the host; the host's tokens are all of [r, p), r the deepest device match (KV and
   state on the device), GPU copies of KV included (`components/full.py:120-143`,
   `host_hit_length` sums the backed-up nodes' tokens past it). Not modelled:
   vLLM's CPU LRU may drop the host copy of an entry still on the GPU (SGLang's host LRU
   never does), which there makes a KV host hit whose state is only on the GPU a miss.
4. What is loaded back: the host-only blocks of the prefix and the state if it is host-only;
   they become GPU-resident again (the request holds room for them as for computed blocks).
   Tokens served from the host are the prefix past the GPU-resident run.

5. An external store behind host memory (Mooncake; LMCache), `ExternalStore`: it holds a
   copy of what host memory holds and keeps what host memory drops while it fits, the one
   longest external-only first out (one pool, states at `checkpoint_blocks` each). Written
   through from the host: SGLang backs each node up to its storage backend once the node's
   host write-through is acknowledged (`mem_cache/unified_radix_cache.py:1714-1729`,
   `write_backup_storage`, `:1901`); vLLM's `MooncakeStoreConnector` stores "exactly the
   blocks the local prefix cache would" as they are computed and the Mamba state at exact
   boundaries (`distributed/kv_transfer/kv_connector/v1/mooncake/store/coordinator.py:
   283-308`). What it holds: Mooncake holds KV and Mamba states (SGLang's storage pools:
   `mem_cache/hicache_storage.py:91-96`, a Mamba pool's hit needs its trailing pages; vLLM:
   the boundary-state hand-off above); LMCache holds KV only (its vLLM connector,
   `LMCacheConnectorV1`, is no `SupportsHMA`, and vLLM then turns the hybrid KV cache
   manager off: `config/vllm.py:2171-2190`), so a hybrid resume finds no state there and
   KV it holds is usable only up to a state on the GPU or in host memory. A hit is
   resolved as rule 3 with each entry on the GPU, in host memory or in the store; what
   the store serves is loaded through host memory at the store's bandwidth, on the clock
   as host loads are (rule host_load), the two loads one after the other.

FlashState with host memory: the source (seed 000) reports a 512 GiB host cache (Table 4)
and a fork built on vLLM with a Mooncake fork, nothing of its tier rules; so it is modelled
with vLLM's connector rules (an assumption docs/cache-tiers.md names).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from replay.profiles import ModelProfile
from replay.sim.cache.keys import Prefix, shared_length
from replay.sim.cache.nodes import Block, State

if TYPE_CHECKING:
    from replay.sim.cache.hybrid import HybridCache
    from replay.sim.cache.requests import ResumeInfo

HitRule = Literal["connector", "tree"]
GIB = 1 << 30
_NONE: dict[object, int] = {}  # no external store: nothing is external-only


def hit_rule_for(policy: str) -> HitRule:
    """Rule 3's reading for `policy`: SGLang's tree, else vLLM's connector (FlashState too)."""
    return "tree" if policy.startswith("sglang") else "connector"


class HostTier:
    """The host-only blocks and states of one engine's cache, in least-recent-first order.

    `kv_blocks`: the host's KV blocks (one pool: its whole capacity in blocks, states
    counting `C` blocks each); `state_slots`: the host's state slots (two pools), None for
    one pool. `block_bytes` and `bandwidth` (bytes per second) price a load."""

    def __init__(
        self,
        cache: HybridCache,
        kv_blocks: int,
        state_slots: int | None,
        rule: HitRule,
        block_bytes: float,
        bandwidth: float,
    ) -> None:
        self.cache = cache
        self.kv_cap = kv_blocks
        self.state_cap = state_slots
        self.rule = rule
        self.block_bytes = block_bytes
        self.bandwidth = bandwidth
        self.C = cache.C
        # host-only entries -> when they became host-only (insertion order: oldest first)
        self.blocks: dict[Block, int] = {}
        self.states: dict[State, int] = {}
        self._tick = 0
        self.evictions = 0
        self.loads = 0
        self.external: ExternalStore | None = None  # rule 5: a store behind host memory

    # what the host holds ------------------------------------------------------------
    def _fit(self) -> None:
        """Rule 2: host-only entries beyond the host's room go, oldest first."""
        c, blocks, states, C = self.cache, self.blocks, self.states, self.C
        if self.state_cap is None:  # one pool: the host's blocks less the GPU's copies
            room = self.kv_cap - (c.resident_blocks + C * c.resident_states)
            while (blocks or states) and len(blocks) + C * len(states) > room:
                b = next(iter(blocks), None)
                s = next(iter(states), None)
                if s is None or (b is not None and blocks[b] <= states[s]):
                    del blocks[b]  # type: ignore[arg-type]
                    self._spill(b, None)
                else:
                    del states[s]
                    self._spill(None, s)
                self.evictions += 1
            return
        room = self.kv_cap - c.resident_blocks
        while blocks and len(blocks) > room:
            b = next(iter(blocks))
            del blocks[b]
            self._spill(b, None)
            self.evictions += 1
        slots = self.state_cap - c.resident_states
        while states and len(states) > slots:
            s = next(iter(states))
            del states[s]
            self._spill(None, s)
            self.evictions += 1

    def _spill(self, b: Block | None, s: State | None) -> None:
        """Rule 5: what host memory drops stays in the external store, if there is one."""
        if self.external is not None:
            self.external.dropped(b, s)

    def evicted_block(self, b: Block) -> None:
        """The GPU dropped `b` (rule 1): its host copy is now host-only, the most recent."""
        self._tick += 1
        self.blocks.pop(b, None)
        self.blocks[b] = self._tick
        if self.external is not None:  # in host memory again: no longer external-only
            self.external.blocks.pop(b, None)
        self._fit()

    def evicted_state(self, s: State) -> None:
        self._tick += 1
        self.states.pop(s, None)
        self.states[s] = self._tick
        if self.external is not None:
            self.external.states.pop(s, None)
        self._fit()

    # a request's view ---------------------------------------------------------------
    def extend(self, info: ResumeInfo, prefix: Prefix, n: int) -> None:
        """Rule 3: the deepest resume position past the GPU's that host memory (and the
        external store behind it, rule 5) makes usable (at most n − 1: the last prompt token
        is recomputed for its logits, as both engines cap a hit), and what loading it takes
        (rule 4). Changes `info` only (a lookup is pure); `loaded` takes the loaded entries
        out of the host-only and external-only sets once they are in."""
        x = self.external
        xb, xs = (x.blocks, x.states) if x is not None else (_NONE, _NONE)
        if not self.blocks and not self.states and not xb and not xs:
            return
        cap = max(n - 1, 0)
        r = info.resume_pos
        if r >= min(info.ideal_pos, cap):
            return
        hb, hs, B = self.blocks, self.states, self.cache.B
        best, best_state, tail = r, None, None
        last: Block | None = None
        complete = True
        for b in info.path:
            if not b.resident and b not in hb and b not in xb:
                complete = False
                break
            last = b
            for s in b.states:
                p = s.pos
                if best < p <= cap and (s.resident or s in hs or s in xs):
                    best, best_state = p, s
        if complete:  # states inside a child block the prompt ends or diverges in
            parent = last if last is not None else self.cache.root
            for c in parent.related(prefix):
                if c.src is None or not (c.resident or c in hb or c in xb):
                    continue
                lcp = shared_length(prefix, c.src, parent.end, min(c.end, n))
                if lcp <= parent.end:
                    continue
                for s in c.states:
                    p = s.pos
                    if best < p <= min(lcp, cap) and (s.resident or s in hs or s in xs):
                        best, best_state, tail = p, s, c
        if best_state is None:
            return
        covered = [*info.path[: -(-best // B)], *((tail,) if tail is not None else ())]
        self._charge(info, covered, best, best_state)

    def _charge(self, info: ResumeInfo, covered: list[Block], p: int, best: State) -> None:
        """Rule 4 for a resume at `p` from `best` over the blocks `covered`: what is loaded,
        from which tier, and the tokens each tier serves."""
        r, B = info.resume_pos, self.cache.B
        if self.rule == "tree":  # SGLang: device nodes reused, host-only ones loaded back
            info.chain = [b for b in info.path[: p // B] if b.resident]
            state_load = not best.resident
            load = [b for b in covered if not b.resident]
            info.load_blocks = len(load)
            # the host's: every backed-up token past the deepest device match (KV and state on
            # the device), GPU copies included (`components/full.py:120-143`, host_hit_length)
            info.host_tokens = p - r
        else:  # vLLM: the connector loads [r, p) and the state at p from the host
            state_load = True
            load = [b for b in covered[r // B :] if not b.resident]
            info.load_blocks = len(covered) - r // B
            info.host_tokens = p - r
        from_host = state_load  # the state comes from host memory (else: on the GPU)
        x = self.external
        if x is not None:  # rule 5: what only the store holds comes from there
            far = [b for b in load if b in x.blocks]
            far_state = state_load and not best.resident and best in x.states
            if far or far_state:
                ext = sum(min(b.end, p) - max(b.index * B, r) for b in far)
                info.host_tokens -= ext
                info.external_tokens = ext
                info.load_blocks -= len(far)
                info.external_load_blocks = len(far) + (self.C if far_state else 0)
                from_host = not far_state
        info.load_blocks += self.C if state_load and from_host else 0
        info.host_blocks = load
        info.host_state = best if state_load else None
        info.state = None if state_load else best
        info.resume_pos = p
        info.resident_pos = max(info.resident_pos, p)
        info.checkpoint_pos = max(info.checkpoint_pos, info.resident_pos)

    def loaded(self, blocks: list[Block], state: State | None) -> None:
        """A request's prompt is in: what it loaded is GPU-resident again (rule 4)."""
        for b in blocks:
            self.blocks.pop(b, None)
        if state is not None:
            self.states.pop(state, None)
        self.loads += 1
        if self.external is not None:
            self.external.loaded(blocks, state)

    def load_seconds(self, info: ResumeInfo) -> float:
        """Seconds `info`'s load takes: its host blocks over the host link, then what the
        external store serves over the store's (rule 5: through host memory)."""
        t = self.seconds(info.load_blocks)
        if info.external_load_blocks and self.external is not None:
            t += self.external.seconds(info.external_load_blocks)
        return t

    def seconds(self, blocks: int) -> float:
        """Seconds to load `blocks` blocks from host memory over the link."""
        return blocks * self.block_bytes / self.bandwidth if self.bandwidth > 0 else 0.0


StoreKind = Literal["mooncake", "lmcache"]
# What each store holds (rule 5): Mooncake KV and Mamba states, LMCache KV only.
STORE_HOLDS_STATES: dict[str, bool] = {"mooncake": True, "lmcache": False}


class ExternalStore:
    """The external-only blocks and states behind one engine's host tier (rule 5), least
    recent first. `blocks`: its capacity in blocks (states count `C` each); a store that
    holds no states (LMCache) drops what host memory drops of them."""

    def __init__(
        self, host: HostTier, blocks: int, holds_states: bool, block_bytes: float, bandwidth: float
    ) -> None:
        self.host = host
        self.cap = blocks
        self.holds_states = holds_states
        self.block_bytes = block_bytes
        self.bandwidth = bandwidth
        self.blocks: dict[Block, int] = {}
        self.states: dict[State, int] = {}
        self._tick = 0
        self.evictions = 0
        self.loads = 0

    def dropped(self, b: Block | None, s: State | None) -> None:
        """Host memory dropped `b` or `s`: the store's copy is now the only one."""
        self._tick += 1
        if b is not None:
            self.blocks[b] = self._tick
        elif s is not None and self.holds_states:
            self.states[s] = self._tick
        self._fit()

    def _fit(self) -> None:
        """The store's room for external-only entries: its capacity less its copies of what
        host memory holds (which holds copies of the GPU's, rule 1)."""
        h, c, C = self.host, self.host.cache, self.host.C
        held = c.resident_blocks + len(h.blocks)
        if self.holds_states:
            held += C * (c.resident_states + len(h.states))
        blocks, states = self.blocks, self.states
        while (blocks or states) and len(blocks) + C * len(states) > self.cap - held:
            b = next(iter(blocks), None)
            s = next(iter(states), None)
            if s is None or (b is not None and blocks[b] <= states[s]):
                del blocks[b]  # type: ignore[arg-type]
            else:
                del states[s]
            self.evictions += 1

    def loaded(self, blocks: list[Block], state: State | None) -> None:
        hit = False
        for b in blocks:
            hit = self.blocks.pop(b, None) is not None or hit
        if state is not None:
            hit = self.states.pop(state, None) is not None or hit
        self.loads += hit

    def seconds(self, blocks: int) -> float:
        """Seconds to bring `blocks` blocks from the store into host memory."""
        return blocks * self.block_bytes / self.bandwidth


# Host-to-GPU bandwidth per GPU, bytes per second: PCIe Gen5 x16 as measured host to device
# (about 54 GB/s; a vLLM CPU-offload microbenchmark, docs/cache-tiers.md names it). An
# assumption for B200 hosts, which the source does not give; `--host-bandwidth-gbs` sets it.
DEFAULT_BANDWIDTH_GBS = 54.0


class TierError(ValueError):
    """A host tier that cannot be built; the message names the setting."""


def block_bytes(profile: ModelProfile) -> float:
    """Bytes of one cache block of the whole engine: the GPU cache's bytes per GPU times the
    GPUs (under tensor parallelism each block is split across them) over the blocks."""
    gib = profile.cache_gib_per_gpu
    if gib is None:
        raise TierError(
            f"profile {profile.name} gives no cache_gib_per_gpu, so host memory in GB cannot "
            "be turned into its blocks; add it to the profile's YAML"
        )
    return gib * GIB * profile.gpus / profile.blocks_per_engine


def check_host_tier(policy: str, profile: ModelProfile, host_memory_gb: float) -> None:
    """Raise `TierError` (naming the flag) where `policy` on `profile` can have no host tier
    of `host_memory_gb` GiB."""
    where = f"--host-memory-gb {host_memory_gb:g}"
    if host_memory_gb <= 0:
        raise TierError(f"{where}: host memory must be positive")
    if policy.endswith("-native"):
        raise TierError(
            f"{where}: policy '{policy}' runs the engine's own GPU cache code, which is driven "
            "without a host tier so far; use the modelled policy (vllm, sglang)"
        )
    if policy == "ideal":
        raise TierError(f"{where}: policy 'ideal' holds everything on the GPU already")
    try:
        per_block = block_bytes(profile)
    except TierError as e:
        raise TierError(f"{where}: {e}") from None
    if host_memory_gb * GIB < per_block:  # it would hold nothing: say so, not run on empty
        raise TierError(
            f"{where}: less than one cache block ({per_block / GIB:.3g} GiB on "
            f"{profile.name}); give at least that, or 0 for no host tier"
        )


def check_kv_share(policy: str, two_pools: bool, host_memory_gb: float, kv_share: float) -> None:
    """Raise `TierError` where a KV share of host memory cannot be honoured: the engine keeps
    one host pool (vLLM's connector, FlashState: blocks and states share it), there is no
    host memory, or the share is no fraction."""
    where = f"--kv-share {kv_share:g}"
    if not 0 <= kv_share <= 1:
        raise TierError(f"{where}: a share of host memory is a fraction in [0, 1]")
    if not host_memory_gb:
        raise TierError(f"{where}: there is no host memory to split (--host-memory-gb 0)")
    if not two_pools:
        raise TierError(
            f"{where}: policy '{policy}' keeps one host pool (KV blocks and states share it), "
            "so there is no split to set; only SGLang's HiCache has a KV and a state pool"
        )


def attach_host_tier(
    cache: HybridCache,
    policy: str,
    profile: ModelProfile,
    host_memory_gb: float,
    bandwidth_gbs: float = DEFAULT_BANDWIDTH_GBS,
    kv_share: float | None = None,
) -> HostTier:
    """Give `cache` (policy `policy` on `profile`) a host tier of `host_memory_gb` GiB,
    loaded at `bandwidth_gbs` GB/s per GPU (the engine's GPUs each load their shard), sized
    by rule 2: one pool of blocks, or SGLang's two pools split as its device pools, or
    `kv_share` of the bytes to the KV pool where given (`replay plan-host`'s override)."""
    check_host_tier(policy, profile, host_memory_gb)
    if bandwidth_gbs <= 0:
        raise TierError(f"--host-bandwidth-gbs must be positive, not {bandwidth_gbs}")
    per_block = block_bytes(profile)
    blocks = int(host_memory_gb * GIB // per_block)
    slots: int | None = None
    two_pools = cache.state_slots is not None and cache.capacity is not None
    if kv_share is not None:
        check_kv_share(policy, two_pools, host_memory_gb, kv_share)
    if cache.state_slots is not None and cache.capacity is not None:
        kv_dev = cache.capacity - cache.C * cache.state_slots
        share = kv_dev / cache.capacity  # the device pools' bytes (rule 2, SGLang)
        if kv_share is None:
            slots = int(blocks * (1 - share)) // cache.C
            blocks = int(blocks * share)
        else:  # a given share: the KV pool's blocks, the rest whole states (no float residue)
            kv = int(blocks * kv_share + 1e-9)
            slots, blocks = (blocks - kv) // cache.C, kv
    tier = HostTier(
        cache,
        blocks,
        slots,
        hit_rule_for(policy),
        per_block,
        bandwidth_gbs * 1e9 * profile.gpus,
    )
    cache.host = tier
    return tier


def check_external(host_memory_gb: float, external_memory_gb: float, store: str) -> None:
    """Raise `TierError` (naming the flag) where an external store cannot be built."""
    where = f"--external-memory-gb {external_memory_gb:g}"
    if external_memory_gb == 0:  # the store named alone: say what it needs
        raise TierError(
            f"--external-store {store}: needs --external-memory-gb (the store's GiB per "
            "engine, > 0) and --host-memory-gb"
        )
    if external_memory_gb < 0:
        raise TierError(f"{where}: the external store's size must be positive")
    if not host_memory_gb:
        raise TierError(
            f"{where}: the external store sits behind host memory (SGLang's storage backend "
            "needs HiCache, vLLM's store is reached through its host buffer); give "
            "--host-memory-gb too"
        )
    if store not in STORE_HOLDS_STATES:
        known = ", ".join(STORE_HOLDS_STATES)
        raise TierError(f"--external-store {store}: not a store the model knows ({known})")


def attach_external(
    tier: HostTier,
    profile: ModelProfile,
    external_memory_gb: float,
    bandwidth_gbs: float = DEFAULT_BANDWIDTH_GBS,
    store: str = "mooncake",
) -> ExternalStore:
    """Put an external store of `external_memory_gb` GiB behind `tier` (rule 5), loaded into
    host memory at `bandwidth_gbs` GB/s per GPU; `store` says what it holds."""
    check_external(1.0, external_memory_gb, store)
    if bandwidth_gbs <= 0:
        raise TierError(f"--external-bandwidth-gbs must be positive, not {bandwidth_gbs}")
    per_block = block_bytes(profile)
    ext = ExternalStore(
        tier,
        int(external_memory_gb * GIB // per_block),
        STORE_HOLDS_STATES[store],
        per_block,
        bandwidth_gbs * 1e9 * profile.gpus,
    )
    tier.external = ext
    return ext
