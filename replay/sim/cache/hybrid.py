"""The hybrid-state cache: an online, policy-parameterised model of an engine's prefix cache.

A hybrid state is the attention KV of positions [0, p) plus a recurrent checkpoint taken at
exactly p; a request can resume only at a position where both are resident. Memory is in
the engine's units (`ModelProfile`): KV blocks of `block_tokens` tokens (a terminal partial
block counted in full) and checkpoints of `checkpoint_blocks` blocks each. The cache knows
nothing about traces, sessions or event loops: a caller passes a clock (`now`, seconds) and
`Prefix` objects (`replay.sim.cache.keys`), and everything is deterministic.

How to drive the cache online (the emulator and the simulator both do exactly this)
-------------------------------------------------------------------------------------
```
cache = HybridCache(profile, make_policy("flashstate", profile))
prompt = TokenPrefix(prompt_ids, g=64)                # or LineagePrefix in the simulator
info = cache.lookup(prompt, len(prompt_ids), now)     # ResumeInfo: resume_pos, misses, …
h = cache.begin(prompt, len(prompt_ids), info, now)   # pins (parks) what it resumes from
if not cache.reserve(h, total_len, now):              # KV for [0, total_len) + state buffer
    cache.abort(h, now)                               #   doesn't fit even after eviction
…prefill [info.resume_pos, n)…                        # the caller's clock moves on
cache.prefill_done(h, now)                            # prompt blocks + their checkpoints cached
…decode…
full = prompt.extended(output_ids)                    # keys of prompt + output
cache.finish(h, full, total_len, now)                 # checkpoints placed, exact-end capture,
                                                      # admission, pins released
```
`lookup` is pure (it changes nothing), so a caller may look up without sending. Between
`begin` and `finish` the request holds its blocks; what it computes becomes visible to other
requests at `finish`. `cache.used_blocks`, `cache.resident_states` and `cache.capacity`
describe occupancy at any moment. Policies: `replay.sim.cache.policies.make_policy(name, profile)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr

from replay.profiles import ModelProfile
from replay.sim.cache.keys import Prefix, common_prefix_length
from replay.sim.cache.materialize import finish_request
from replay.sim.cache.materialize import prefill_done as materialize_prompt
from replay.sim.cache.nodes import Block, State
from replay.sim.cache.requests import CacheError, Handle, ResumeInfo, bounded_capacity

if TYPE_CHECKING:
    from replay.sim.cache.policy_base import Policy

__all__ = ["CacheError", "Handle", "HybridCache", "ResumeInfo"]


# Compiled (`replay.sim.compiled`), yet open to interpreted subclasses: vLLM's own manager
# is driven through one (`replay.sim.native.vllm_cache`).
@mypyc_attr(allow_interpreted_subclasses=True)
class HybridCache:
    """Blocks and checkpoints in a prefix tree, with memory accounting and a pluggable policy.

    Nodes are never deleted: an evicted block or checkpoint stays as a non-resident "ghost",
    which is how the cache knows where checkpoints were ever taken and what was ever
    computed (the ideal resume position)."""

    def __init__(self, profile: ModelProfile, policy: Policy, capacity_blocks: int | None = None):
        self.profile = profile
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

    # lookup ------------------------------------------------------------------------------
    def lookup(
        self, prefix: Prefix, prompt_len: int, now: float, ideal_hint: int = 0
    ) -> ResumeInfo:
        """Where a request with this prompt would resume; changes nothing."""
        B, n, nodes = self.B, prompt_len, self.nodes
        chain: list[Block] = []
        resident_run = True
        kv_pos = 0
        end = B
        every = getattr(prefix, "keys_every", None)  # LineagePrefix: all keys in one pass
        keys = every(B, n) if every is not None else (prefix.key_at(p) for p in range(B, n + 1, B))
        for key in keys:
            b = nodes.get(key)
            if b is None:
                break
            chain.append(b)
            if resident_run and b.resident:
                kv_pos = end
            else:
                resident_run = False
            end += B
        ideal = len(chain) * B
        # The last chain node's children: blocks the prompt diverges inside (or ends inside).
        parent = chain[-1] if chain else self.root
        tail: list[tuple[State, bool]] = []
        for c in parent.related(prefix):
            lcp = _common(prefix, c.src, parent.end, min(c.end, n)) if c.src is not None else 0
            if lcp <= parent.end:
                continue
            ideal = max(ideal, lcp)
            kv_ok = resident_run and c.resident
            if kv_ok:
                kv_pos = max(kv_pos, lcp)
            tail.extend((s, kv_ok) for s in c.states if s.pos <= lcp)
        ideal = min(max(ideal, ideal_hint), n)
        # Nearest checkpoint ever taken / with KV resident / fully resident, deepest first.
        ckpt = res = resume = 0
        state: State | None = None
        for s, kv_ok in sorted(tail, key=lambda x: -x[0].pos):
            ckpt = max(ckpt, s.pos)
            if kv_ok:
                res = max(res, s.pos)
                if s.resident and s.pos > resume:
                    resume, state = s.pos, s
        if state is None:
            for j in range(len(chain) - 1, -1, -1):
                b = chain[j]
                if not b.states:
                    continue
                kv_ok = b.end <= kv_pos
                for s in b.states:
                    if s.pos > ckpt:
                        ckpt = s.pos
                    if kv_ok:
                        if s.pos > res:
                            res = s.pos
                        if s.resident and s.pos > resume:
                            resume, state = s.pos, s
                if state is not None:
                    break
        resident_chain = [b for b in chain if b.resident]
        info = ResumeInfo(n, ideal, ckpt, res, resume, kv_pos, state, resident_chain, chain)
        self.policy.adjust(info)
        if self.host is not None:
            info.tiered = True
            self.host.extend(info, prefix, n)
        return info

    # request lifecycle -------------------------------------------------------------------
    def begin(self, prefix: Prefix, prompt_len: int, info: ResumeInfo, now: float) -> Handle:
        """Pin what the request resumes from and reuses (a waiting request's state is parked)."""
        self.clock = now
        for b in info.chain:
            b.live += 1
        st = info.state
        if st is not None:
            if self.ancestor_stamp:
                self._stamp_ancestors(st, now)
            if self.pin_resumed:
                st.live += 1
                if self.policy.rules["resume_stamp"] == "start":
                    st.last_use = now
                self.eviction.on_resume(st, now)
            else:  # not held: the hit is its use, and it stays evictable meanwhile
                st.last_use = now
                self.eviction.on_resume(st, now)
                self.eviction.on_state_released(st, now)
                st = None
        placements = self.policy.prefill_positions(info, prompt_len, self.B)
        if info.host_state is not None:  # loaded from host memory: cached again at its place
            placements = [info.resume_pos, *placements]
        full_end = (prompt_len // self.B) * self.B
        return Handle(
            prefix,
            prompt_len,
            info.resume_pos,
            st,
            list(info.chain),
            info.path,
            placements=[p for p in placements if p <= full_end],
            late_placements=[p for p in placements if p > full_end],
            start_s=now,
            host_blocks=info.host_blocks,
            host_state=info.host_state,
        )

    def reserve(self, h: Handle, total_len: int, now: float) -> bool:
        """Hold KV for [0, total_len), the live state buffer, and checkpoints placed inside
        the prompt's last partial block (they are cached when the request ends)."""
        if h.reserved:
            raise CacheError("reserve() called twice for one request")
        need_blocks = max(-(-total_len // self.B) - len(h.pinned), 0)
        need_states = self.state_buffer  # the live state buffer (rule live_state_buffer);
        # placed checkpoints are cached as taken
        if not self.make_room(need_blocks, need_states, now):
            return False
        h.reserved_blocks, h.reserved_states, h.total_len = need_blocks, need_states, total_len
        self.private_blocks += need_blocks
        self.private_states += need_states
        h.reserved = True
        return True

    def prefill_done(self, h: Handle, now: float) -> None:
        """The prompt is computed: its full blocks join the tree (pinned by the request) and
        the checkpoints placed in them are cached now, evictable like any other."""
        self.clock = now
        if self.host is not None and (h.host_blocks or h.host_state is not None):
            self.host.loaded(h.host_blocks, h.host_state)
        materialize_prompt(self, h, now)

    def abort(self, h: Handle, now: float) -> None:
        """Release a request that will not run (or was cancelled): nothing is cached."""
        self.release_reservation(h)
        self.unpin(h, now)
        if h.held_state is not None:
            h.held_state.live -= 1
            self.eviction.on_state_released(h.held_state, now)
        self.eviction.after_release(h.pinned, now)

    def finish(self, h: Handle, full: Prefix, total_len: int, now: float) -> None:
        """The request ended at `total_len`: its blocks and checkpoints join the cache."""
        self.clock = now
        finish_request(self, h, full, total_len, now)

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
        return self.profile.prefill_seconds(a.pos if a is not None else 0, s.pos)


def _pos(s: State) -> int:
    return s.pos


def _common(q: Prefix, src: Prefix, lo: int, hi: int) -> int:
    """Length of the common prefix of `q` and `src` within [lo, hi], given they share lo."""
    hi = min(hi, q.length, src.length)
    if hi <= lo:
        return lo
    if q.key_at(hi) == src.key_at(hi):
        return hi
    return common_prefix_length(q, src, lo, hi - 1)
