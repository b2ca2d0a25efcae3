"""Weka-format sessions (SemiAnalysis cc-traces) → `Trajectory` trees, validated.

One JSON object per session: `id`, `block_size`, `hash_id_scope`, `models`, `requests`, and
fields of this project's: `token_scale` and `arrival_s` (a converted Mooncake session's arrival).
Entries of `requests` with `type: "subagent"` become child trajectories (recursively) with
a parent link, spawn time and spawn index; the parent's own columns exclude them.

Clocks: a trajectory's `t` is seconds from its own start, 0 to a year (`fields.MAX_TRACE_S`).
A subagent's nested `t` values are read on the session clock when the first one is at or
after the subagent entry's `t` (the cc-traces layout: one clock per session), and as already
relative to the subagent's start otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from replay.traces.fields import (
    MAX_ARRIVAL_MS,
    Where,
    check_span,
    int_array,
    join,
    models_of,
    opt_number,
    opt_str,
    opt_time,
    outside_arrival,
    req_int,
    req_list,
    req_time,
)
from replay.traces.idspans import SPAN_MARK, IdsParseError, Ref, assemble, decode
from replay.traces.model import STOP_CODES, STOP_OTHER, TYPE_CODES, HashScope, Trajectory

TYPE_UNKNOWN = -1


@dataclass(slots=True)
class _Ctx:
    """What every trajectory of one session shares."""

    where: Where
    raw: bytes | None
    bounds: list[tuple[int, int]]
    block_size: int
    scope: HashScope
    namespace: str


@dataclass(slots=True)
class _Link:
    """A subagent's place under its parent."""

    parent_id: str
    agent_id: str
    subagent_type: str | None
    entry_t: float  # the entry's `t`, on the parent's raw clock
    spawn_t: float  # in the parent's own clock
    spawn_index: int
    first_ref: Ref | None
    first_ids: np.ndarray | None
    models: tuple[str, ...]
    meta: dict[str, object] = field(default_factory=dict)


def build_session(
    obj: Any, where: Where, raw: bytes | None = None, bounds: list[tuple[int, int]] | None = None
) -> Trajectory | None:
    """Build one session's trajectory tree; None (with an issue recorded) if it has no requests.

    `raw`/`bounds` come from `idspans.blank_spans` when `obj` was parsed from a blanked line;
    rows from `datasets` carry plain lists instead.
    """
    if not isinstance(obj, dict):
        where.fail("(line)", f"expected a JSON object (one Weka session), got {type(obj).__name__}")
    sid = opt_str(obj, "id", "", where)
    if sid is None:
        where.fail("id", "missing; expected the session id (a string)")
    block_size = req_int(obj, "block_size", "", where, "tokens per hash block, e.g. 64")
    if block_size == 0:
        where.fail("block_size", "expected a positive integer, got 0")
    scope_value = obj.get("hash_id_scope")
    if scope_value is None:
        where.issue("hash_id_scope", "missing; assuming 'local' (ids unique per session)")
        scope_value = "local"
    if scope_value not in ("local", "global"):
        where.fail("hash_id_scope", f"expected 'local' or 'global', got {scope_value!r}")
    scope = cast(HashScope, scope_value)
    entries = req_list(obj, "requests", "", where, "the session's requests")
    ctx = _Ctx(
        where,
        raw,
        bounds or [],
        block_size,
        scope,
        namespace=cast(str, sid) if scope == "local" else "global",
    )
    meta = {k: obj[k] for k in ("tool_tokens", "system_tokens") if obj.get(k) is not None}
    scale = opt_number(obj, "token_scale", "", where, "the divisor of its token lengths, ≥ 1")
    if scale == scale:  # not NaN: given
        if scale < 1:
            where.fail("token_scale", f"expected a number ≥ 1 (lengths ÷ it), got {scale:g}")
        meta["token_scale"] = scale
    arrival = _arrival(obj, where)
    if arrival is not None:
        meta["arrival_s"] = arrival
    tr = _build(ctx, entries, "requests", cast(str, sid), None, models_of(obj, "", where), meta)
    if tr is None:
        where.issue("requests", f"session {sid!r} has no requests; skipped")
    return tr


def _arrival(obj: dict[str, Any], where: Where) -> float | None:
    """`arrival_s`, a field of this project's: when the session's first request arrived, in
    seconds on the trace's clock (a Mooncake trace's first timestamp ÷ 1000, so a conversion
    back restores it); None when absent. The replay starts sessions itself and ignores it."""
    what = "when the session arrived, seconds on the trace's clock"
    value = opt_number(obj, "arrival_s", "", where, what)
    if value != value:  # NaN: not given
        return None
    if not 0 <= value <= MAX_ARRIVAL_MS / 1000:
        where.fail("arrival_s", outside_arrival(value, "s", what))
    return value


