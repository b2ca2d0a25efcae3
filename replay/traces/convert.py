"""Writing a loaded trace as Weka or Mooncake JSON lines (`replay traces convert`).

Weka → Mooncake flattens every trajectory (subagents become sessions of their own, named
`<parent>/<agent_id>`) into rows with absolute millisecond timestamps (a root session starts
at its `arrival_s`, else at 0, as every cc-traces session does), `session_id`, `delay` (the
tool gap before the row, ms), and hash ids re-blocked to 512 tokens: a 512-token block id
stands for its (up to) 8 underlying block ids *and* the block before it, numbered in order of
first appearance, so two prompts share their first k 512-token ids exactly when they share
their first 8k small blocks (and the trace's scope namespace); ids that already are
512-token blocks of global scope are kept as they are.
Lost: api/think/ttft times, stop reasons, request types, models and the subagent
structure. Mooncake → Weka keeps what Mooncake has (times, lengths, 512-token hash ids with
global scope, delays as think_time); a Weka session per `session_id`, its `t` from its first
request and its arrival on the trace's clock (the earliest timestamp ÷ 1000) as `arrival_s`:
Weka's `t` is seconds from the session's start, so it cannot hold when a session arrived.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from replay.traces.errors import fail
from replay.traces.model import STOP_NAMES, Trace, Trajectory
from replay.traces.mooncake import MOONCAKE_BLOCK
from replay.traces.sources import open_output

TYPE_NAMES = {0: "n", 1: "s"}
WEKA_LOSSES = (
    "api_time, think_time (kept as delay), ttft, stop, request type, models, subagent links"
)
# What the Weka reader (replay.traces.weka) does not keep, so no conversion can write it back:
# per request it reads t, type, in, out, hash_ids, stop, api_time, think_time and ttft only.
NOT_READ = "per-request model, input_types and output_types (the session's models are kept)"
MOONCAKE_LOSSES = "nothing Mooncake records (api_time, ttft, stop and models are absent from it)"
# Said when a Mooncake trace is written as Weka, whose `t` counts from each session's start.
MOONCAKE_ARRIVALS = (
    "each session's arrival time (its first timestamp) as its arrival_s, in seconds; "
    "its requests' t count from it (a replay starts sessions itself and does not wait for it)"
)


class _IdsText:
    """JSON text of consecutive id arrays, reusing the previous text for a shared prefix."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)
        self.text = b""

    def __call__(self, ids: np.ndarray) -> bytes:
        prev, n = self.ids, min(len(ids), len(self.ids))
        diff = np.flatnonzero(prev[:n] != ids[:n])
        k = int(diff[0]) if diff.size else n
        if k == 0:
            text = b",".join(b"%d" % v for v in ids.tolist())
        else:
            commas = np.flatnonzero(np.frombuffer(self.text, np.uint8) == 0x2C)
            head = self.text[: commas[k - 1]] if k <= len(commas) else self.text
            rest = ids[k:].tolist()
            text = head + b"," + b",".join(b"%d" % v for v in rest) if rest else head
        self.ids, self.text = ids, text
        return text


def _json_num(x: float, ndigits: int = 3) -> float | None:
    return None if math.isnan(x) else round(x, ndigits)


def write_weka(trace: Trace, path: Path) -> int:
    """Write one Weka session per top-level trajectory; returns the sessions written."""
    with open_output(path) as fh:
        for tr in trace.trajectories:
            fh.write(_weka_session(tr) + b"\n")
    return len(trace.trajectories)


def _weka_session(tr: Trajectory) -> bytes:
    head: dict[str, Any] = {
        "id": tr.id,
        "models": list(tr.models),
        "block_size": tr.block_size,
        "hash_id_scope": tr.hash_scope,
    }
    keep = ("tool_tokens", "system_tokens", "token_scale", "arrival_s")
    head.update({k: v for k, v in tr.meta.items() if k in keep})
    return orjson.dumps(head)[:-1] + b',"requests":[' + _weka_entries(tr, 0.0) + b"]}"


