"""Typed field access for parsed JSON records, failing with file, line, field and expectation.

Field paths are built lazily (only when something is wrong) because a full-size corpus has
~100K requests and formatting a path per field would cost more than the checks themselves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from replay.traces.errors import IssueSink, fail

# A year of the trace's clock, the longest run the spec allows (replay.runspec.fields.
# MAX_DURATION_MIN, 525,600 minutes; this layer sits below it): no recorded agent session
# comes near it, and a time past it (`t` = 1.5e308) summed to inf in `traces stats`.
MAX_TRACE_S = 525_600 * 60
MAX_TRACE_MS = MAX_TRACE_S * 1000
# When a session arrived (a Mooncake `timestamp`, a Weka session's `arrival_s`) may be an
# absolute time such as Unix-epoch ms, so it is not held to a year: only to 2^53 ms, past
# which a float64 no longer holds whole milliseconds (a conversion would move it).
MAX_ARRIVAL_MS = 2**53


@dataclass(slots=True)
class Where:
    """Where a record came from: the file (or dataset) name and its 1-based line (or row)."""

    source: str
    line: int | None
    sink: IssueSink

    def fail(self, field: str, message: str) -> None:
        fail(self.source, self.line, field, message)

    def issue(self, field: str, message: str) -> None:
        self.sink.add(self.source, self.line, field, message)


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def describe(value: Any) -> str:
    """A short repr with its type, for messages: `'abc' (str)`."""
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{text} ({type(value).__name__})"


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def req_int(obj: dict[str, Any], key: str, path: str, where: Where, what: str) -> int:
    """A required non-negative integer (`what` says what it means, for the message)."""
    value = obj.get(key)
    if type(value) is int and value >= 0:
        return value
    if value is None:
        where.fail(join(path, key), f"missing; expected a non-negative integer ({what})")
    if type(value) is int:
        where.fail(
            join(path, key), f"negative length {value}; expected a non-negative integer ({what})"
        )
    where.fail(join(path, key), f"expected a non-negative integer ({what}), got {describe(value)}")
    raise AssertionError  # unreachable: fail() raises


def req_number(obj: dict[str, Any], key: str, path: str, where: Where, what: str) -> float:
    """A required finite number (int or float)."""
    value = obj.get(key)
    if _is_number(value) and math.isfinite(value):
        return float(value)
    if value is None:
        where.fail(join(path, key), f"missing; expected a number ({what})")
    where.fail(join(path, key), f"expected a finite number ({what}), got {describe(value)}")
    raise AssertionError


def req_time(obj: dict[str, Any], key: str, path: str, where: Where, what: str) -> float:
    """A required time in seconds on the trace's clock: 0 to `MAX_ARRIVAL_MS` as seconds (a
    Weka `t` may be absolute, e.g. Unix-epoch seconds, as a Mooncake timestamp may; how far a
    session's times spread is held to a year by `check_span`)."""
    value = req_number(obj, key, path, where, what)
    if not 0 <= value <= MAX_ARRIVAL_MS / 1000:
        where.fail(join(path, key), outside_arrival(value, "s", what))
    return value


def check_span(t: np.ndarray, where: Where, field_of: Callable[[int], str]) -> None:
    """A session's times spread over at most a year of the trace's clock (`MAX_TRACE_S`);
    the failure names the latest request's field (`field_of(its index)`)."""
    if len(t) and (span := float(t.max() - t.min())) > MAX_TRACE_S:
        where.fail(
            field_of(int(np.argmax(t))),
            f"the session spans {span:g} s, past a year of the trace's clock "
            f"({MAX_TRACE_S:,} s, the longest a replay may run); fix the times",
        )


def opt_time(obj: dict[str, Any], key: str, path: str, where: Where, what: str) -> float:
    """An optional duration in seconds (NaN when absent), at most `MAX_TRACE_S`; a negative
    one is left to the caller (an inconsistency, not a reason to refuse the line)."""
    value = opt_number(obj, key, path, where, what)
    if value > MAX_TRACE_S:
        where.fail(join(path, key), outside_clock(value, "s", what))
    return value


def outside_clock(value: float, unit: str, what: str) -> str:
    """The message for a time outside 0 to a year of the trace's clock."""
    limit = MAX_TRACE_S if unit == "s" else MAX_TRACE_MS
    return (
        f"{value:g} {unit} is outside 0..{limit:,} {unit} ({what}; a year of the trace's "
        "clock, the longest a replay may run); fix the value"
    )


def outside_arrival(value: float, unit: str, what: str) -> str:
    """The message for an arrival time outside 0 to `MAX_ARRIVAL_MS`."""
    limit = f"{MAX_ARRIVAL_MS:,}" if unit == "ms" else f"{MAX_ARRIVAL_MS / 1000:,.3f}"
    return (
        f"{value:g} {unit} is outside 0..{limit} {unit} ({what}; 2^53 ms, past which a "
        "float no longer holds whole milliseconds); fix the value"
    )


def opt_number(obj: dict[str, Any], key: str, path: str, where: Where, what: str) -> float:
    """An optional number; NaN when absent or null."""
    value = obj.get(key)
    if value is None:
        return math.nan
    if _is_number(value) and math.isfinite(value):
        return float(value)
    where.fail(join(path, key), f"expected a number or null ({what}), got {describe(value)}")
    raise AssertionError


def opt_str(obj: dict[str, Any], key: str, path: str, where: Where) -> str | None:
    """An optional string; ints are accepted and turned into strings (ids are sometimes ints)."""
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    if type(value) is int:
        return str(value)
    where.fail(join(path, key), f"expected a string, got {describe(value)}")
    raise AssertionError


def req_list(obj: dict[str, Any], key: str, path: str, where: Where, what: str) -> list[Any]:
    value = obj.get(key)
    if isinstance(value, list):
        return value
    if value is None:
        where.fail(join(path, key), f"missing; expected a list ({what})")
    where.fail(join(path, key), f"expected a list ({what}), got {describe(value)}")
    raise AssertionError


def int_array(value: list[Any], field: str, where: Where) -> np.ndarray:
    """A JSON list of integers (already parsed, e.g. from `datasets`) as an int64 array."""
    if not value:
        return np.zeros(0, dtype=np.int64)
    try:
        arr = np.asarray(value)
    except (ValueError, OverflowError):  # ragged nesting
        arr = np.asarray([None])
    if arr.ndim == 1 and arr.dtype.kind == "i":
        return arr.astype(np.int64, copy=False)
    bad = next((v for v in value if type(v) is not int or not -(2**63) <= v < 2**63), value[0])
    found = "an id that does not fit a signed 64-bit integer" if type(bad) is int else describe(bad)
    where.fail(field, f"expected a list of integer block ids, found {found}")
    raise AssertionError


def models_of(obj: dict[str, Any], path: str, where: Where) -> tuple[str, ...]:
    """`models`: a list of names, or a mapping keyed by name (both are seen in the wild)."""
    value = obj.get("models")
    if value is None:
        return ()
    if isinstance(value, dict):
        return tuple(str(k) for k in value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    where.fail(join(path, "models"), f"expected a list of model names, got {describe(value)}")
    raise AssertionError
