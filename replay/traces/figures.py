"""The corpus figures of `replay/data/reference-*.yaml`, computed the same way on any trace.

One definition per figure, written beside it in the reference file
(`replay/data/reference-cc-traces-062126.yaml`, `definition:`), implemented here once:

- *main requests*: a session's own requests (type `n`/`s` at the top level, side calls
  included), not those inside a subagent entry; *subagent requests*: those inside one (at
  any depth). A *subagent group* is one `type: subagent` entry.
- Token figures are at full size: lengths × the trace's declared `token_scale`.
- *gap*: between consecutive main requests of a session (in `t` order),
  `max(0, t[i] − (t[i−1] + api_time[i−1]))`, uncapped; a gap whose predecessor has no
  `api_time` is left out (counted in `gaps_without_api_time`).
- *new prefill* of a request: its tokens past the leading blocks an unbounded prefix cache
  already holds — one cache per hash namespace (a session, for local scope), every request
  of the session (main and subagent) taken in session-clock order, each adding its blocks
  after it is counted. The *ideal prefix hit* is Σ leading hit blocks ÷ Σ blocks of the same
  walk (the definition in the reference's source, DLsim `src/trace/trace.cpp`,
  `count_prefix_hits`).
- *waiting share*: over all sessions, 1 − Σ busy ÷ Σ span, where a session's span runs from
  its first main request's `t` to its last one's `t + api_time` and busy is the union of its
  main requests' `[t, t + api_time]` (a missing `api_time` counts as 0).
- *peak concurrent groups* of a session: the most subagent groups (any depth) running at one
  time, a group running from its session-clock start for `duration_ms` (else to its last
  request's `t + api_time`).

Percentiles are numpy's default (linear interpolation).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from replay.traces.model import Trace, Trajectory
from replay.traces.scale import declared_scale
from replay.traces.stats import prefix_relations


def _with_start(tr: Trajectory, start: float) -> Iterator[tuple[Trajectory, float]]:
    """Every trajectory of the tree with its start on the session clock."""
    yield tr, start
    for sub in tr.subagents:
        yield from _with_start(sub, start + sub.spawn_t)


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if a.size else float("nan")


def _mean(a: np.ndarray) -> float:
    return float(a.mean()) if a.size else float("nan")


def main_gaps(tr: Trajectory) -> tuple[np.ndarray, int]:
    """Gaps between a session's consecutive main requests; and how many were left out for a
    missing `api_time`."""
    if tr.num_requests < 2:
        return np.zeros(0), 0
    order = np.argsort(tr.t, kind="stable")
    t, api = tr.t[order], tr.api_time[order]
    prev_api = api[:-1]
    known = ~np.isnan(prev_api)
    gaps = t[1:] - (t[:-1] + np.nan_to_num(prev_api, nan=0.0))
    return np.maximum(gaps[known], 0.0), int((~known).sum())


def busy_and_span(tr: Trajectory) -> tuple[float, float]:
    """The union of a session's main requests' `[t, t + api_time]`, and its span."""
    if tr.num_requests == 0:
        return 0.0, 0.0
    start = tr.t
    end = tr.t + np.nan_to_num(tr.api_time, nan=0.0)
    order = np.argsort(start, kind="stable")
    busy, cur_s, cur_e = 0.0, float(start[order[0]]), float(end[order[0]])
    for i in order[1:]:
        s, e = float(start[i]), float(end[i])
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    return busy, float(end.max() - start.min())


def ideal_walk(root: Trajectory) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per request of the session (session-clock order): leading blocks an unbounded cache
    already holds, its blocks, and its new-prefill tokens (unscaled)."""
    rows: list[tuple[float, int, Trajectory, int]] = []
    for k, (tr, start) in enumerate(_with_start(root, 0.0)):
        rows.extend((start + float(tr.t[i]), k, tr, i) for i in range(tr.num_requests))
    rows.sort(key=lambda r: (r[0], r[1]))  # DLsim: time, then the entry's order
    n = len(rows)
    total = np.array([int(tr.hash_offsets[i + 1] - tr.hash_offsets[i]) for _, _, tr, i in rows])
    inp = np.array([int(tr.input_tokens[i]) for _, _, tr, i in rows], dtype=np.int64)
    bs = root.block_size
    if n == 0 or total.sum() == 0:
        return np.zeros(n, dtype=np.int64), total, inp
    flat = np.concatenate([tr.blocks(i) for _, _, tr, i in rows]).astype(np.int64)
    req = np.repeat(np.arange(n), total)
    # An id is a hit in request j when it first appears in an earlier request.
    _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    hit = req[first][inverse] < req
    starts = np.concatenate(([0], np.cumsum(total)[:-1]))
    pos = np.where(hit, len(flat), np.arange(len(flat)))  # a miss marks its own position
    nonempty = total > 0
    first_miss = np.full(n, len(flat))
    first_miss[nonempty] = np.minimum.reduceat(pos, starts[nonempty])
    hits = np.minimum(first_miss, starts + total) - starts
    hits[~nonempty] = 0
    new = np.maximum(inp - hits * bs, 0)
    return hits, total, new