def _empty_prompt(where: Where, p: str, tid: str, j: int) -> None:
    where.fail(
        join(p, "in"),
        f"session {tid!r}, request {j}: an empty prompt (in = 0); a prompt needs at least one "
        "token (an engine refuses an empty one with HTTP 400); fix or remove the request",
    )


def _build(
    ctx: _Ctx,
    entries: list[Any],
    path: str,
    tid: str,
    link: _Link | None,
    models: tuple[str, ...],
    meta: dict[str, object],
) -> Trajectory | None:
    where = ctx.where
    rows: list[tuple[int, dict[str, Any]]] = []
    subs: list[tuple[int, dict[str, Any]]] = []
    for j, e in enumerate(entries):
        if not isinstance(e, dict):
            where.fail(f"{path}[{j}]", f"expected a request object, got {type(e).__name__}")
        (subs if e.get("type") == "subagent" else rows).append((j, e))
    n = len(rows)
    if n == 0:
        return None
    t = np.empty(n)
    inp = np.empty(n, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    api = np.empty(n)
    think = np.empty(n)
    ttft = np.empty(n)
    rtype = np.empty(n, dtype=np.int8)
    stop = np.empty(n, dtype=np.int8)
    parts: list[tuple[int, np.ndarray]] = []
    refs: list[Ref | None] = []
    ref = link.first_ref if link else None
    for i, (j, e) in enumerate(rows):
        p = f"{path}[{j}]"
        t[i] = req_time(e, "t", p, where, "seconds on the trace's clock")
        n_in = req_int(e, "in", p, where, "prompt tokens")
        if n_in == 0:
            _empty_prompt(where, p, tid, j)
        inp[i] = n_in
        out[i] = req_int(e, "out", p, where, "output tokens")
        api[i] = opt_time(e, "api_time", p, where, "seconds")
        think[i] = opt_time(e, "think_time", p, where, "seconds")
        ttft[i] = opt_time(e, "ttft", p, where, "seconds")
        typ = e.get("type")
        code = TYPE_CODES.get(typ, TYPE_UNKNOWN) if isinstance(typ, str) else TYPE_UNKNOWN
        if code == TYPE_UNKNOWN and typ is not None:
            where.issue(
                join(p, "type"), f"unknown request type {typ!r}; expected 'n', 's' or 'subagent'"
            )
        rtype[i] = code
        s = e.get("stop")
        stop[i] = STOP_CODES.get(s, STOP_OTHER) if isinstance(s, str) else STOP_CODES[""]
        ref = _hash_part(ctx, e, p, ref, parts, refs)
    try:
        offsets, flat = assemble(parts, link.first_ids if link else None)
    except IdsParseError as exc:
        where.fail(
            f"{path}[{rows[exc.part or 0][0]}].hash_ids",
            f"expected a list of integer block ids, {exc}",
        )
    check_span(t, where, lambda k: join(f"{path}[{rows[k][0]}]", "t"))
    offset = 0.0
    if link is not None and t[0] >= link.entry_t - 1e-9:
        offset = link.entry_t  # nested times are on the session clock
    t -= offset
    _check_columns(ctx, rows, path, t, inp, api, think, ttft, np.diff(offsets))
    children = _children(ctx, subs, path, tid, t, offset, offsets, flat, refs)
    return Trajectory(
        id=tid,
        block_size=ctx.block_size,
        hash_scope=ctx.scope,
        namespace=ctx.namespace,
        t=t,
        input_tokens=inp,
        output_tokens=out,
        api_time=api,
        think_time=think,
        ttft=ttft,
        request_type=rtype,
        stop=stop,
        hash_offsets=offsets,
        hash_ids=flat,
        subagents=tuple(children),
        parent_id=link.parent_id if link else None,
        agent_id=link.agent_id if link else None,
        subagent_type=link.subagent_type if link else None,
        spawn_t=link.spawn_t if link else 0.0,
        spawn_index=link.spawn_index if link else 0,
        models=models,
        source_line=where.line,
        meta=meta,
    )


def _hash_part(
    ctx: _Ctx,
    e: dict[str, Any],
    p: str,
    ref: Ref | None,
    parts: list[tuple[int, np.ndarray]],
    refs: list[Ref | None],
) -> Ref | None:
    """Decode one request's `hash_ids` (a span marker or a parsed list); return the new ref."""
    value = e.get("hash_ids")
    f = join(p, "hash_ids")
    if isinstance(value, dict):
        k = value.get(SPAN_MARK)
        if ctx.raw is None or type(k) is not int or not 0 <= k < len(ctx.bounds) or len(value) != 1:
            ctx.where.fail(f, "expected a list of integer block ids, got an object")
        start, end = ctx.bounds[cast(int, k)]
        raw = cast(bytes, ctx.raw)
        try:
            shared, tail = decode(raw, start, end, ref)
        except IdsParseError as exc:
            ctx.where.fail(f, f"expected a list of integer block ids, {exc}")
            raise
        parts.append((shared, tail))
        new = Ref(raw, start, end, shared + len(tail))
        refs.append(new)
        return new
    if isinstance(value, list):
        arr = int_array(value, f, ctx.where)
        parts.append((0, arr))
        refs.append(None)
        return None
    if value is None:
        ctx.where.fail(
            f, "missing; expected a list of integer block ids (one per block_size tokens)"
        )
    ctx.where.fail(f, f"expected a list of integer block ids, got {type(value).__name__}")
    raise AssertionError


def _check_columns(
    ctx: _Ctx,
    rows: list[tuple[int, dict[str, Any]]],
    path: str,
    t: np.ndarray,
    inp: np.ndarray,
    api: np.ndarray,
    think: np.ndarray,
    ttft: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Record inconsistencies that leave the requests usable (vectorised: one pass each)."""
    bs = ctx.block_size
    lo, hi = inp // bs, -(-inp // bs)
    for i in np.flatnonzero((counts < lo) | (counts > hi)):
        expected = f"{lo[i]}" if lo[i] == hi[i] else f"{lo[i]} or {hi[i]}"
        ctx.where.issue(
            f"{path}[{rows[i][0]}].hash_ids",
            f"{counts[i]} block ids for in={inp[i]} tokens at block_size {bs}; expected "
            f"{expected} (one id per {bs}-token block, the last block may be partial)",
        )
    for i in np.flatnonzero(np.diff(t) < 0) + 1:
        ctx.where.issue(
            f"{path}[{rows[i][0]}].t",
            f"t goes backwards ({t[i]:.3f} s after {t[i - 1]:.3f} s); requests should be in time order",
        )
    for name, col in (("api_time", api), ("think_time", think), ("ttft", ttft)):
        for i in np.flatnonzero(col < 0):
            ctx.where.issue(
                f"{path}[{rows[i][0]}].{name}", f"negative time {col[i]}; expected >= 0"
            )


def _children(
    ctx: _Ctx,
    subs: list[tuple[int, dict[str, Any]]],
    path: str,
    tid: str,
    t: np.ndarray,
    offset: float,
    offsets: np.ndarray,
    flat: np.ndarray,
    refs: list[Ref | None],
) -> list[Trajectory]:
    where = ctx.where
    children: list[Trajectory] = []
    seen: set[str] = set()
    for j, e in subs:
        p = f"{path}[{j}]"
        entry_t = req_time(e, "t", p, where, "when the subagent starts, seconds")
        agent = opt_str(e, "agent_id", p, where)
        if agent is None:
            where.fail(join(p, "agent_id"), "missing; expected the subagent's id (a string)")
        agent_id = cast(str, agent)
        cid = f"{tid}/{agent_id}"
        if cid in seen:
            where.issue(join(p, "agent_id"), f"duplicate agent_id {agent_id!r} under {tid!r}")
            cid = f"{cid}#{len(seen)}"
        seen.add(cid)
        entries = req_list(e, "requests", p, where, "the subagent's requests")
        spawn_t = entry_t - offset
        spawn_index = int(np.searchsorted(t, spawn_t, side="right"))
        first_ref = first_ids = None
        if spawn_index > 0:
            i = spawn_index - 1
            first_ref = refs[i]
            first_ids = flat[offsets[i] : offsets[i + 1]] if first_ref else None
        meta = {k: e[k] for k in ("status", "duration_ms") if e.get(k) is not None}
        link = _Link(
            parent_id=tid,
            agent_id=agent_id,
            subagent_type=opt_str(e, "subagent_type", p, where),
            entry_t=entry_t,
            spawn_t=spawn_t,
            spawn_index=spawn_index,
            first_ref=first_ref,
            first_ids=first_ids,
            models=models_of(e, p, where),
        )
        child = _build(ctx, entries, join(p, "requests"), cid, link, link.models, meta)
        if child is None:
            where.issue(join(p, "requests"), f"subagent {agent_id!r} has no requests; skipped")
        else:
            children.append(child)
    return children
