"""Prefix identity: chained keys agree exactly on shared prefixes, at any position."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.emulator.hashing import PrefixKeys, chain_keys


def _ids(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 150_000, n)


def test_keys_agree_exactly_up_to_the_first_differing_unit() -> None:
    a = _ids(5000)
    b = a.copy()
    b[3001] += 1
    ka, kb = PrefixKeys(a, 64), PrefixKeys(b, 64)
    assert ka.common_units(kb) == 3001 // 64
    assert ka.keys.shape == (5000 // 64,)
    assert (ka.keys[:46] == kb.keys[:46]).all()
    assert (ka.keys[46:] != kb.keys[46:]).all()  # chained: every later key differs too


def test_key_at_any_position_identifies_that_prefix() -> None:
    a = _ids(1000)
    b = a.copy()
    b[700] = (b[700] + 1) % 150_000
    ka, kb = PrefixKeys(a, 64), PrefixKeys(b, 64)
    for p in (1, 63, 64, 65, 640, 699, 700):
        assert ka.key_at(p) == kb.key_at(p)
    for p in (701, 704, 768, 1000):
        assert ka.key_at(p) != kb.key_at(p)
    # A partial position never collides with a unit boundary of another sequence.
    assert ka.key_at(65) != PrefixKeys(a[:65], 64).key_at(64)


def test_key_at_rejects_positions_outside_the_sequence() -> None:
    k = PrefixKeys(_ids(10), 64)
    with pytest.raises(ValueError, match=r"outside 1\.\.10"):
        k.key_at(11)
    with pytest.raises(ValueError, match="outside"):
        k.key_at(0)


def test_same_ids_same_keys_across_instances_and_reordering_changes_them() -> None:
    a = _ids(640)
    assert (chain_keys(a, 64) == chain_keys(a.copy(), 64)).all()
    swapped = a.copy()
    swapped[:64], swapped[64:128] = a[64:128], a[:64]
    assert chain_keys(swapped, 64)[1] != chain_keys(a, 64)[1]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 700),
    extra=st.integers(0, 300),
    unit=st.sampled_from([1, 16, 64, 100]),
    seed=st.integers(0, 1000),
)
def test_extended_equals_hashing_the_whole_sequence(
    n: int, extra: int, unit: int, seed: int
) -> None:
    ids = _ids(n + extra, seed)
    grown = PrefixKeys(ids[:n], unit).extended(ids[n:])
    whole = PrefixKeys(ids, unit)
    assert (grown.keys == whole.keys).all()
    if n + extra:
        assert grown.key_at(n + extra) == whole.key_at(n + extra)


def test_unit_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="hash unit"):
        chain_keys(_ids(10), 0)


def test_a_retained_sequence_keeps_block_keys_and_new_tokens_only() -> None:
    a = PrefixKeys(_ids(3000), 64)
    kept = a.retained(2000, 272)
    assert len(kept) == 3000 and kept.tokens.shape[0] == 3000 - 1984  # from the unit start
    for p in (272, 544, 1904, 64, 1984, 2001, 2500, 3000):  # block, unit and new positions
        assert kept.key_at(p) == a.key_at(p)
    with pytest.raises(ValueError, match="before the tokens this retained sequence keeps"):
        kept.key_at(1000)
    with pytest.raises(ValueError, match="cannot be extended"):
        kept.extended(_ids(5))