def _weka_entries(tr: Trajectory, clock: float) -> bytes:
    """The requests and subagent entries of `tr`, times on the session clock (`clock` is
    where `tr` starts on it); a subagent entry follows the last request before its spawn."""
    text = _IdsText()
    by_turn: dict[int, list[Trajectory]] = {}
    for sub in tr.subagents:
        by_turn.setdefault(sub.spawn_index, []).append(sub)
    items = [_weka_subagent(sub, clock) for sub in by_turn.get(0, [])]
    for i in range(tr.num_requests):
        req: dict[str, Any] = {
            "t": round(clock + float(tr.t[i]), 3),
            "type": TYPE_NAMES.get(int(tr.request_type[i]), "s"),
            "in": int(tr.input_tokens[i]),
            "out": int(tr.output_tokens[i]),
            "stop": STOP_NAMES.get(int(tr.stop[i]), ""),
        }
        for name, col in (
            ("api_time", tr.api_time),
            ("think_time", tr.think_time),
            ("ttft", tr.ttft),
        ):
            value = _json_num(float(col[i]))
            if value is not None:
                req[name] = value
        items.append(orjson.dumps(req)[:-1] + b',"hash_ids":[' + text(tr.blocks(i)) + b"]}")
        items.extend(_weka_subagent(sub, clock) for sub in by_turn.get(i + 1, []))
    return b",".join(items)


def _weka_subagent(sub: Trajectory, clock: float) -> bytes:
    start = clock + sub.spawn_t
    entry: dict[str, Any] = {
        "t": round(start, 3),
        "type": "subagent",
        "agent_id": sub.agent_id,
        "subagent_type": sub.subagent_type,
        "models": list(sub.models),
    }
    entry.update({k: v for k, v in sub.meta.items() if k in ("status", "duration_ms")})
    return orjson.dumps(entry)[:-1] + b',"requests":[' + _weka_entries(sub, start) + b"]}"


class _Reblocker:
    """Maps small-block id arrays to chained 512-token block ids, numbered by first use."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.factor = 1
        self.table: dict[tuple[str, int, bytes], int] = {}
        self.prev_small = np.zeros(0, dtype=np.int64)
        self.prev_big: list[int] = []

    def start(self, tr: Trajectory) -> None:
        """A new trajectory: check its block size, forget the previous prompt."""
        bs = tr.block_size
        if bs > MOONCAKE_BLOCK or MOONCAKE_BLOCK % bs:
            fail(
                self.source,
                tr.source_line,
                "block_size",
                f"cannot re-block {bs}-token blocks into {MOONCAKE_BLOCK}-token blocks "
                "(512 must be a multiple of the block size)",
            )
        self.factor = MOONCAKE_BLOCK // bs
        self.prev_small, self.prev_big = np.zeros(0, dtype=np.int64), []

    def __call__(self, namespace: str, ids: np.ndarray) -> list[int]:
        f = self.factor
        if f == 1 and namespace == "global":
            return [int(v) for v in ids.tolist()]  # already 512-token, trace-wide ids
        ids = ids.astype(np.int64, copy=False)
        n = min(len(ids), len(self.prev_small))
        diff = np.flatnonzero(self.prev_small[:n] != ids[:n])
        same = (int(diff[0]) if diff.size else n) // f
        big = self.prev_big[:same]
        prev = big[-1] if big else -1
        for j in range(same * f, len(ids), f):
            key = (namespace, prev, ids[j : j + f].tobytes())
            prev = self.table.setdefault(key, len(self.table))
            big.append(prev)
        self.prev_small, self.prev_big = ids, big
        return big


def mooncake_rows(trace: Trace) -> Iterator[tuple[int, bytes]]:
    """(timestamp ms, JSON row) for every request of every trajectory, in trace order."""
    reblock = _Reblocker(trace.source)
    for root in trace.trajectories:
        stack: list[tuple[Trajectory, float]] = [(root, _arrival(root))]
        while stack:
            tr, clock = stack.pop(0)
            stack[:0] = [(s, clock + s.spawn_t) for s in tr.subagents]
            reblock.start(tr)
            for i in range(tr.num_requests):
                ts = round((clock + float(tr.t[i])) * 1000)
                row: dict[str, Any] = {"timestamp": ts, "session_id": tr.id}
                if i:
                    row["delay"] = round(tr.gap_before(i) * 1000)
                row["input_length"] = int(tr.input_tokens[i])
                row["output_length"] = int(tr.output_tokens[i])
                big = reblock(tr.namespace, tr.blocks(i))
                yield ts, orjson.dumps(row)[:-1] + b',"hash_ids":' + orjson.dumps(big) + b"}"


def _arrival(tr: Trajectory) -> float:
    """When a session arrived on the trace's clock (s): its `arrival_s`, else 0."""
    value = tr.meta.get("arrival_s")
    return float(value) if isinstance(value, int | float) else 0.0


def write_mooncake(trace: Trace, path: Path) -> int:
    """Write Mooncake rows sorted by timestamp (stable); returns the rows written."""
    rows = sorted(mooncake_rows(trace), key=lambda r: r[0])
    with open_output(path) as fh:
        for _, line in rows:
            fh.write(line + b"\n")
    return len(rows)
