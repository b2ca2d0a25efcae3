"""The fast `hash_ids` reader: cutting spans out of a line and decoding them by prefix."""

from __future__ import annotations

import re

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.traces.idspans import IdsParseError, Ref, assemble, blank_spans, decode, parse_ids


def test_blank_spans_marks_each_array() -> None:
    line = b'{"a":{"hash_ids":[1,2]},"b":[{"hash_ids" : [ 3 ]}],"c":"hash_ids"}'
    blanked, bounds = blank_spans(line)
    assert orjson.loads(blanked) == {
        "a": {"hash_ids": {"@span": 0}},
        "b": [{"hash_ids": {"@span": 1}}],
        "c": "hash_ids",
    }
    assert [line[s:e] for s, e in bounds] == [b"1,2", b" 3 "]


def test_parse_ids() -> None:
    assert parse_ids(b" 1, 2 ,3 ").tolist() == [1, 2, 3]
    assert parse_ids(b"  ").tolist() == []
    assert parse_ids(b"-4").tolist() == [-4]
    for bad, why in [
        (b"1,,2", "found text that is not JSON"),
        (b"1,2,", "found a stray comma"),
        (b"1,x", "found text that is not JSON"),
        (b"1,2.5", "found 2.5 (float)"),
        (b"1,true", "found True (bool)"),
    ]:
        with pytest.raises(IdsParseError, match=re.escape(why)):
            parse_ids(bad)


def _chain(bodies: list[bytes]) -> list[list[int]]:
    """Decode bodies in order, each relative to the previous, and assemble them."""
    raw = b"|".join(bodies)
    parts, ref, pos = [], None, 0
    for body in bodies:
        start, end = pos, pos + len(body)
        parts.append(decode(raw, start, end, ref))
        ref = Ref(raw, start, end, parts[-1][0] + len(parts[-1][1]))
        pos = end + 1
    offsets, flat = assemble(parts, None)
    return [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(bodies))]


@pytest.mark.parametrize(
    "arrays",
    [
        [[1, 2, 3], [1, 2, 4, 5]],  # continuation: the partial last block changes
        [[1, 2, 3], [1, 2, 3, 4]],  # exact extension
        [[1, 2, 3], [1, 2, 34, 5]],  # a textual prefix that is not an id prefix
        [[1, 2, 34], [1, 2, 3]],  # shorter, last id a textual prefix
        [[1, 2, 3, 4], [1, 2]],  # a prefix of the previous one
        [[1, 2, 3, 4], [1, 9, 10]],  # context edit
        [[5, 6], [7, 8]],  # fresh
        [[], [1], [], [1, 2]],
        [[12], [1, 2]],
    ],
)
def test_decode_chain(arrays: list[list[int]]) -> None:
    bodies = [",".join(map(str, a)).encode() for a in arrays]
    assert _chain(bodies) == arrays


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 6),
            st.lists(st.integers(0, 120), max_size=6),
            st.sampled_from([",", ", ", " , "]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_decode_chain_property(steps: list[tuple[int, list[int], str]]) -> None:
    """Random prefix-sharing sequences with mixed spacing decode exactly."""
    arrays: list[list[int]] = []
    prev: list[int] = []
    for keep, new, _sep in steps:
        cur = prev[: min(keep, len(prev))] + new
        arrays.append(cur)
        prev = cur
    bodies = [sep.join(map(str, a)).encode() for a, (_, _, sep) in zip(arrays, steps, strict=True)]
    assert _chain(bodies) == arrays


def test_assemble_uses_external_reference_and_narrow_dtype() -> None:
    parent = np.array([7, 8, 9], dtype=np.int64)
    offsets, flat = assemble([(2, np.array([1])), (3, np.array([], dtype=np.int64))], parent)
    assert offsets.tolist() == [0, 3, 6] and flat.tolist() == [7, 8, 1, 7, 8, 1]
    assert flat.dtype == np.int32
    _, wide = assemble([(0, np.array([2**40]))], None)
    assert wide.dtype == np.int64
