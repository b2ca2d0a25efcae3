"""A request whose terminal block is covered by a longer sibling must not absorb the
checkpoints of partial siblings that end past its own tokens (their tokens are unknown to
it). Seen in the FlashState emulator as `position outside 1..n` from `finish`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.policies import POLICY_NAMES, make_policy


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_shorter_request_under_a_covering_sibling(
    policy: str, make_profile: Callable, turn: Callable
) -> None:
    p = make_profile()
    cache = HybridCache(p, make_policy(policy, p))
    _, a = turn(cache, 1, 40, 0, 0.0)  # blocks [0,16) [16,32) and a partial [32,40)
    turn(cache, 2, 38, 0, 2.0, parent=a, shared=36)  # a partial sibling [32,38)
    info, _ = turn(cache, 3, 35, 0, 4.0, parent=a, shared=35)  # inside [32,40), before 38
    assert 0 <= info.resume_pos <= 35
    assert cache.used_blocks <= (cache.capacity or cache.used_blocks)
