"""The request record: one row of `requests.parquet`, shared by every executor.

A live run, an emulated run and a simulated run all write these columns, so analysis never
asks which executor produced a run. Columns the executor cannot know are left null.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import pyarrow as pa

from replay.resume import RESUME_COLUMNS, TIER_COLUMNS, Resume

SCHEMA_VERSION = 1

Status = Literal["ok", "error", "timeout", "cancelled", "overflow"]
STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "cancelled", "overflow")


@dataclass(slots=True)
class RequestRecord:
    """One request as the executor saw it. Times are seconds from run start."""

    engine: str
    session: int  # the replay session slot (0..N-1) that sent it
    trajectory: str  # trajectory id (a subagent's id names its parent)
    agent: str  # "main" or the subagent's agent id
    turn: int  # request index inside the trajectory
    scheduled_s: float  # when the workload said to send it
    sent_s: float | None = None
    first_token_s: float | None = None
    done_s: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int | None = None  # as the engine reported
    ideal_cached_tokens: int = 0  # longest prefix any earlier request of this engine computed
    # The ideal under the engine's own checkpoint rule (a hybrid vLLM's `align` mode: states
    # only at block multiples of prompts and at shared-prefix junctions, never in generated
    # tokens; replay.client.ideal.AlignRuleIndex): what an engine that never evicts reports.
    # Null where the engine has no such rule (dense engines, emulators, the simulator).
    rule_ideal_tokens: int | None = None
    output_tokens: int = 0
    expected_output_tokens: int = 0
    finish_reason: str | None = None
    status: Status = "ok"
    error: str | None = None
    # Known to the simulator (and the emulator); null for real engines. `set_resume` fills
    # them (and the two counts above) from a `replay.resume.Resume`.
    resume_pos: int | None = None
    checkpoint_pos: int | None = None
    resident_pos: int | None = None
    placement_miss: int | None = None
    dependency_miss: int | None = None
    capacity_miss: int | None = None
    # Extras every executor knows.
    tool_gap_s: float = 0.0  # the (capped) idle time the session waited before this request
    priming: bool = False  # the warm-up request of a session start; not measured
    attempt: int = 0  # retries of this turn before this record
    # What the trace recorded for this request (live runs; null where the executor did not
    # fill them): its `in` tokens, its `api_time`, and whether the prompt sent extends the
    # previous turn's actual prompt + generated ids exactly (null for a first turn or a
    # turn the trace itself edits). Replay drift and task slowdown read them.
    trace_prompt_tokens: int | None = None
    trace_latency_s: float | None = None
    extends_previous: bool | None = None
    # Fleets (issue 26): the replica that served it (0-based within its engine; null for a
    # one-replica engine), the router that chose it (a name from replay.fleet, or
    # "external" for a real router in front), the decision's branch, its scores per replica
    # (a JSON list, the policy's units) and the overlap (tokens) the router predicted.
    replica: int | None = None
    router: str | None = None
    route_branch: str | None = None
    route_scores: str | None = None
    route_overlap: int | None = None
    # aiperf's theoretical prefix-cache accounting for this turn (issue 35, point 2; the
    # workload's `Workload.prefix_blocks`, replay.traces.prefix): of the trace request's hash
    # blocks, the leading run its trace (the root session and its subagents, one seen-set)
    # had already sent earlier in the trace's clock, and how many blocks it has. A property
    # of the trace, not of the engine; null where the executor did not fill them.
    theoretical_hit_blocks: int | None = None
    theoretical_blocks: int | None = None
    # Cache tiers (issue 34): of `cached_tokens`, those served from host memory and from an
    # external store (the GPU's share is the rest). Only a run whose engine has tiers knows
    # them, and only such a run writes the columns (`TIER_COLUMNS`, `records_to_table`).
    cached_tokens_host: int | None = None
    cached_tokens_external: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The record's row; the tier columns only where the run has tiers (so a run without
        them writes the rows it wrote before them)."""
        row = asdict(self)
        if self.cached_tokens_host is None and self.cached_tokens_external is None:
            del row["cached_tokens_host"], row["cached_tokens_external"]
        return row

    def set_resume(self, resume: Resume) -> None:
        """Where the request resumed and why not further (`replay.resume.Resume`, the type
        the simulator's caches and the engine model hand over): its columns."""
        for name, value in resume.columns().items():
            setattr(self, name, value)
        if resume.cached_host is not None or resume.cached_external is not None:
            for name, value in resume.tier_columns().items():
                setattr(self, name, value)


