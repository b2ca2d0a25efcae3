"""Descriptive statistics of a trace: sizes, prompt/output lengths, prefix reuse, tool gaps.

Prefix relations are judged at block granularity between consecutive requests of one
trajectory (subagents are their own conversations):
- continuation: the request starts with every *full* block of its predecessor (the
  predecessor's last, partial block is excluded: its hash changes as the block fills up);
- context edit: it shares at least one leading block with the predecessor but fewer than the
  predecessor's full blocks (the design's "shares fewer blocks with the previous one than the
  previous prompt had");
- fresh: it shares no leading block (a side request, or the conversation after one).
Shares are fractions of *later* requests (those with a predecessor).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replay.traces.model import Trace, Trajectory

GAP_PERCENTILES = (50, 90, 99)


def prefix_relations(tr: Trajectory) -> np.ndarray:
    """Per request: 0 first request, 1 continuation, 2 context edit, 3 fresh."""
    rel = np.zeros(tr.num_requests, dtype=np.int8)
    off, ids, bs = tr.hash_offsets, tr.hash_ids, tr.block_size
    for i in range(1, tr.num_requests):
        a = ids[off[i - 1] : off[i]]
        b = ids[off[i] : off[i + 1]]
        full = min(int(tr.input_tokens[i - 1]) // bs, len(a))
        if len(b) >= full and np.array_equal(a[:full], b[:full]):
            rel[i] = 1
        else:
            n = min(len(a), len(b))
            rel[i] = 2 if n and a[0] == b[0] else 3
    return rel


def tool_gaps(tr: Trajectory) -> np.ndarray:
    """Uncapped tool gaps before requests 1..n-1, as `Trajectory.gap_before` defines them."""
    if tr.num_requests < 2:
        return np.zeros(0)
    api = np.nan_to_num(tr.api_time[:-1], nan=0.0)
    recorded = tr.t[1:] - tr.t[:-1] - api
    think = tr.think_time[1:]
    return np.maximum(np.where(np.isnan(think), recorded, think), 0.0)


def _depth(tr: Trajectory) -> int:
    return 1 + max((_depth(s) for s in tr.subagents), default=0)


def trace_stats(trace: Trace, gap_cap_s: float) -> dict[str, Any]:
    """One flat dict of figures (JSON-ready); shares are fractions, token counts are tokens.
    `gap_cap_s`: the longest tool gap a replay waits (the workload's rule, which the caller
    knows: the traces layer sits below the replay rules of `replay.workload`)."""
    trs = list(trace.walk())
    sub = [tr for tr in trs if tr.is_subagent]
    inp = np.concatenate([tr.input_tokens for tr in trs])
    out = np.concatenate([tr.output_tokens for tr in trs])
    rel = np.concatenate([prefix_relations(tr) for tr in trs])
    gaps = np.concatenate([tool_gaps(tr) for tr in trs])
    later = max(int((rel > 0).sum()), 1)
    requests = int(inp.size)
    sub_requests = sum(tr.num_requests for tr in sub)
    stats: dict[str, Any] = {
        "format": trace.format,
        "block_size": trace.block_size,
        "trajectories": len(trace.trajectories),
        "requests": requests,
        "top_level_requests": requests - sub_requests,
        "subagent_requests": sub_requests,
        "subagent_request_share": sub_requests / max(requests, 1),
        "subagents": len(sub),
        "max_subagent_depth": max((_depth(tr) for tr in trace.trajectories), default=1) - 1,
        "mean_prompt_tokens": float(inp.mean()),
        "median_prompt_tokens": float(np.median(inp)),
        "p90_prompt_tokens": float(np.percentile(inp, 90)),
        "max_prompt_tokens": int(inp.max()),
        "mean_output_tokens": float(out.mean()),
        "median_output_tokens": float(np.median(out)),
        "continuation_share": int((rel == 1).sum()) / later,
        "context_edit_share": int((rel == 2).sum()) / later,
        "fresh_share": int((rel == 3).sum()) / later,
        "hash_ids": int(sum(tr.hash_ids.size for tr in trs)),
        "tool_gaps": int(gaps.size),
        "tool_gap_cap_s": gap_cap_s,
        "tool_gap_mean_s": float(gaps.mean()) if gaps.size else 0.0,
        "tool_gap_max_s": float(gaps.max()) if gaps.size else 0.0,
        "tool_gap_over_cap_share": float((gaps > gap_cap_s).mean()) if gaps.size else 0.0,
        "load_issues": len(trace.issues),
    }
    for q in GAP_PERCENTILES:
        stats[f"tool_gap_p{q}_s"] = float(np.percentile(gaps, q)) if gaps.size else 0.0
    return stats
