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

from mypy_extensions import mypyc_attr

from replay.sim.cache.keys import Prefix, shared_length
from replay.sim.cache.materialize import finish_request
from replay.sim.cache.materialize import prefill_done as materialize_prompt
from replay.sim.cache.nodes import Block, State
from replay.sim.cache.requests import CacheError, Handle, ResumeInfo
from replay.sim.cache.store import CachePolicy, CacheStore

__all__ = ["CacheError", "CachePolicy", "Handle", "HybridCache", "ResumeInfo"]


# Compiled (`replay.sim.compiled`), yet open to interpreted subclasses: vLLM's own manager
# is driven through one (`replay.sim.native.vllm_cache`).
@mypyc_attr(allow_interpreted_subclasses=True)
class HybridCache(CacheStore):
    """The request lifecycle on the store (`replay.sim.cache.store.CacheStore`: the prefix
    tree, its memory and the primitives eviction calls): look up, pin, reserve, cache the
    prompt, and cache what a finished request computed."""

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
            lcp = (
                shared_length(prefix, c.src, parent.end, min(c.end, n)) if c.src is not None else 0
            )
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
