"""The cache's store: blocks and checkpoints in a prefix tree, the memory they take, and
the primitives that materialisation (`replay.sim.cache.materialize`), eviction
(`replay.sim.cache.eviction`) and the policies call on it, with the hooks an eviction
implements (`Eviction`). The request lifecycle built on it (`lookup`, `begin`, `reserve`,
`prefill_done`, `finish`, `abort`) is `replay.sim.cache.hybrid.HybridCache`.

The store sits below everything that calls it: it knows a policy only by the few members it
reads (`CachePolicy`), so materialisation and eviction import it, never the cache above them.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Protocol

from mypy_extensions import mypyc_attr

from replay.profiles import ModelProfile
from replay.sim.cache.cost import PrefillCost
from replay.sim.cache.nodes import Block, State
from replay.sim.cache.requests import Handle, bounded_capacity

if TYPE_CHECKING:
    from replay.sim.cache.requests import ResumeInfo


class CachePlacement(Protocol):
    """Where a policy writes checkpoints (`replay.sim.cache.policy_base.Placement`)."""

    @property
    def holds_last_state(self) -> bool: ...

    def end_positions(self, n: int, e: int, block: int) -> list[int]: ...


class CachePolicy(Protocol):
    """What the store and the cache read of their policy
    (`replay.sim.cache.policy_base.Policy`)."""

    @property
    def name(self) -> str: ...

    @property
    def rules(self) -> dict[str, Any]: ...

    @property
    def opts(self) -> dict[str, Any]: ...

    @property
    def placement(self) -> CachePlacement: ...

    @property
    def keep_terminal_block(self) -> bool: ...

    @property
    def frees_dependent_states(self) -> bool: ...

    def state_slots(self, profile: ModelProfile) -> int | None: ...

    def capacity_blocks(self, profile: ModelProfile) -> int | None: ...

    def make_eviction(self, cache: CacheStore) -> Eviction: ...

    def prefill_positions(self, info: ResumeInfo, n: int, block: int) -> list[int]: ...

    def adjust(self, info: ResumeInfo) -> None: ...


Pool = str  # "any" (one shared pool), "kv" or "state" (SGLang's two pools)


@mypyc_attr(allow_interpreted_subclasses=True)  # SGLang's LRU (sglang_policy) is interpreted
class Eviction:
    """Hooks the cache calls; the default keeps everything and evicts nothing."""

    unit_owned = False  # KV lives only as part of recovery units (orphan KV is freed)

    def __init__(self, cache: CacheStore):
        self.cache = cache
        self._seq = itertools.count()
        self.victim: Block | State | None = None  # the last one evicted (for error messages)

    def on_resume(self, s: State, now: float) -> None:
        """A request pinned `s` to resume from it."""

    def on_state_released(self, s: State, now: float, used: bool = True) -> None:
        """The last live request holding `s` ended (`used`: that counts as a use of `s`;
        LRU policies read the use from `s.last_use`, which the caller sets)."""

    def on_states_added(self, states: list[State], now: float) -> None:
        """New resident checkpoints (before admission)."""

    def admit(self, s: State, now: float) -> bool:
        return True

    def refresh(self, states: list[State], now: float) -> None:
        """`states` moved to another block (a partial block was absorbed)."""

    def after_release(self, path: list[Block], now: float) -> None:
        """A request ended; `path` is its block path, now unpinned."""
        if self.unit_owned and path:
            self.cache.collect(path[-1])

    def evict_one(self, pool: Pool, now: float) -> bool:
        return False


# Compiled (`replay.sim.compiled`), yet open to interpreted subclasses (through `HybridCache`:
# vLLM's own manager is driven through one, `replay.sim.native.vllm_cache`).
@mypyc_attr(allow_interpreted_subclasses=True)
class CacheStore:
    """Blocks and checkpoints in a prefix tree, with memory accounting and a pluggable policy.

    Nodes are never deleted: an evicted block or checkpoint stays as a non-resident "ghost",
    which is how the cache knows where checkpoints were ever taken and what was ever
    computed (the ideal resume position)."""

    def __init__(
        self, profile: ModelProfile, policy: CachePolicy, capacity_blocks: int | None = None
    ):
        self.profile = profile
        self.cost = PrefillCost(profile)  # restore seconds (GreedyDual-Size's prices)
        self.policy = policy
        self.B = profile.block_tokens
        self.C = profile.checkpoint_blocks
        # `capacity_blocks` overrides the policy's (what-ifs, tests) by the one rule of
        # `replay.sim.cache.capacity` (an unbounded policy stays unbounded; pools are sized before).
        self.state_slots: int | None = policy.state_slots(profile)
        self.capacity: int | None = bounded_capacity(
            policy.name,
            policy.capacity_blocks(profile),
            capacity_blocks,
            self.state_slots is not None,
        )
        self.nodes: dict[int, Block] = {}
        self.states: dict[int, State] = {}
        self.absorbed: list[Block] = []  # partial blocks taken out of the tree (`release`)
        self.root = Block(0, None, -1, 0, None)
        self.root.resident = True
        self.resident_blocks = 0
        self.resident_states = 0
        self.private_blocks = 0  # reserved by live requests, not yet in the tree
        self.private_states = 0
        self.live_resident: dict[int, State] = {}  # uid -> resident state (for scans)
        self.L = 0.0  # GreedyDual-Size watermark (used by GDS policies)
        self.clock = 0.0  # the latest `now` a request-lifecycle call passed in
        self._uid = 0
        self.evictions = 0  # evictions made to fit something (a unit or an allocation each)
        self.admission_refusals = 0
        rules = policy.rules
        # Rule switches read on hot paths (`replay.sim.cache.policy_base.RULES`).
        self.pin_resumed = bool(rules.get("pin_resumed_state", True))
        self.ancestor_stamp = bool(rules.get("ancestor_stamp", False))
        self.state_buffer = 1 if rules.get("live_state_buffer", True) else 0
        self.free_stranded = bool(rules.get("free_stranded_states", False))
        self.free_dependent = bool(policy.frees_dependent_states)
        self.eviction = policy.make_eviction(self)
        # The host-memory tier (`replay.sim.cache.tiers.HostTier`, issue 34), None without
        # one: every hook below is a single test of it then.
        self.host: Any = None

    # memory ------------------------------------------------------------------------------
    @property
    def kv_used(self) -> int:
        return self.resident_blocks + self.private_blocks

    @property
    def states_used(self) -> int:
        return self.resident_states + self.private_states

    @property
    def used_blocks(self) -> int:
        """Blocks in use, checkpoints included (in the state pool's block size if separate)."""
        return self.kv_used + self.C * self.states_used

    def _kv_capacity(self) -> int | None:
        if self.capacity is None:
            return None
        if self.state_slots is None:
            return self.capacity
        return self.capacity - self.C * self.state_slots

    def free_blocks(self) -> float:
        """Free blocks in the pool KV lives in (infinite when unbounded)."""
        if self.capacity is None:
            return float("inf")
        if self.state_slots is None:
            return self.capacity - self.used_blocks
        return (self._kv_capacity() or 0) - self.kv_used

    def free_state_slots(self) -> float:
        """Checkpoints that still fit without eviction."""
        if self.capacity is None:
            return float("inf")
        if self.state_slots is None:
            return (self.capacity - self.used_blocks) // self.C
        return self.state_slots - self.states_used

    def make_room(self, blocks: int, states: int, now: float) -> bool:
        """Evict until `blocks` KV blocks and `states` checkpoints fit; False if impossible."""
        if self.capacity is None:
            return True
        if self.state_slots is None:
            need = blocks + self.C * states
            cap, C, ev = self.capacity, self.C, self.eviction
            used = (self.resident_blocks + self.private_blocks) + C * (
                self.resident_states + self.private_states
            )
            while cap - used < need:  # `used_blocks`, inlined: runs once per eviction
                if not ev.evict_one("any", now):  # a native call when compiled
                    return False
                self.evictions += 1
                was, used = (
                    used,
                    (self.resident_blocks + self.private_blocks)
                    + C * (self.resident_states + self.private_states),
                )
                if used >= was:  # progress guard: an eviction must free something
                    self._stalled("any", now, was)
            return True
        while self.free_blocks() < blocks:
            was_kv = self.kv_used
            if not self.eviction.evict_one("kv", now):
                return False
            self.evictions += 1
            if self.kv_used >= was_kv:
                self._stalled("kv", now, was_kv)
        while self.free_state_slots() < states:
            was_st = self.states_used
            if not self.eviction.evict_one("state", now):
                return False
            self.evictions += 1
            if self.states_used >= was_st:
                self._stalled("state", now, was_st)
        return True

    def _stalled(self, pool: str, now: float, was: int) -> None:
        """An eviction that reported success but freed nothing would repeat forever."""
        raise RuntimeError(
            f"{self.policy.name}: eviction in the {pool!r} pool at t={now!r} s reported a "
            f"victim ({self.eviction.victim!r}) but freed nothing (in use: {was} before and "
            "after); the cache would not make progress"
        )

    # helpers used by finish, eviction and policies ---------------------------------------
    def next_uid(self) -> int:
        self._uid += 1
        return self._uid

    def release_reservation(self, h: Handle) -> None:
        """Give back the room `reserve` held for a request (its blocks are cached or dropped)."""
        self.private_blocks -= h.reserved_blocks
        self.private_states -= h.reserved_states
        h.reserved_blocks = h.reserved_states = 0

    def block_stamp(self, h: Handle, now: float) -> float:
        """The LRU stamp a request's blocks get when it ends (rule `block_stamp`)."""
        return now if self.policy.rules["block_stamp"] == "end" else h.start_s

    def unpin(self, h: Handle, now: float) -> None:
        """Release the blocks and checkpoint a request pinned, stamped per rule `block_stamp`."""
        t = self.block_stamp(h, now)
        for b in h.pinned:
            b.live -= 1
            b.last_use = t
        if h.tail is not None:
            h.tail.live -= 1
            h.tail.last_use = t
            h.tail = None
        st = h.state
        if st is not None:
            st.live -= 1
            at_end = self.policy.rules["resume_stamp"] == "end"
            if at_end:
                st.last_use = now
            if st.live == 0:
                self.eviction.on_state_released(st, now, used=at_end)

    def release(self) -> None:
        """Unlink the prefix tree once a run is over, so that it is freed by reference
        counting when the run drops it; the cache is unusable after. Every block is on a
        cycle (its parent lists it; its `up` holds itself), so the cyclic collector used to
        free a run's tree, ~140K objects after a 48-session replay, and its passes over
        them took 0.15-0.25 s, about 18% of the replay (perf, 2026-12-07). Nothing a run
        computes depends on it."""
        todo = [self.root]
        while todo:
            b = todo.pop()
            todo.extend(b.children)
            b.release()
        for b in self.absorbed:
            b.release()
        self.absorbed.clear()
        self.nodes.clear()
        self.states.clear()
        self.live_resident.clear()

    def drop_block(self, b: Block) -> None:
        """Evict one block (its dependent checkpoints stay, now unusable, unless the policy
        frees them with it)."""
        if not b.resident:
            return
        b.resident = False
        self.resident_blocks -= 1
        if self.host is not None:
            self.host.evicted_block(b)
        if self.free_dependent:
            for s in list(b.rstates):
                if s.live == 0:
                    self.drop_state(s)
        if self.free_stranded and b.deps:
            self._drop_stranded(b)

    def _drop_stranded(self, b: Block) -> None:
        """Free the unpinned checkpoints whose path runs through `b`, just evicted (rule
        `free_stranded_states`): without it they are unusable until it is recomputed."""
        todo = [b]
        while todo:
            x = todo.pop()
            for s in list(x.rstates):
                if s.live == 0:
                    self.drop_state(s)
            todo.extend(c for c in x.children if c.deps)

    def _stamp_ancestors(self, st: State, now: float) -> None:
        """Rule `ancestor_stamp`: a resume from `st` is a use of every unpinned resident
        checkpoint before it on its path."""
        for b in st.block.up:
            for o in b.rstates:
                if o is not st and o.pos < st.pos and o.live == 0:
                    o.last_use = now
                    self.eviction.on_state_released(o, now)

    def drop_state(self, s: State) -> None:
        """Evict one checkpoint alone (per-allocation policies)."""
        if not s.resident:
            return
        s.resident = False
        self.resident_states -= 1
        self.live_resident.pop(s.uid, None)
        s.block.rstates.remove(s)
        for b in s.block.up:
            b.deps -= 1
        if self.host is not None:
            self.host.evicted_state(s)

    def exclusive_blocks(self, s: State) -> list[Block]:
        """Blocks only `s` needs: its terminal block and ancestors up to the first one that
        another resident checkpoint or a live request needs."""
        out: list[Block] = []
        for b in s.block.up:
            if not b.resident or b.deps != 1 or b.live:
                break
            out.append(b)
        return out

    def drop_unit(self, s: State) -> int:
        """Evict a recovery unit: the checkpoint and exactly its exclusive blocks."""
        excl = self.exclusive_blocks(s)
        self.drop_state(s)
        for b in excl:
            self.drop_block(b)
        return self.C + len(excl)

    def collect(self, b: Block | None) -> None:
        """Free blocks no checkpoint and no live request needs, from `b` upwards (policies
        that own KV through recovery units keep no orphan KV)."""
        if b is None:
            return
        for a in b.up:
            if not a.resident or a.deps or a.live:
                break
            self.drop_block(a)

    def nearest_ancestor_state(self, s: State) -> State | None:
        """The deepest resident checkpoint strictly before `s` on its path."""
        best: State | None = None
        pos = s.pos
        for o in s.block.rstates:
            if o.pos < pos and (best is None or o.pos > best.pos):
                best = o
        if best is not None:
            return best
        parent = s.block.parent
        for b in parent.up if parent is not None else ():
            rs = b.rstates
            if rs:
                if len(rs) == 1:
                    return rs[0]
                return max(rs, key=_pos)
        return None

    def restore_cost(self, s: State) -> float:
        """Prefill seconds a request wanting `s` would repeat if it went."""
        a = self.nearest_ancestor_state(s)
        return self.cost.seconds(a.pos if a is not None else 0, s.pos)


def _pos(s: State) -> int:
    return s.pos
