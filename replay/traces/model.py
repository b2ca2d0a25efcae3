"""The normalised in-memory trace model every executor shares.

One `Trajectory` per agent session (top level or subagent). Per-request values are columnar
numpy arrays, and all block hash ids of a trajectory live in one flat array indexed by
`hash_offsets`, so a full-size corpus (≈100K requests, ≈300M hash ids) costs a few bytes per
id rather than one Python object per id.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

HashScope = Literal["local", "global"]

# Request `stop` codes (the Weka `stop` field); anything else maps to STOP_OTHER.
STOP_NONE, STOP_TOOL_USE, STOP_END_TURN, STOP_OTHER = 0, 1, 2, 3
STOP_CODES: dict[str, int] = {"": STOP_NONE, "tool_use": STOP_TOOL_USE, "end_turn": STOP_END_TURN}
STOP_NAMES: dict[int, str] = {v: k for k, v in STOP_CODES.items()} | {STOP_OTHER: "other"}

# Request `type` codes (Weka: "n" non-streaming, "s" streaming).
TYPE_CODES: dict[str, int] = {"n": 0, "s": 1}


@dataclass(frozen=True, slots=True, eq=False)
class Trajectory:
    """One agent session: its requests as columns, and its subagents as child trajectories.

    Times are seconds from this trajectory's own start. `think_time`, `api_time` and `ttft`
    are NaN where the trace does not give them.
    """

    id: str
    block_size: int
    hash_scope: HashScope
    # Hash-id namespace: the root session's id for local scope (a subagent starts from a copy
    # of its parent's seen blocks, so it shares the parent's ids), "global" otherwise.
    namespace: str
    t: np.ndarray  # float64 [n]
    input_tokens: np.ndarray  # int64 [n]
    output_tokens: np.ndarray  # int64 [n]
    api_time: np.ndarray  # float64 [n]
    think_time: np.ndarray  # float64 [n]
    ttft: np.ndarray  # float64 [n]
    request_type: np.ndarray  # int8 [n], TYPE_CODES
    stop: np.ndarray  # int8 [n], STOP_CODES
    hash_offsets: np.ndarray  # int64 [n + 1]
    hash_ids: np.ndarray  # [sum of blocks]: int32 if all ids fit (load_trace), else int64
    subagents: tuple[Trajectory, ...] = ()
    parent_id: str | None = None
    agent_id: str | None = None
    subagent_type: str | None = None
    # For a subagent: when it starts, in seconds from the parent's start, and how many of the
    # parent's requests start at or before that time (the parent turn it branches from).
    spawn_t: float = 0.0
    spawn_index: int = 0
    models: tuple[str, ...] = ()
    source_line: int | None = None
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def num_requests(self) -> int:
        return int(self.t.shape[0])

    @property
    def is_subagent(self) -> bool:
        return self.parent_id is not None

    def blocks(self, i: int) -> np.ndarray:
        """The block hash ids of request `i` (a view, not a copy)."""
        return self.hash_ids[self.hash_offsets[i] : self.hash_offsets[i + 1]]

    def walk(self) -> Iterator[Trajectory]:
        """This trajectory, then every subagent below it, depth first."""
        yield self
        for sub in self.subagents:
            yield from sub.walk()

    def gap_before(self, i: int, cap_s: float | None = None) -> float:
        """Tool time before request `i` (i ≥ 1): `think_time`, else the recorded gap
        t[i] − t[i−1] − api_time[i−1]; never negative, optionally capped."""
        if i <= 0:
            return 0.0
        g = float(self.think_time[i])
        if np.isnan(g):
            prev_api = float(self.api_time[i - 1])
            g = float(self.t[i] - self.t[i - 1]) - (0.0 if np.isnan(prev_api) else prev_api)
        g = max(g, 0.0)
        return min(g, cap_s) if cap_s is not None else g


@dataclass(slots=True)
class LoadIssue:
    """One inconsistency found while loading: where it is and what was wrong."""

    source: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: field '{self.field}': {self.message}"


@dataclass(slots=True)
class Trace:
    """A loaded trace: top-level trajectories (subagents nested inside them)."""

    trajectories: list[Trajectory]
    source: str
    format: Literal["weka", "mooncake"]
    block_size: int
    sha256: str | None = None
    issues: list[LoadIssue] = field(default_factory=list)

    def walk(self) -> Iterator[Trajectory]:
        """Every trajectory, subagents included, depth first."""
        for tr in self.trajectories:
            yield from tr.walk()

    @property
    def num_requests(self) -> int:
        return sum(tr.num_requests for tr in self.walk())
