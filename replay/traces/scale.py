"""A trace's token scale: how many times its token lengths were divided.

`replay traces synth --scale S` writes `"token_scale": S` into every session line (Weka
format; a field the published corpus does not have, so a missing field means full size), and
the loader keeps it in each trajectory's `meta`. The simulator and the emulators scale the
model profile by it (blocks, chunks and prefill costs as for full size), so a scaled trace
fills as many cache blocks as the full-size one it stands for.

The trace is the source of truth: a flag or config that names another scale is an error.
A Weka trace that declares no scale but whose lengths look scaled (a coding agent's first
prompt carries its system prompt and tool definitions, several thousand tokens at least) is
an error too, naming the flag to pass.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from replay.traces.model import Trace, Trajectory

# A coding agent's first prompt holds its system prompt and tool definitions: ≥ 10K tokens in
# the published corpus (synth: 14K–26K). A median first prompt below this looks scaled.
FULL_SIZE_FIRST_PROMPT_TOKENS = 4_096


# The largest token scale: 2^20, the longest context of any model profile (configs/models:
# 1,048,576 tokens). Past it every length of every trace is 1 token (nothing of the trace is
# left to replay), and a synthetic trace's times, drawn from the full-size lengths (length ×
# scale), overflow: `traces synth --scale 1e200` wrote `"t": null` and exited 0 (issue 36).
MAX_TOKEN_SCALE = 1_048_576


class TraceScaleError(ValueError):
    """A token scale that is missing, inconsistent or contradicted; the message says what
    to pass."""


def scale_problem(value: float) -> str | None:
    """What is wrong with `value` as a token scale (it must be finite, 1..MAX_TOKEN_SCALE),
    or None: the one check of a scale, wherever it is given."""
    if value == value and 1 <= value <= MAX_TOKEN_SCALE:  # NaN fails both
        return None
    return (
        f"must be a finite number of at least 1 and at most {MAX_TOKEN_SCALE:,} (it divides "
        "token lengths; past the longest context of any model profile every length is 1 "
        f"token), got {value:g}"
    )


def check_scale(value: float, what: str) -> float:
    """`value` as a token scale; TraceScaleError naming `what` (a flag, or a trace's field)
    when `scale_problem` finds one."""
    problem = scale_problem(value)
    if problem is not None:
        raise TraceScaleError(f"{what} {problem}")
    return value


def declared_scale(trace: Trace) -> float | None:
    """The scale the trace's sessions declare (None: none declares one)."""
    scales = {
        float(s)
        for tr in trace.trajectories
        if isinstance(s := tr.meta.get("token_scale"), int | float)
    }
    if not scales:
        return None
    for s in scales:
        check_scale(s, f"trace {trace.source}: token_scale")
    if len(scales) > 1:
        listed = ", ".join(f"{s:g}" for s in sorted(scales))
        raise TraceScaleError(
            f"trace {trace.source}: sessions declare different token scales ({listed}); "
            "a trace must be scaled by one factor"
        )
    return scales.pop()


def looks_scaled(trace: Trace) -> bool:
    """Whether a Weka trace's first prompts are too short for a full-size coding agent."""
    if trace.format != "weka" or not trace.trajectories:
        return False
    firsts = [int(tr.input_tokens[0]) for tr in trace.trajectories if tr.num_requests]
    return bool(firsts) and float(np.median(firsts)) < FULL_SIZE_FIRST_PROMPT_TOKENS


def resolve_token_scale(trace: Trace, given: float | None, flag: str = "--token-scale") -> float:
    """The scale to replay `trace` at: the trace's own, which `given` (a flag or config
    value, None: not given) must agree with; `given` for a trace that declares none."""
    if given is not None:
        check_scale(given, flag)
    declared = declared_scale(trace)
    if declared is not None:
        if given is not None and abs(given - declared) > 1e-9:
            raise TraceScaleError(
                f"{flag} {given:g} contradicts trace {trace.source}, which declares "
                f"token_scale {declared:g}; drop {flag} (the trace's own scale is used)"
            )
        return declared
    if given is not None:
        return given
    if looks_scaled(trace):
        firsts = [int(tr.input_tokens[0]) for tr in trace.trajectories if tr.num_requests]
        raise TraceScaleError(
            f"trace {trace.source} declares no token_scale, but its median first prompt is "
            f"{float(np.median(firsts)):,.0f} tokens, far below a full-size coding agent's "
            f"(≥ {FULL_SIZE_FIRST_PROMPT_TOKENS:,}): pass {flag} N with the divisor its "
            f"lengths were made with (e.g. {flag} 16), or {flag} 1 if they are full size"
        )
    return 1.0


def _scale_ids(tr: Trajectory, by: int) -> tuple[np.ndarray, np.ndarray]:
    """Each request's hash ids grouped `by` at a time, a group named by its last id: with
    prefix-chained ids (local scope) two requests share a scaled block exactly when they
    shared every original block in it."""
    offsets = [0]
    ids: list[np.ndarray] = []
    for i in range(tr.num_requests):
        own = tr.blocks(i)
        m = len(own)
        picks = np.minimum(np.arange(by - 1, m + by - 1, by), m - 1) if m else np.zeros(0, int)
        ids.append(own[picks])
        offsets.append(offsets[-1] + len(picks))
    flat = np.concatenate(ids) if ids else np.zeros(0, dtype=tr.hash_ids.dtype)
    return np.asarray(offsets, dtype=np.int64), flat.astype(tr.hash_ids.dtype, copy=False)


def scale_trajectory(tr: Trajectory, by: int) -> Trajectory:
    """`tr` with every token length divided by `by` (rounded, at least 1), its hash ids
    grouped to match, its subagents likewise, and `token_scale` declared; times unchanged."""
    offsets, ids = _scale_ids(tr, by)
    meta = dict(tr.meta)
    for k in ("tool_tokens", "system_tokens"):
        if isinstance(v := meta.get(k), int | float):
            meta[k] = max(round(v / by), 0)
    prior = meta.get("token_scale")
    meta["token_scale"] = (float(prior) if isinstance(prior, int | float) else 1.0) * by
    return dataclasses.replace(
        tr,
        input_tokens=np.maximum(np.rint(tr.input_tokens / by), 1).astype(np.int64),
        output_tokens=np.maximum(np.rint(tr.output_tokens / by), 1).astype(np.int64),
        hash_offsets=offsets,
        hash_ids=ids,
        subagents=tuple(scale_trajectory(s, by) for s in tr.subagents),
        meta=meta,
    )


def scale_trace(trace: Trace, by: int) -> Trace:
    """A copy of `trace` with token lengths divided by the whole number `by` (≥ 1): a real
    corpus made to fit a small engine's context (`replay traces convert --scale`). Prefix
    sharing is kept block for block; the block size stays (ids now name `by` × as many
    tokens), as `replay traces synth --scale` writes its traces."""
    if by < 1:
        raise TraceScaleError(f"--scale must be a whole number of at least 1 (got {by})")
    check_scale(by, "--scale")
    if trace.format != "weka":
        raise TraceScaleError(
            f"trace {trace.source} is {trace.format}: only Weka traces can be scaled (their "
            "sessions declare token_scale; convert it to weka first)"
        )
    return dataclasses.replace(
        trace, trajectories=[scale_trajectory(t, by) for t in trace.trajectories]
    )
