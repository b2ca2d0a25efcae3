"""Ending a request: its KV path and checkpoints join the cache (the `finish` half of the
cache API, kept apart from lookup and accounting so each stays short).

A finished request's blocks become tree nodes keyed by the full sequence (prompt + output).
A terminal partial block that a resident longer sibling already holds is not duplicated
(copy-on-write: the sibling's first tokens are the same); a new block absorbs the
checkpoints of shorter partial siblings whose tokens it contains, and those go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replay.sim.cache.keys import Prefix
from replay.sim.cache.nodes import Block, State
from replay.sim.cache.requests import CacheError

if TYPE_CHECKING:
    from replay.sim.cache.requests import Handle
    from replay.sim.cache.store import CacheStore


def finish_request(cache: CacheStore, h: Handle, full: Prefix, e: int, now: float) -> None:
    if not h.reserved:
        raise CacheError("finish() before a successful reserve()")
    if full.length < e:
        raise CacheError(f"finish(): the prefix covers {full.length} tokens, not {e}")
    if not h.prefilled:
        prefill_done(cache, h, now)
    # Unpinned first (nothing is evicted before this returns), so the checkpoint it resumed
    # from can be absorbed into the block that now holds its tokens.
    cache.release_reservation(h)
    cache.unpin(h, now)
    absorb_from = max(h.resume_pos - 1, 0) // cache.B
    path = _materialize(cache, full, e, cache.block_stamp(h, now), absorb_from, h.pinned)
    if h.held_state is not None:
        h.held_state.live -= 1
    # Rule prefill_state_stamp: "end", released with the request like every block it wrote
    # (stamped now); "release", stamped now only if the request held it (its latest chunk
    # state), else keeping the stamp it got when cached (the source's "last use: when it was
    # cached, when a request resumed from it, or when the last live request holding it
    # ended"); "write", every one keeping the stamp it got when written.
    rule = cache.policy.rules["prefill_state_stamp"]
    held = h.held_state
    for s in h.early_states:
        if s.resident and s.live == 0:
            at_end = rule == "end" or (rule == "release" and s is held)
            if at_end:
                s.last_use = now
            cache.eviction.on_state_released(s, now, used=at_end)
    end = cache.policy.placement.end_positions(h.prompt_len, e, cache.B)
    added = _register_states(cache, full, path, end, now)
    _add_states(cache, added, now)
    cache.eviction.after_release(path, now)
    _fit(cache, path, added, now)


def _fit(cache: CacheStore, path: list[Block], added: list[State], now: float) -> None:
    """Bring a finished request back within capacity. `reserve` held ceil(total/B) blocks,
    but ending can take one more: the prompt's terminal partial block (written at
    `prefill_done` for a checkpoint placed in it) is folded into the final block only if no
    live request holds a checkpoint in it; when one does (another request resumed from it,
    or this request's own held chunk state), the final block is a new one — a copy-on-write
    copy — next to it. The engine evicts before writing that copy, so evict now; if live
    requests pin everything else, drop what this request just added (its end checkpoints,
    then its unneeded KV from the end) instead of exceeding the capacity."""
    if cache.make_room(0, 0, now):
        return
    for s in reversed(added):
        if s.resident and s.live == 0:
            cache.drop_unit(s)
            if cache.make_room(0, 0, now):
                return
    if path:
        cache.collect(path[-1])


def prefill_done(cache: CacheStore, h: Handle, now: float) -> None:
    """Full prompt blocks become pinned tree nodes; early placements are cached."""
    if not h.reserved:
        raise CacheError("prefill_done() before a successful reserve()")
    if h.prefilled:
        return
    h.prefilled = True
    B, nodes, prefix, known = cache.B, cache.nodes, h.prefix, h.known
    parent = cache.root
    n_full = h.prompt_len // B
    path: list[Block] = known[:n_full]  # the lookup's blocks: pinned and stamped, no lookup
    for b in path:
        if not b.resident and h.reserved_blocks > 0:
            _take_reserved(cache, h, parent, b)
        b.last_use = now
        b.live += 1
        parent = b
    for j in range(len(path), n_full):
        end = (j + 1) * B
        key = prefix.key_at(end)
        found = nodes.get(key)
        if found is None:
            b = Block(key, parent, j, end, prefix)
            nodes[key] = b
            parent.add_child(b, prefix)
        else:
            b = found
        if not b.resident and h.reserved_blocks > 0:
            _take_reserved(cache, h, parent, b)
        b.last_use = now
        b.live += 1
        path.append(b)
        parent = b
    for b in h.pinned:
        b.live -= 1
    h.pinned = path
    if h.late_placements:  # checkpoints inside the prompt's last, partial block
        path = [*path, _tail_block(cache, h, parent, now)]
    for p in [*h.placements, *h.late_placements]:
        # Taken first, then admitted (or not), then room is made for it by evicting others;
        # with nothing evictable it is not kept.
        added = _register_states(cache, prefix, path, [p], now)
        _add_states(cache, added, now)
        for s in added:
            if not s.resident:
                continue
            if cache.make_room(0, 0, now):
                if s.resident:
                    h.early_states.append(s)
            else:
                cache.drop_unit(s)
    # The latest checkpoint stays with the request until it ends (earlier ones are released
    # as the prefill moves past them) — unless the request will capture a later one when it
    # ends (ASC, SGLang's grid): then it is just another state, evictable by the policy.
    last = h.early_states[-1] if h.early_states else None
    hold = cache.policy.rules["hold_chunk_state"] and cache.policy.placement.holds_last_state
    if last is not None and last.resident and hold:
        last.live += 1
        h.held_state = last


def _take_reserved(cache: CacheStore, h: Handle, parent: Block, b: Block) -> None:
    """A prompt block becomes resident in one of the blocks `reserve` held for it."""
    b.resident = True
    cache.resident_blocks += 1
    cache.private_blocks -= 1
    h.reserved_blocks -= 1
    if (k := parent.children) and (len(k) > 1 or k[0] is not b):  # a sibling
        _absorb_partials(cache, parent, b, h.prefix)


def _tail_block(cache: CacheStore, h: Handle, parent: Block, now: float) -> Block:
    """The prompt's terminal partial block as a node (pinned by the request), so that the
    checkpoints placed inside it are cached now; `finish` folds it into the final block."""
    n = h.prompt_len
    key = h.prefix.key_at(n)
    tb = cache.nodes.get(key) or _covering_sibling(parent, h.prefix, n)
    if tb is None:
        tb = Block(key, parent, n // cache.B, n, h.prefix)
        cache.nodes[key] = tb
        parent.add_child(tb, h.prefix)
    if not tb.resident:
        tb.resident = True
        cache.resident_blocks += 1
        cache.private_blocks -= 1
        h.reserved_blocks -= 1
    tb.live += 1
    tb.last_use = now
    h.tail = tb
    return tb


def _add_states(cache: CacheStore, new_states: list[State], now: float) -> None:
    ev = cache.eviction
    ev.on_states_added(new_states, now)
    for s in new_states:
        if s.resident and not ev.admit(s, now):
            cache.admission_refusals += 1
            cache.drop_unit(s)


def _materialize(
    cache: CacheStore, full: Prefix, e: int, stamp: float, absorb_from: int, known: list[Block]
) -> list[Block]:
    """Blocks of [0, e) as resident nodes, stamped `stamp`. From block `absorb_from` on (where the request
    resumed: the previous turn's terminal block is there), shorter partial siblings are
    absorbed even into blocks that were resident already. `known`: the prompt's full blocks
    (already resident and pinned until now), reused instead of looked up again."""
    B, nodes, keep_terminal = cache.B, cache.nodes, cache.policy.keep_terminal_block
    path: list[Block] = []
    parent = cache.root
    for j in range(min(len(known), absorb_from)):
        kb = known[j]
        if not kb.resident:  # a block the request could not reserve: no longer reusable
            break
        kb.last_use = stamp
        path.append(kb)
        parent = kb
    for j in range(len(path), -(-e // B)):
        end = min((j + 1) * B, e)
        key = full.key_at(end)
        b: Block | None = nodes.get(key)
        partial = end < (j + 1) * B
        if b is None and partial:
            b = _covering_sibling(parent, full, end)
        if b is None:
            b = Block(key, parent, j, end, full)
            nodes[key] = b
            parent.add_child(b, full)
        if not b.resident and (keep_terminal or not partial):
            b.resident = True
            cache.resident_blocks += 1
            if (k := parent.children) and (len(k) > 1 or k[0] is not b):  # a sibling
                _absorb_partials(cache, parent, b, full)
        elif (
            b.resident
            and j >= absorb_from
            and (k := parent.children)
            and (len(k) > 1 or k[0] is not b)
        ):
            _absorb_partials(cache, parent, b, full)
        b.last_use = stamp
        path.append(b)
        parent = b
    return path


def _covering_sibling(parent: Block, full: Prefix, end: int) -> Block | None:
    """A resident child of `parent` that already holds this sequence's tokens up to `end`."""
    key = full.key_at(end)
    for c in parent.related(full):
        if c.resident and c.end >= end and c.src is not None and c.src.key_at(end) == key:
            return c
    return None


def _absorb_partials(cache: CacheStore, parent: Block, b: Block, full: Prefix) -> None:
    """Move checkpoints of shorter partial siblings whose tokens `b` holds onto `b`
    (callers skip it when `parent` has no child but `b`, the usual case)."""
    for p in list(parent.related(full)):
        if p is b or p.end >= b.end or p.live or any(s.live for s in p.rstates):
            continue
        # `b` may be a reused block that runs past the tokens this sequence knows; a sibling
        # ending beyond them cannot be shown to hold the same tokens, so it keeps its states.
        if p.end > full.length:
            continue
        if full.key_at(p.end) != p.key:
            continue
        for s in p.states:
            s.block = b
            b.states.append(s)
            if s.resident:
                p.deps -= 1
                b.deps += 1
        b.rstates.extend(p.rstates)
        cache.eviction.refresh(p.rstates, cache.clock)
        p.states = []
        p.rstates = []
        if p.resident:
            p.resident = False
            cache.resident_blocks -= 1
        parent.remove_child(p)
        cache.nodes.pop(p.key, None)
        cache.absorbed.append(p)


def _register_states(
    cache: CacheStore, full: Prefix, path: list[Block], positions: list[int], now: float
) -> list[State]:
    B, states = cache.B, cache.states
    added: list[State] = []
    for p in positions:
        if p <= 0:
            continue
        blk = path[(p - 1) // B]
        key = full.key_at(p)
        s = states.get(key)
        if s is not None and s.resident:
            s.last_use = now
            continue
        if s is None:
            s = State(cache.next_uid(), key, p, blk)
            states[key] = s
            blk.states.append(s)
        elif s.block is not blk:
            if s in s.block.states:
                s.block.states.remove(s)
            s.block = blk
            blk.states.append(s)
        if not blk.resident:
            continue  # its KV is not kept: the checkpoint exists only as a record
        s.resident = True
        blk.rstates.append(s)
        s.last_use = now
        s.stamp = cache.L
        cache.resident_states += 1
        cache.live_resident[s.uid] = s
        for b in blk.up:
            b.deps += 1
        added.append(s)
    return added
