"""Fast reading of `hash_ids` arrays straight from a JSON line's bytes.

A full-size Weka corpus is ~300M block ids in ~1.8 GB of text. Parsing a line with `orjson`
alone would build one Python int per id; instead `blank_spans` cuts every `"hash_ids":[...]`
out of the line (orjson then parses the small remainder, with a `{"@span": k}` marker in
place of each array), and `decode` reads each array relative to a reference — usually the
previous request of the same conversation. Agent prompts extend their predecessor, so the
new array's text almost always starts with the reference's text: a `bytes.startswith`
(memcmp speed) proves the shared prefix, and numpy parses only the short new tail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson

from replay.traces.fields import describe

KEY = b'"hash_ids"'
SPAN_MARK = "@span"
_WS = frozenset(b" \t\r\n")
_EMPTY = np.zeros(0, dtype=np.int64)


class IdsParseError(ValueError):
    """The text between the brackets is not a flat list of integers. `part` is the index
    of the offending array when `assemble` finds it."""

    def __init__(self, message: str, part: int | None = None) -> None:
        super().__init__(message)
        self.part = part


# numpy's text parser saturates out-of-range integers to these instead of failing.
INT64_MIN, INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
OVERFLOW = "found an id that does not fit a signed 64-bit integer"


def check_range(ids: np.ndarray) -> None:
    """Raise if `ids` (from `parse_ids`) holds a saturated, i.e. out-of-range, value."""
    if ids.size and (ids.max() == INT64_MAX or ids.min() == INT64_MIN):
        raise IdsParseError(OVERFLOW)


def blank_spans(line: bytes, key: bytes = KEY) -> tuple[bytes, list[tuple[int, int]]]:
    """Replace each flat integer array under `key` by a `{"@span": k}` marker.

    Returns the blanked line and, per marker k, the (start, end) of the array's body (inside
    the brackets) in `line`. A body holding anything but numbers fails later, in `decode` or
    in parsing the blanked line, and is named there.
    """
    pieces: list[bytes] = []
    bounds: list[tuple[int, int]] = []
    n = len(line)
    pos = 0
    i = line.find(key)
    while i >= 0:
        j = i + len(key)
        while j < n and line[j] in _WS:
            j += 1
        if j < n and line[j] == 0x3A:  # ':'
            j += 1
            while j < n and line[j] in _WS:
                j += 1
            if j < n and line[j] == 0x5B:  # '['
                # No scan for nested brackets or strings: if the array holds any, cutting at
                # the first ']' leaves the outer ']' unmatched, the blanked line fails to
                # parse, and the loader re-parses the original line to name the problem.
                end = line.find(b"]", j + 1)
                if end > 0:
                    pieces.append(line[pos:i])
                    pieces.append(b'%s:{"%s":%d}' % (key, SPAN_MARK.encode(), len(bounds)))
                    bounds.append((j + 1, end))
                    pos = end + 1
                    j = end + 1
        i = line.find(key, j)
    if not bounds:
        return line, bounds
    pieces.append(line[pos:])
    return b"".join(pieces), bounds


def parse_ids(text: bytes) -> np.ndarray:
    """Parse `1,2,3` (whitespace allowed) into int64, or raise `IdsParseError`."""
    s = text.strip()
    if not s:
        return _EMPTY
    if s[:1] == b"," or s[-1:] == b",":
        raise IdsParseError("found a stray comma")
    try:
        return np.fromstring(s, dtype=np.int64, sep=",")
    except ValueError:
        pass
    # Say precisely what is wrong: the generic parser knows the offending element.
    try:
        values = orjson.loads(b"[" + s + b"]")
    except orjson.JSONDecodeError as exc:
        raise IdsParseError(f"found text that is not JSON ({exc})") from None
    bad = [v for v in values if type(v) is not int]
    if bad:
        raise IdsParseError(f"found {describe(bad[0])}")
    raise IdsParseError(OVERFLOW)


@dataclass(slots=True)
class Ref:
    """Where a decoded array's body lies (`raw[start:end]`) and how many ids it holds: the
    reference for decoding the next array."""

    raw: bytes
    start: int
    end: int
    count: int


def decode(raw: bytes, start: int, end: int, ref: Ref | None) -> tuple[int, np.ndarray]:
    """Decode the body `raw[start:end]` as the reference's first k ids followed by a freshly
    parsed tail; return (k, tail). Only the shared prefix of the reference is copied."""
    if ref is None or ref.count == 0:
        return 0, parse_ids(raw[start:end])
    # The common case: every id but the predecessor's last (its partial block, which changes
    # as the block fills) is shared. Re-parsing that one id is cheaper than special-casing it.
    cut = ref.raw.rfind(b",", ref.start, ref.end) - ref.start
    if (
        cut > 0
        and raw[start + cut : start + cut + 1] == b","
        and raw.startswith(ref.raw[ref.start : ref.start + cut], start, end)
    ):
        return ref.count - 1, parse_ids(raw[start + cut + 1 : end])
    prev = ref.raw[ref.start : ref.end]
    body = raw[start:end]
    common = _common_prefix(prev, body)
    # Ids whose text and closing comma both lie in the common prefix are shared; parse the rest.
    split = prev.rfind(b",", 0, common) + 1
    if split == 0:
        return 0, parse_ids(body)
    return prev.count(b",", 0, split), parse_ids(body[split:])


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.frombuffer(a, np.uint8, count=n) != np.frombuffer(b, np.uint8, count=n)
    first = int(diff.argmax())
    return first if diff[first] else n


def assemble(
    parts: list[tuple[int, np.ndarray]], first_ref_ids: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Build (offsets, flat ids) from decoded parts; part i shares its first k ids with part
    i-1 (with `first_ref_ids` for part 0). The flat array is int32 when every id fits, which
    halves memory on a full-size corpus (local-scope ids are small counters), else int64."""
    counts = np.fromiter((k + len(tail) for k, tail in parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    tails = np.concatenate([tail for _, tail in parts]) if parts else _EMPTY
    lo, hi = (int(tails.min()), int(tails.max())) if len(tails) else (0, 0)
    if lo == INT64_MIN or hi == INT64_MAX:  # saturated by the parser: find the culprit
        for i, (_, tail) in enumerate(parts):
            try:
                check_range(tail)
            except IdsParseError:
                raise IdsParseError(OVERFLOW, part=i) from None
    if parts and parts[0][0] and first_ref_ids is not None:
        head = first_ref_ids[: parts[0][0]]
        lo, hi = min(lo, int(head.min())), max(hi, int(head.max()))
    small = lo >= -(2**31) and hi < 2**31
    flat = np.empty(int(offsets[-1]), dtype=np.int32 if small else np.int64)
    pos_tail = 0
    prev_start = 0
    for i, (k, tail) in enumerate(parts):
        o = int(offsets[i])
        if k:
            src = first_ref_ids if i == 0 else flat[prev_start : prev_start + k]
            assert src is not None
            flat[o : o + k] = src[:k]
        m = len(tail)
        flat[o + k : o + k + m] = tails[pos_tail : pos_tail + m]
        pos_tail += m
        prev_start = o
    return offsets, flat