# The columns every run writes; the tier columns follow where a run has them.
RECORD_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(RequestRecord) if f.name not in TIER_COLUMNS
)
assert set(RESUME_COLUMNS) <= set(RECORD_FIELDS), "a resume column is not a record column"

_INT = pa.int64()
_F = pa.float64()
_S = pa.string()
REQUEST_SCHEMA = pa.schema(
    [
        ("engine", _S),
        ("session", _INT),
        ("trajectory", _S),
        ("agent", _S),
        ("turn", _INT),
        ("scheduled_s", _F),
        ("sent_s", _F),
        ("first_token_s", _F),
        ("done_s", _F),
        ("prompt_tokens", _INT),
        ("cached_tokens", _INT),
        ("ideal_cached_tokens", _INT),
        ("rule_ideal_tokens", _INT),
        ("output_tokens", _INT),
        ("expected_output_tokens", _INT),
        ("finish_reason", _S),
        ("status", _S),
        ("error", _S),
        ("resume_pos", _INT),
        ("checkpoint_pos", _INT),
        ("resident_pos", _INT),
        ("placement_miss", _INT),
        ("dependency_miss", _INT),
        ("capacity_miss", _INT),
        ("tool_gap_s", _F),
        ("priming", pa.bool_()),
        ("attempt", _INT),
        ("trace_prompt_tokens", _INT),
        ("trace_latency_s", _F),
        ("extends_previous", pa.bool_()),
        ("replica", _INT),
        ("router", _S),
        ("route_branch", _S),
        ("route_scores", _S),
        ("route_overlap", _INT),
        ("theoretical_hit_blocks", _INT),
        ("theoretical_blocks", _INT),
    ]
)
assert tuple(REQUEST_SCHEMA.names) == RECORD_FIELDS, "schema and record drifted apart"
# Written only by a run whose cache has tiers, so a run without them keeps the columns above.
TIER_SCHEMA = pa.schema([(name, _INT) for name in TIER_COLUMNS])
assert {f.name for f in fields(RequestRecord)} == set(RECORD_FIELDS) | set(TIER_COLUMNS)

# The most tokens one count in a record may hold: 16 x the longest context of any model
# profile, the bound a run puts on a trace's prompts and on every count an engine reports.
MAX_TOKEN_COUNT = 1 << 24
_KINDS = {_INT: "a whole number", _F: "a number", _S: "a string", pa.bool_(): "true or false"}


def over_context(prompt_tokens: int, output_tokens: int, context_tokens: int | None) -> str | None:
    """The error of a request too long for the engine's context, or None where it fits (or
    the context is unknown): what an engine refuses with HTTP 400 (the emulator's
    `check_context`), so the live client does not send it and records it as an `overflow`,
    and the simulator records it the same way (`replay.sim.driver.Sessions`)."""
    if context_tokens is None or prompt_tokens + output_tokens <= context_tokens:
        return None
    return (
        f"prompt {prompt_tokens} + output {output_tokens} tokens exceed the engine's context "
        f"of {context_tokens} tokens; not sent"
    )


def row_problem(row: dict[str, Any]) -> str | None:
    """What is wrong with a journal row's values for the request schema (None: nothing):
    no engine, the first field of the wrong type, or a token count outside
    0..MAX_TOKEN_COUNT. Checked where the journal is read, so a damaged line is named there,
    not as an Arrow error."""
    if not row.get("engine"):  # every record names its engine; readers group by it
        return "field 'engine' is missing or empty (every request record names its engine)"
    for f in (*REQUEST_SCHEMA, *TIER_SCHEMA):
        v = row.get(f.name)
        if v is None:
            continue
        if f.type == _INT:
            ok = isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63
        elif f.type == _F:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        elif f.type == _S:
            ok = isinstance(v, str)
        else:
            ok = isinstance(v, bool)
        if not ok:
            return f"field {f.name!r} is {str(v)[:40]!r}, not {_KINDS[f.type]}"
        if f.name.endswith("_tokens") and not 0 <= v <= MAX_TOKEN_COUNT:
            return f"field {f.name!r} is {v}, outside 0..{MAX_TOKEN_COUNT:,} tokens"
    return None


def records_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (dicts with the record's keys) to an Arrow table with the request schema, and
    the tier columns where any row has them."""
    cols = {name: [r.get(name) for r in rows] for name in RECORD_FIELDS}
    schema = REQUEST_SCHEMA
    for f in TIER_SCHEMA:
        values = [r.get(f.name) for r in rows]
        if any(v is not None for v in values):
            cols[f.name] = values
            schema = schema.append(f)
    return pa.Table.from_pydict(cols, schema=schema)
