"""The live prompt builder continues the turn the simulator links a request to
(`replay.traces.lineage`), not simply the turn before: the main turn after a side call
continues the main turn before it, prompt and generated ids, so an emulated or live run sends
the prefix the simulator predicts (docs/field-numbers.md, the vLLM answer of the AA-AgentPerf
search: the sample's `synth-7-00086` turn 47)."""

from __future__ import annotations

from typing import Any

import numpy as np

from replay.prompts import PromptBuilder, TokenSpace
from replay.sim.driver import shared_with
from replay.traces import load_trace, sample_path
from replay.traces.lineage import Lineage
from replay.traces.model import Trajectory


def _lcp(a: np.ndarray, b: np.ndarray) -> int:
    m = min(len(a), len(b))
    d = np.flatnonzero(a[:m] != b[:m])
    return int(d[0]) if len(d) else m


class _Sent:
    """What `shared_with` reads of a simulated request: its trajectory, index and lengths."""

    def __init__(self, tr: Trajectory, i: int):
        self.trajectory, self.index = tr, i
        self.n, self.out = int(tr.input_tokens[i]), int(tr.output_tokens[i])


def test_main_turn_after_a_side_call_continues_the_main_turn_before_it(helpers: Any) -> None:
    # main (3 blocks), a side call of its own, the main turn growing the first one
    tr = helpers.make_trajectory("t", [48, 20, 80], [5, 3, 5], [[1, 2, 3], [9, 8], [1, 2, 3, 4]])
    ctx = PromptBuilder(TokenSpace(32000, 3)).context(tr)
    p0 = ctx.prompt(0)
    ctx.completed(0, p0, [7, 8, 9, 10, 11])
    side = ctx.prompt(1)
    ctx.completed(1, side, [300, 301, 302])
    p2 = ctx.prompt(2)
    assert list(p2[:53]) == [*p0, 7, 8, 9, 10, 11]
    assert ctx.extends_previous(p2) is True
    assert _lcp(p2, side) == 0


def test_a_failed_predecessor_falls_back_to_the_closest_turn_that_came_back(
    helpers: Any,
) -> None:
    tr = helpers.make_trajectory("t", [32, 48, 64], [4, 4, 4], [[1, 2], [1, 2, 3], [1, 2, 3, 4]])
    ctx = PromptBuilder(TokenSpace(32000, 3)).context(tr)
    p0 = ctx.prompt(0)
    ctx.completed(0, p0, [7, 8, 9, 10])
    ctx.prompt(1)  # sent, failed: never completed
    p2 = ctx.prompt(2)
    assert list(p2[:36]) == [*p0, 7, 8, 9, 10]
    assert ctx.extends_previous(p2) is True


def test_a_turn_is_held_until_the_last_request_continuing_it(helpers: Any) -> None:
    blocks = [[*range(1, k + 2)] for k in range(30)]
    blocks[10] = [500, 501]  # a side call: nothing continues it
    inputs = [16 * len(b) for b in blocks]
    tr = helpers.make_trajectory("t", inputs, [3] * 30, blocks)
    ctx = PromptBuilder(TokenSpace(32000, 3)).context(tr)
    held = []
    for i in range(30):
        p = ctx.prompt(i)
        if i not in (0, 10):
            assert ctx.extends_previous(p) is True
        ctx.completed(i, p, [400 + i, 401, 402])
        held.append(sorted(ctx._turns))
    # one turn at a time; turn 9 across the side call; none after the last
    assert held == [[i] for i in range(10)] + [[9]] + [[i] for i in range(11, 29)] + [[]]


def test_every_request_of_a_sample_session_shares_what_the_simulator_says() -> None:
    """Turn by turn, the tokens each prompt shares with its predecessor's prompt and output
    are exactly the simulator's (`replay.sim.driver.shared_with`); turn 47 (after a 355-token
    side call) continues turn 45: 14,464 tokens, not the 14,400 of a context edit."""
    trace = load_trace(sample_path())
    tr = next(t for t in trace.trajectories if t.id == "synth-7-00086")
    lin = Lineage(tr)
    assert lin.predecessor(47) == (45, 225) and int(tr.input_tokens[46]) == 355
    ctx = PromptBuilder(TokenSpace(151_936, 1)).context(tr)
    rng = np.random.default_rng(0)
    sent: dict[int, np.ndarray] = {}
    shares: dict[int, tuple[int, int]] = {}
    for i in range(tr.num_requests):
        p = ctx.prompt(i)
        gen = rng.integers(300, 30_000, int(tr.output_tokens[i])).astype(np.int32)
        j, m = lin.predecessor(i)
        if j >= 0:
            shares[i] = (_lcp(p, sent[j]), shared_with(_Sent(tr, j), tr, i, m))  # type: ignore[arg-type]
        ctx.completed(i, p, gen)
        sent[i] = np.concatenate([p, gen])
    assert shares[47] == (14_464, 14_464)
    assert {i: s for i, s in shares.items() if s[0] != s[1]} == {}