def _group_intervals(root: Trajectory) -> list[tuple[float, float]]:
    out = []
    for tr, start in _with_start(root, 0.0):
        if not tr.is_subagent:
            continue
        dur = tr.meta.get("duration_ms")
        if isinstance(dur, int | float) and dur == dur:
            end = start + float(dur) / 1000.0
        else:
            end = start + float((tr.t + np.nan_to_num(tr.api_time, nan=0.0)).max())
        out.append((start, end))
    return out


def peak_concurrent(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one time (an end at the same time as a start closes first)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    peak = cur = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def corpus_figures(trace: Trace) -> dict[str, float]:
    """Every figure of the reference file, at full size (lengths × the declared scale)."""
    scale = declared_scale(trace) or 1.0
    main_in, main_out, sub_in, all_in, all_out = [], [], [], [], []
    turns, gaps, new, groups, group_reqs, peaks = [], [], [], [], [], []
    rels = []
    hit_blocks = all_blocks = 0
    busy = span = 0.0
    no_api = 0
    with_subs = 0
    for root in trace.trajectories:
        main_in.append(root.input_tokens)
        main_out.append(root.output_tokens)
        turns.append(root.num_requests)
        g, missing = main_gaps(root)
        gaps.append(g)
        no_api += missing
        b, s = busy_and_span(root)
        busy, span = busy + b, span + s
        subs = [tr for tr in root.walk() if tr.is_subagent]
        for tr in root.walk():
            rels.append(prefix_relations(tr))
            all_in.append(tr.input_tokens)
            all_out.append(tr.output_tokens)
        if subs:
            with_subs += 1
            groups.append(len(subs))
            peaks.append(peak_concurrent(_group_intervals(root)))
            for tr in subs:
                sub_in.append(tr.input_tokens)
                group_reqs.append(tr.num_requests)
        h, tot, nw = ideal_walk(root)
        hit_blocks += int(h.sum())
        all_blocks += int(tot.sum())
        new.append(nw)
    cat = _concat
    mi, mo, si = cat(main_in) * scale, cat(main_out) * scale, cat(sub_in) * scale
    ai, ao, gp, nw = cat(all_in) * scale, cat(all_out) * scale, cat(gaps), cat(new) * scale
    rel = np.concatenate(rels) if rels else np.zeros(0, dtype=np.int8)
    sessions = len(trace.trajectories)
    f: dict[str, float] = {
        "main_prompt_p50": _pct(mi, 50),
        "main_prompt_p90": _pct(mi, 90),
        "main_prompt_p99": _pct(mi, 99),
        "subagent_prompt_p50": _pct(si, 50),
        "subagent_prompt_p90": _pct(si, 90),
        "main_output_p50": _pct(mo, 50),
        "main_output_mean": _mean(mo),
        "main_output_p90": _pct(mo, 90),
        "new_prefill_p50": _pct(nw, 50),
        "new_prefill_mean": _mean(nw),
        "new_prefill_p99": _pct(nw, 99),
        "main_turns_p50": _pct(np.array(turns, dtype=float), 50),
        "main_turns_p90": _pct(np.array(turns, dtype=float), 90),
        "gap_p50_s": _pct(gp, 50),
        "gap_p90_s": _pct(gp, 90),
        "gap_p99_s": _pct(gp, 99),
        "gap_mean_s": _mean(gp),
        "gap_over_300s_share": float((gp > 300).mean()) if gp.size else float("nan"),
        "gap_over_1800s_share": float((gp > 1800).mean()) if gp.size else float("nan"),
        "waiting_share": 1.0 - busy / span if span > 0 else float("nan"),
        "sessions_with_subagents_share": with_subs / sessions if sessions else float("nan"),
        "subagent_groups_per_session_p50": _pct(np.array(groups, dtype=float), 50),
        "subagent_requests_per_group_p50": _pct(np.array(group_reqs, dtype=float), 50),
        "subagent_peak_concurrent_p50": _pct(np.array(peaks, dtype=float), 50),
        "ideal_prefix_hit": hit_blocks / all_blocks if all_blocks else float("nan"),
        "sessions": float(sessions),
        "main_requests": float(mi.size),
        "subagent_groups": float(sum(groups)),
        "subagent_requests": float(si.size),
        "mean_prompt": _mean(ai),
        "mean_output": _mean(ao),
        "median_prompt": _pct(ai, 50),
        "median_output": _pct(ao, 50),
        "continuation_share": float((rel == 1).sum() / max((rel > 0).sum(), 1)),
        "context_edit_share": float((rel == 2).sum() / max((rel > 0).sum(), 1)),
        "gaps_without_api_time": float(no_api),
        "token_scale": scale,
    }
    return f


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(float) if parts else np.zeros(0)
