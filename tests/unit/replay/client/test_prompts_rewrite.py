"""Token-id prompts: seeded blocks, the salt, growth with generated ids, context edits kept
token for token, subagents sharing their parent's blocks, and the vocabulary's safe range."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from replay.prompts import HIGH_RESERVED, LOW_RESERVED, PromptBuilder, PromptError, TokenSpace


def conv(
    helpers: Any, blocks: list[list[int]], inputs: list[int], tid: str = "t", **kw: Any
) -> Any:
    return helpers.make_trajectory(tid, inputs, [5] * len(inputs), blocks, **kw)


def test_same_hash_same_tokens_any_order_and_salt_changes_them(helpers: Any) -> None:
    tr = conv(helpers, [[1, 2, 3], [3, 2, 1]], [48, 48])
    a = PromptBuilder(TokenSpace(32000, 7)).context(tr)
    p0 = a.prompt(0)
    b = PromptBuilder(TokenSpace(32000, 7)).context(tr)
    q1 = b.prompt(1)  # the other request first: block 3 must still be the same tokens
    assert np.array_equal(p0[32:48], q1[:16]) and np.array_equal(p0[:16], q1[32:48])
    c = PromptBuilder(TokenSpace(32000, 8)).context(tr)
    assert not np.array_equal(c.prompt(0), p0)


def test_ids_stay_inside_the_vocabulary_away_from_special_tokens(helpers: Any) -> None:
    tr = conv(helpers, [list(range(400))], [6400])
    p = PromptBuilder(TokenSpace(32000, 1)).context(tr).prompt(0)
    assert p.min() >= LOW_RESERVED and p.max() < 32000 - HIGH_RESERVED
    assert p.dtype == np.int32 and len(p) == 6400


def test_too_small_vocabulary_is_refused_with_the_field_named() -> None:
    with pytest.raises(PromptError, match="vocab_size 1000 is too small"):
        TokenSpace(1000, 1)


def test_next_turn_is_previous_prompt_then_generated_then_new_blocks(helpers: Any) -> None:
    tr = conv(helpers, [[1, 2, 10], [1, 2, 3, 11]], [40, 60])
    ctx = PromptBuilder(TokenSpace(32000, 3)).context(tr)
    p0 = ctx.prompt(0)
    gen = [7, 8, 9, 10, 11]
    ctx.completed(0, p0, gen)
    p1 = ctx.prompt(1)
    assert len(p1) == 60
    assert np.array_equal(p1[:40], p0) and list(p1[40:45]) == gen


def test_prompt_is_cut_to_the_trace_length_when_output_exceeds_it(helpers: Any) -> None:
    tr = conv(helpers, [[1, 2, 10], [1, 2, 11]], [40, 42])
    ctx = PromptBuilder(TokenSpace(32000, 3)).context(tr)
    p0 = ctx.prompt(0)
    ctx.completed(0, p0, [7, 8, 9, 10, 11])
    p1 = ctx.prompt(1)
    assert list(p1) == [*p0, 7, 8]


def test_context_edit_keeps_the_shared_blocks_exactly_and_resynthesises_the_rest(
    helpers: Any,
) -> None:
    # Request 1 keeps only the first block of request 0 (an edit / compaction).
    tr = conv(helpers, [[1, 2, 3], [1, 20, 21]], [48, 48])
    ctx = PromptBuilder(TokenSpace(32000, 3)).context(tr)
    p0 = ctx.prompt(0)
    ctx.completed(0, p0, [9, 9, 9])
    p1 = ctx.prompt(1)
    assert np.array_equal(p1[:16], p0[:16])
    assert not np.array_equal(p1[16:32], p0[16:32])
    assert 9 not in p1[16:].tolist()  # the generated ids were edited away too


def test_a_block_seen_before_carries_the_tokens_actually_sent(helpers: Any) -> None:
    # Turn 1 grows over turn 0's generated ids; block 2 (positions 32-47) then holds them.
    # A subagent whose first request names block 2 must send those same tokens.
    tr = conv(helpers, [[1, 2, 50], [1, 2, 3, 51]], [40, 60], tid="p")
    sub = conv(helpers, [[1, 2, 3, 77]], [56], tid="p/s", namespace="p", agent_id="s")
    builder = PromptBuilder(TokenSpace(32000, 3))
    ctx = builder.context(tr)
    p0 = ctx.prompt(0)
    ctx.completed(0, p0, [5, 6, 7, 8, 9, 10, 11, 12])
    p1 = ctx.prompt(1)
    child = builder.context(sub).prompt(0)
    assert np.array_equal(child[:48], p1[:48])
    assert child[40:48].tolist() == [5, 6, 7, 8, 9, 10, 11, 12]


def test_local_namespaces_are_forgotten_when_their_last_context_ends(helpers: Any) -> None:
    tr = conv(helpers, [[1, 2, 3]], [48])
    builder = PromptBuilder(TokenSpace(32000, 3))
    ctx = builder.context(tr)
    first = ctx.prompt(0)
    assert builder.remembered_blocks == 3
    ctx.release()
    assert builder.remembered_blocks == 0
    assert np.array_equal(builder.context(tr).prompt(0), first)  # same salt, same tokens


def test_positions_beyond_the_traces_blocks_are_filled_deterministically(helpers: Any) -> None:
    tr = conv(helpers, [[1]], [40])  # one 16-token block named, 40 tokens long
    a = PromptBuilder(TokenSpace(32000, 3)).context(tr).prompt(0)
    b = PromptBuilder(TokenSpace(32000, 3)).context(tr).prompt(0)
    assert len(a) == 40 and np.array_equal(a, b)


def test_extends_previous_says_whether_a_turn_continues_exactly(helpers: Any) -> None:
    tr = conv(helpers, [[1, 2, 10], [1, 2, 3, 11], [1, 2, 3, 12]], [40, 60, 62])
    ctx = PromptBuilder(TokenSpace(32000, 3)).context(tr)
    p0 = ctx.prompt(0)
    assert ctx.extends_previous(p0) is None  # a first turn extends nothing
    ctx.completed(0, p0, [7, 8, 9])
    p1 = ctx.prompt(1)
    assert ctx.extends_previous(p1) is True
    # An output longer than the trace leaves room for: the next prompt is cut short of it.
    ctx.completed(1, p1, list(range(300, 310)))
    p2 = ctx.prompt(2)
    assert ctx.extends_previous(p2) is False


def test_extends_previous_is_none_for_a_context_edit(helpers: Any) -> None:
    tr = conv(helpers, [[1, 2, 3], [1, 9, 9, 9]], [48, 64])
    ctx = PromptBuilder(TokenSpace(32000, 3)).context(tr)
    p0 = ctx.prompt(0)
    ctx.completed(0, p0, [7, 8])
    assert ctx.extends_previous(ctx.prompt(1)) is None


def test_each_replay_of_a_trajectory_gets_its_own_tokens(helpers: Any) -> None:
    """A second replay of the same trajectory in one run (another identity) shares no
    block with the first, so it cannot hit cache the first left; the same identity gives
    the same tokens, and forgetting a finished replay does not bring the old tokens back."""
    tr = conv(helpers, [[1, 2, 3], [1, 2, 3, 4]], [48, 64])
    builder = PromptBuilder(TokenSpace(32000, 5))
    first = builder.context(tr)
    p = first.prompt(0)
    second = builder.context(tr, f"{tr.namespace}#replay1")
    q = second.prompt(0)
    assert len(p) == len(q) == 48
    blocks_p = {tuple(p[i : i + 16]) for i in range(0, 48, 16)}
    blocks_q = {tuple(q[i : i + 16]) for i in range(0, 48, 16)}
    assert blocks_p.isdisjoint(blocks_q)
    first.release()
    second.release()
    again = builder.context(tr)
    assert np.array_equal(again.prompt(0), p)
    third = builder.context(tr, f"{tr.namespace}#replay2")
    assert not np.array_equal(third.prompt(0), q)


def test_a_conversation_shares_one_buffer_and_remembers_only_blocks_with_generated_ids(
    helpers: Any,
) -> None:
    """Issue 36 point 7: turn k+1's prompt is a view of the buffer turn k's was (what was
    handed out is read-only and never changes); the namespace keeps every block hash it
    sent but the tokens of only the blocks that are not what the token space synthesises
    for their hash: here the one block each turn that holds generated ids."""
    tr = helpers.growing_trajectory("g", turns=4, first=100, step=60, out=8)
    builder = PromptBuilder(TokenSpace(32000, 3))
    ctx = builder.context(tr)
    prompts = []
    for i in range(4):
        p = ctx.prompt(i)
        assert not p.flags.writeable
        prompts.append((p, p.copy()))
        gen = np.arange(8, dtype=np.int32) + 100 * (i + 1)
        ctx.completed(i, p, gen)
        seq = ctx.computed(p, gen)
        assert seq.tolist() == [*p.tolist(), *gen[:-1].tolist()]
    assert all(np.shares_memory(prompts[0][0], q) for q, _ in prompts[1:])
    assert all(np.array_equal(p, c) for p, c in prompts)
    full = {int(h) for i in range(4) for h in tr.blocks(i)[: int(tr.input_tokens[i]) // 16]}
    assert builder.remembered_blocks == len(full)
    # Turns 1-3 each sent the ids generated before them, in blocks 6, 10 and 13-14 (turn
    # 2's 8 ids start 4 tokens before a block's end).
    assert len(ctx.ns.blocks) == 4
    for row in ctx.ns.blocks.values():
        assert set(row.tolist()) & set(range(100, 400))
