"""The ideal-prefix index: exact to the token, across chunk boundaries and branches."""

from __future__ import annotations

import numpy as np

from replay.client.ideal import PrefixIndex, computed_sequence


def test_longest_prefix_is_exact_to_the_token_inside_a_chunk() -> None:
    ix = PrefixIndex(chunk_tokens=8)
    a = np.arange(100, 140)
    ix.insert(a)
    b = a.copy()
    b[21] = 7
    assert ix.longest_prefix(b) == 21
    assert ix.longest_prefix(a) == 40
    assert ix.longest_prefix(np.concatenate([a, [1, 2, 3]])) == 40
    assert ix.longest_prefix(a[:13]) == 13
    assert ix.longest_prefix(np.array([5, 6])) == 0


def test_branches_keep_every_continuation() -> None:
    ix = PrefixIndex(chunk_tokens=4)
    base = list(range(10, 22))
    ix.insert([*base, 1, 1, 1, 1, 9])
    ix.insert([*base, 2, 2, 2, 2, 2, 2])
    assert ix.longest_prefix([*base, 2, 2, 2, 2, 2, 5]) == len(base) + 5
    assert ix.longest_prefix([*base, 1, 1, 1, 1, 9, 9]) == len(base) + 5
    assert ix.longest_prefix([*base, 3]) == len(base)


def test_empty_index_and_empty_prompt() -> None:
    ix = PrefixIndex()
    assert ix.longest_prefix(np.arange(10)) == 0
    ix.insert(np.arange(10))
    assert ix.longest_prefix(np.zeros(0, dtype=np.int32)) == 0


def test_computed_sequence_drops_the_last_generated_token() -> None:
    seq = computed_sequence(np.array([1, 2, 3]), [4, 5, 6])
    assert seq.tolist() == [1, 2, 3, 4, 5]
    assert computed_sequence(np.array([1, 2]), [9]).tolist() == [1, 2]


def test_align_rule_keeps_states_at_prompt_floors_and_junctions() -> None:
    """vLLM's align rule at B = 4: a prompt of n leaves a state at ⌊(n−1)/4⌋·4; the next
    turn (prompt + generated + new) hits it; a request whose KV hit passes its state hit
    pins a state at the junction."""
    from replay.client.ideal import AlignRuleIndex

    rule = AlignRuleIndex(4)
    p1 = list(range(100, 111))  # 11 tokens: state at 8
    assert rule.state_hit(p1) == 0
    rule.served(p1)
    assert rule.state_hit(p1) == 8  # an exact resend
    turn2 = [*p1, 7, 7, 7, 1, 2, 3]  # 17 tokens; its KV hit (prompt + generated) is 12
    assert rule.state_hit(turn2) == 8
    assert rule.junction(kv_hit=13, state_hit=8) == 12
    rule.served(turn2, junction=12)
    sibling = [*p1, 7, 7, 7, 9, 9, 9]  # shares 14 tokens with turn2: the junction at 12
    assert rule.state_hit(sibling) == 12
    assert rule.state_hit(list(range(100, 109))) == 8  # a prefix of p1 ending past its state
    assert rule.state_hit(list(range(100, 108))) == 0  # n - 1 = 7 < 8
    assert rule.junction(kv_hit=8, state_hit=8) == 0


def _lcp(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def test_longest_prefix_is_the_longest_common_prefix_with_any_inserted_sequence() -> None:
    """Against brute force: branches from earlier sequences, partial chunks, wide nodes,
    read-only arrays kept as views and writeable ones changed after they were inserted
    (the index keeps what was inserted, not what the caller's array becomes)."""
    rng = np.random.default_rng(36)
    for chunk in (1, 2, 3, 5, 8):
        ix = PrefixIndex(chunk_tokens=chunk)
        kept: list[np.ndarray] = []
        for step in range(300):
            if kept and rng.random() < 0.8:
                base = kept[int(rng.integers(len(kept)))]
                cut = int(rng.integers(0, len(base) + 1))
                tail = rng.integers(0, 3, int(rng.integers(0, 3 * chunk + 2)))
                seq = np.concatenate([base[:cut], tail]).astype(np.int32)
            else:
                seq = rng.integers(0, 3, int(rng.integers(0, 4 * chunk + 3))).astype(np.int32)
            q = seq.copy()
            if len(q) and rng.random() < 0.5:
                q[int(rng.integers(len(q)))] ^= 1
            want = max((_lcp(q, s) for s in kept), default=0)
            assert ix.longest_prefix(q) == want, (chunk, step)
            if rng.random() < 0.5:
                seq.flags.writeable = False
                ix.insert(seq)
                kept.append(seq)
            else:
                ix.insert(seq)
                kept.append(seq.copy())
                seq[:] = 7  # the caller reuses its array
