"""A request body sent in parts, so a long prompt's JSON is never held whole.

A 105K-token prompt's body is ~0.7 MB of JSON; held from when a turn is prepared until its
answer ends, that was most of the client's memory per in-flight request (issue 36, point 7:
10K full-size sessions from one machine). A `Body` keeps the JSON before and after the
prompt's token ids and a reference to the ids themselves (a view the session holds anyway),
and writes the ids in slices as the request is sent (chunked transfer encoding). The parts
joined are byte for byte the body `orjson.dumps` writes whole, which is what `bytes(body)`
returns for the callers that want it whole (preflight, tests, benchmarks).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import orjson

# Token ids per slice: ~200 KB of JSON, written in well under a millisecond.
SLICE = 32_768
_NUMPY = orjson.OPT_SERIALIZE_NUMPY


class Body:
    """`head`, then the ids as JSON numbers separated by commas, then `tail`."""

    __slots__ = ("head", "ids", "tail")

    def __init__(self, head: bytes, ids: np.ndarray | None = None, tail: bytes = b"") -> None:
        self.head = head
        self.ids = ids
        self.tail = tail

    def parts(self) -> Iterator[bytes]:
        yield self.head
        ids = self.ids
        if ids is not None:
            for a in range(0, len(ids), SLICE):
                part = orjson.dumps(np.asarray(ids[a : a + SLICE], dtype=np.int64), option=_NUMPY)
                yield part[1:-1] if a == 0 else b"," + part[1:-1]
        yield self.tail

    async def stream(self) -> AsyncIterator[bytes]:
        """The parts, for `aiohttp`'s `data=` (sent with chunked transfer encoding)."""
        for part in self.parts():
            yield part

    def __bytes__(self) -> bytes:
        return b"".join(self.parts())


def json_body(fields: dict[str, Any], key: str, ids: np.ndarray) -> Body:
    """The JSON object `fields` with `key` holding the token ids `ids`, as a `Body` (`key` keeps
    its place when `fields` has it): the object is written once with `key` empty and split where
    its empty list stands (a quote inside a string is escaped, so `"key":[]` appears once, as
    the key's own value)."""
    whole = orjson.dumps({**fields, key: []}, option=_NUMPY)
    mark = b'"' + key.encode() + b'":['
    at = whole.index(mark + b"]") + len(mark)
    return Body(whole[:at], ids, whole[at:])
