"""Parsed trace records into a `Trace`: the format detection and building every source shares.

A source (a local file or folder, `replay.traces.sources`; a Hugging Face dataset,
`replay.traces.hf`) yields records; `parse_lines` turns raw JSON lines into `Parsed` tuples and
`build_trace` turns those into a `Trace`, detecting Weka or Mooncake from the first record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from replay.traces.errors import IssueSink, fail
from replay.traces.fields import Where
from replay.traces.formats import FORMATS, Format
from replay.traces.idspans import blank_spans
from replay.traces.model import Trace, Trajectory
from replay.traces.mooncake import MOONCAKE_BLOCK, MooncakeBuilder
from replay.traces.weka import build_session

# Fields only a Weka session has: a line with them but no 'requests' lacks that field.
_WEKA_KEYS = frozenset({"block_size", "hash_id_scope", "models", "tool_tokens", "system_tokens"})

# One parsed record: where it came from, the object, and (for raw lines) the bytes + spans.
Parsed = tuple[Where, Any, bytes | None, list[tuple[int, int]] | None]


def parse_lines(records: Iterable[Any], sink: IssueSink) -> Iterator[Parsed]:
    for rec in records:
        where = Where(rec.source, rec.line, sink)
        blanked, bounds = blank_spans(rec.raw)
        try:
            obj = orjson.loads(blanked)
        except orjson.JSONDecodeError as exc:
            # Broken JSON, or a `hash_ids` array the fast path cannot cut out (nested lists,
            # strings): the plain parse tells which, and the validator then names the field.
            yield where, _parse_plain(rec.raw, where, exc), None, None
            continue
        yield where, obj, rec.raw, bounds


def _parse_plain(raw: bytes, where: Where, exc: orjson.JSONDecodeError) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as original:
        exc = original
    where.fail("(line)", f"malformed JSON: {exc.msg} at column {exc.colno}")


def build_trace(records: Iterable[Parsed], name: str, sink: IssueSink, fmt: str | None) -> Trace:
    """Turn parsed records into a `Trace`, detecting the format from the first record."""
    trajectories: list[Trajectory] = []
    mooncake: MooncakeBuilder | None = None
    ids: set[str] = set()
    for where, obj, raw, bounds in records:
        if fmt is None:
            fmt = detect_format(obj, where)
        if fmt == "mooncake":
            mooncake = mooncake or MooncakeBuilder()
            mooncake.add(obj, where, raw, bounds)
            continue
        tr = build_session(obj, where, raw, bounds)
        if tr is not None:
            if tr.id in ids:
                where.issue("id", f"duplicate session id {tr.id!r}; both are kept")
            ids.add(tr.id)
            trajectories.append(tr)
    if mooncake is not None:
        trajectories = mooncake.finish()
    if fmt is None:
        fail(name, None, "(file)", "no records found: the trace is empty")
    if not trajectories:
        fail(
            name,
            None,
            "(file)",
            f"no usable trajectories ({len(sink.issues)} issues, first: "
            f"{sink.issues[0] if sink.issues else 'none'})",
        )
    block = MOONCAKE_BLOCK if fmt == "mooncake" else trajectories[0].block_size
    return Trace(
        trajectories, name, "mooncake" if fmt == "mooncake" else "weka", block, issues=sink.issues
    )


def detect_format(obj: Any, where: Where) -> Format:
    if isinstance(obj, dict):
        if "requests" in obj:
            return "weka"
        if "input_length" in obj:
            return "mooncake"
        keys = ", ".join(sorted(map(str, obj))[:8]) or "none"
        if _WEKA_KEYS & set(obj):
            where.fail(
                "requests",
                "missing: a Weka session lists its requests under 'requests' (this line has "
                f"{keys}); add the list, or pass --format mooncake if it is a Mooncake row",
            )
        found = f"an object with keys: {keys}"
    else:
        found = type(obj).__name__
    where.fail(
        "(format)",
        "unknown trace format: expected a Weka session (an object with 'requests') or a "
        f"Mooncake request (an object with 'input_length'), found {found}; pass --format "
        "weka|mooncake if detection is wrong",
    )
    raise AssertionError


__all__ = ["FORMATS", "Format", "Parsed", "build_trace", "detect_format", "parse_lines"]
