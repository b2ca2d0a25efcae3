"""Mooncake-format rows (FAST'25 traces) → trajectories grouped by `session_id`.

A row: `timestamp` (ms), `input_length`, `output_length`, `hash_ids` (512-token blocks),
optional `session_id` and `delay` (ms to wait after the previous turn of the session).
Rows without `session_id` are one-request trajectories named after their line. Mooncake
hash ids are shared across the whole trace, so the scope is global. A session's `t` counts
from its earliest timestamp, kept as `meta["arrival_s"]` (seconds) so that a conversion can
write it back; a timestamp may be absolute (Unix-epoch ms), but a session spans at most a
year of the trace's clock (`fields.MAX_TRACE_S`), as does a `delay`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replay.traces.fields import (
    MAX_ARRIVAL_MS,
    MAX_TRACE_MS,
    MAX_TRACE_S,
    Where,
    int_array,
    opt_number,
    opt_str,
    outside_arrival,
    outside_clock,
    req_int,
)
from replay.traces.idspans import SPAN_MARK, IdsParseError, check_range, parse_ids
from replay.traces.model import STOP_CODES, TYPE_CODES, Trajectory

MOONCAKE_BLOCK = 512


@dataclass(slots=True)
class _Session:
    id: str
    line: int | None
    rows: list[tuple[Where, float, float, int, int, np.ndarray]] = field(default_factory=list)


class MooncakeBuilder:
    """Accumulates rows (sessions may interleave) and builds trajectories at the end."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}

    def add(
        self,
        obj: Any,
        where: Where,
        raw: bytes | None = None,
        bounds: list[tuple[int, int]] | None = None,
    ) -> None:
        if not isinstance(obj, dict):
            where.fail(
                "(line)", f"expected a JSON object (one Mooncake request), got {type(obj).__name__}"
            )
        inp = req_int(obj, "input_length", "", where, "prompt tokens")
        out = req_int(obj, "output_length", "", where, "output tokens")
        ts, delay = self._times(obj, where)
        ids = self._ids(obj, where, raw, bounds or [])
        sid = opt_str(obj, "session_id", "", where)
        key = sid if sid is not None else f"line-{where.line}"
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session(key, where.line)
        if inp == 0:
            where.fail(
                "input_length",
                f"session {key!r}, request {len(session.rows)}: an empty prompt "
                "(input_length = 0); a prompt needs at least one token (an engine refuses an "
                "empty one with HTTP 400); fix or remove the row",
            )
        lo, hi = inp // MOONCAKE_BLOCK, -(-inp // MOONCAKE_BLOCK)
        if not lo <= len(ids) <= hi:
            expected = f"{lo}" if lo == hi else f"{lo} or {hi}"
            where.issue(
                "hash_ids",
                f"{len(ids)} block ids for input_length={inp} at {MOONCAKE_BLOCK}-token blocks; "
                f"expected {expected}",
            )
        session.rows.append((where, ts, delay, inp, out, ids))

    @staticmethod
    def _times(obj: dict[str, Any], where: Where) -> tuple[float, float]:
        """`timestamp` and `delay` (ms; NaN when absent): one of them given, the timestamp
        0 to 2^53, the delay 0 to a year."""
        ts = opt_number(obj, "timestamp", "", where, "arrival time, ms")
        delay = opt_number(obj, "delay", "", where, "ms after the previous turn")
        if math.isnan(ts) and math.isnan(delay):
            where.fail("timestamp", "missing; expected the arrival time in ms (or a 'delay')")
        if ts < 0 or delay < 0:
            where.fail("timestamp" if ts < 0 else "delay", "expected a non-negative number of ms")
        if ts > MAX_ARRIVAL_MS:
            where.fail("timestamp", outside_arrival(ts, "ms", "arrival time, ms"))
        if delay > MAX_TRACE_MS:
            where.fail("delay", outside_clock(delay, "ms", "ms after the previous turn"))
        return ts, delay

    @staticmethod
    def _ids(
        obj: dict[str, Any], where: Where, raw: bytes | None, bounds: list[tuple[int, int]]
    ) -> np.ndarray:
        value = obj.get("hash_ids")
        if isinstance(value, dict) and raw is not None and type(value.get(SPAN_MARK)) is int:
            start, end = bounds[value[SPAN_MARK]]
            try:
                ids = parse_ids(raw[start:end])
                check_range(ids)
                return ids
            except IdsParseError as exc:
                where.fail("hash_ids", f"expected a list of integer block ids, {exc}")
        if isinstance(value, list):
            return int_array(value, "hash_ids", where)
        if value is None:
            where.fail(
                "hash_ids", "missing; expected a list of integer block ids (512-token blocks)"
            )
        where.fail("hash_ids", f"expected a list of integer block ids, got {type(value).__name__}")
        raise AssertionError

    def finish(self) -> list[Trajectory]:
        return [self._trajectory(s) for s in self._sessions.values()]

    @staticmethod
    def _trajectory(s: _Session) -> Trajectory:
        n = len(s.rows)
        ts = np.array([r[1] for r in s.rows])
        delay = np.array([r[2] for r in s.rows])
        meta: dict[str, object] = {}
        if np.isnan(ts).any():
            # Without timestamps the session's clock is the sum of its delays (no api times).
            t = np.cumsum(np.where(np.isnan(delay), 0.0, delay)) / 1000.0
            t -= t[0]
            MooncakeBuilder._check_span(s, t, "delay", "its delays add up to {} s by this row")
        else:
            origin = float(ts.min())  # the first row, unless times go backwards (an issue)
            t = (ts - origin) / 1000.0
            meta["arrival_s"] = origin / 1000.0
            MooncakeBuilder._check_span(s, t, "timestamp", "this row arrives {} s after its first")
        for i in np.flatnonzero(np.diff(t) < 0) + 1:
            s.rows[i][0].issue("timestamp", f"goes backwards within session {s.id!r}")
        think = delay / 1000.0
        think[0] = np.nan
        ids = [r[5] for r in s.rows]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(a) for a in ids], out=offsets[1:])
        flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
        nan = np.full(n, np.nan)
        return Trajectory(
            id=s.id,
            block_size=MOONCAKE_BLOCK,
            hash_scope="global",
            namespace="global",
            t=t,
            input_tokens=np.array([r[3] for r in s.rows], dtype=np.int64),
            output_tokens=np.array([r[4] for r in s.rows], dtype=np.int64),
            api_time=nan,
            think_time=think,
            ttft=nan.copy(),
            request_type=np.full(n, TYPE_CODES["s"], dtype=np.int8),
            stop=np.full(n, STOP_CODES[""], dtype=np.int8),
            hash_offsets=offsets,
            hash_ids=flat,
            source_line=s.line,
            meta=meta,
        )

    @staticmethod
    def _check_span(s: _Session, t: np.ndarray, field: str, what: str) -> None:
        """A session ends within a year of its start on the trace's clock."""
        over = np.flatnonzero(t > MAX_TRACE_S)
        if not over.size:
            return
        i = int(over[0])
        s.rows[i][0].fail(
            field,
            f"session {s.id!r}: {what.format(f'{t[i]:g}')}, past a year of "
            f"the trace's clock ({MAX_TRACE_S:,} s, the longest a replay may run); fix the "
            f"{field}s",
        )
