"""Prefix identities: token-id sequences (the emulator's) and lineages (the simulator's),
and the cache driven online with real token ids the way the emulator drives it."""

from __future__ import annotations

import numpy as np

from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.keys import LineagePrefix, TokenPrefix
from replay.sim.cache.policies import make_policy


def test_token_prefix_keys_identify_exact_prefixes():
    rng = np.random.default_rng(0)
    a = [int(x) for x in rng.integers(0, 1000, 300)]
    b = [*a[:150], 7, *a[151:]]
    pa, pb = TokenPrefix(a, g=64), TokenPrefix(b, g=64)
    assert all(pa.key_at(p) == pb.key_at(p) for p in range(1, 151))
    assert all(pa.key_at(p) != pb.key_at(p) for p in range(151, 301))
    assert pa.key_at(128) != pa.key_at(127) != pa.key_at(129)
    longer = pa.extended([1, 2, 3])
    assert longer.length == 303 and longer.key_at(300) == pa.key_at(300)
    assert TokenPrefix(a, salt=1).key_at(10) != pa.key_at(10)  # a per-run salt


def test_lineage_prefix_follows_its_parent_up_to_the_shared_length():
    a = LineagePrefix(1, 100)
    b = LineagePrefix(2, 150, a, 80)
    c = LineagePrefix(3, 200, b, 120)
    assert all(c.key_at(p) == a.key_at(p) for p in (1, 50, 80))
    assert c.key_at(81) == b.key_at(81) != a.key_at(81)
    assert c.key_at(121) != b.key_at(121)
    assert c.common_prefix(a) == 80 and c.common_prefix(b) == 120
    assert LineagePrefix(4, 50, a, 0).common_prefix(a) == 0


def test_keys_every_matches_key_at_across_lineage_bounds():
    """The lookup's one-pass block keys are the keys `key_at` gives, at every step."""
    a = LineagePrefix(1, 100)
    b = LineagePrefix(2, 160, a, 80)
    c = LineagePrefix(3, 200, b, 120)
    for seq in (a, b, c):
        for step in (1, 7, 16, 40):
            for upto in (0, 39, 80, 121, 500):
                want = [seq.key_at(p) for p in range(step, min(upto, seq.length) + 1, step)]
                assert seq.keys_every(step, upto) == want


def _turn(cache, prompt, output, now):
    """What the emulator does per request, with token ids."""
    p = TokenPrefix(prompt, g=8)
    info = cache.lookup(p, len(prompt), now)
    h = cache.begin(p, len(prompt), info, now)
    assert cache.reserve(h, len(prompt) + len(output), now)
    cache.prefill_done(h, now)
    cache.finish(h, p.extended(output), len(prompt) + len(output), now + 1)
    return info


def test_the_cache_driven_online_with_token_ids(make_profile):
    prof = make_profile()  # 16-token blocks
    rng = np.random.default_rng(1)
    ids = lambda n: [int(x) for x in rng.integers(0, 50_000, n)]  # noqa: E731
    p1, o1 = ids(90), ids(21)
    p2 = p1 + o1 + ids(30)  # the next turn: previous prompt, its output, a tool result
    for name, resume in (("vllm", 80), ("flashstate", 111), ("tail-replay", 111 - 12)):
        cache = HybridCache(prof, make_policy(name, prof))
        _turn(cache, p1, o1, 0.0)
        info = _turn(cache, p2, ids(5), 5.0)
        assert info.ideal_pos == 111, name
        assert info.resume_pos == resume, name
