"""`sglang-native`: SGLang 0.5.22's own radix cache driven as its scheduler drives it, on
hand-worked cases (the grid, chunk ends, the branching state, a tight pool) and the checks
that the faster drive (merged decode steps) and SGLang's two tree cores give the same cache.

Needs SGLang beside the CPU vLLM (`bash scripts/setup_vllm_cpu.sh --with-sglang`): skipped
without it, a failure under REPLAY_REQUIRE_SGLANG=1 (`scripts/test.sh` sets it).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from replay.profiles import ModelProfile
from replay.sim.cache.policies import make_policy
from replay.sim.native.crosscheck import WORKLOADS, Req, compare, drive
from replay.sim.native.worker import NativeError, Worker
from tests.profiles import hybrid_profile
from tests.required import SGLANG, missing

pytestmark = pytest.mark.vllm  # the vLLM environment, which SGLang is added to

B = 16
GRID = 16  # _mamba_cache_chunk_size, scaled with the blocks
CHUNK = 64


def tiny_profile(blocks: int = 400) -> ModelProfile:
    return hybrid_profile(blocks)


@pytest.fixture(scope="module")
def sglang_worker() -> Iterator[Worker]:
    try:
        w = Worker.start(engine="sglang")
    except NativeError as e:
        missing(str(e), SGLANG)
    yield w
    w.close()


def _native(worker: Worker, blocks: int = 400, **opts: object):  # type: ignore[no-untyped-def]
    prof = tiny_profile(blocks)
    pol = make_policy("sglang-native", prof, grid=GRID, chunk=CHUNK, **opts)
    return pol.make_cache(prof, worker=worker)


def test_states_on_the_grid_at_chunk_ends_and_the_branch(sglang_worker):
    """A 100-token prompt in 64-token chunks tracks states at 64 and 64 + ⌊36/16⌋·16 = 96
    (relative to the chunk's start), and the tree keeps KV only up to them: the next turn,
    which shares all 129 computed tokens, hits 96. A prompt sharing 50 tokens hits nothing
    (no state at or below 50), but SGLang tracks its branching point ⌊50/16⌋·16 = 48, so a
    third one sharing 50 hits 48."""
    reqs = [
        Req(100, 30, -1, 0, 0.0),  # 100 + 30 tokens (129 computed)
        Req(169, 3, 0, 130, 2.0),  # the whole of it, then 39 of its own
        Req(150, 3, 0, 50, 4.0),
        Req(140, 3, 0, 50, 6.0),
    ]
    got = drive(_native(sglang_worker), reqs)
    assert got == [0, 96, 0, 48]


def test_the_pools_follow_the_memory(sglang_worker):
    """400 blocks at the fallback ratio 0.9: ⌊(189.47 − 2)/2⌋ = 93 state slots, and
    400 − 94·2 = 212 blocks (3,392 tokens) of KV."""
    c = _native(sglang_worker)
    assert (c.config["kv_tokens"], c.config["state_slots"]) == (3392, 93)
    st = c.stats()
    assert (st["free"], st["free_states"]) == (3392, 93)
    c2 = _native(sglang_worker, max_mamba_cache_size=10)
    assert (c2.config["kv_tokens"], c2.config["state_slots"]) == ((400 - 22) * B, 10)


def test_a_tight_pool_evicts_and_stays_whole(sglang_worker):
    """Overlapping conversations in 60 blocks: some requests wait (-1), every admitted
    one's memory comes back at its end (free + the tree's evictable = the pool)."""
    reqs = WORKLOADS["tight"](np.random.default_rng(0), B)
    c = _native(sglang_worker, blocks=60)
    got = drive(c, reqs)
    assert -1 in got and sum(g > 0 for g in got) >= 5
    st = c.stats()
    assert st["kv_protected"] == 0 and st["states_protected"] == 0
    assert st["free"] + st["kv_evictable"] == st["kv_tokens"]
    assert st["free_states"] + st["states_evictable"] == st["state_slots"]


def test_merged_decode_steps_and_both_tree_cores_give_the_same_cache(sglang_worker):
    """One allocation per stretch between track boundaries (the default, for speed) leaves
    every hit and the free KV after every request as one allocation per token does; SGLang's
    Python tree core agrees with its Rust one (the default where the extension loads)."""
    for name in WORKLOADS:
        blocks = 60 if name == "tight" else 400
        for seed in range(2):
            reqs = WORKLOADS[name](np.random.default_rng(seed), B)
            runs = []
            for opts in (
                {"decode_steps": "token"},
                {"decode_steps": "merged"},
                {"tree_core": "python"},
            ):
                cache = _native(sglang_worker, blocks, **opts)
                frees: list[tuple[int, int]] = []
                hits = drive(
                    cache, reqs, after=lambda c, f=frees: f.append((c.free, c.free_states))
                )
                runs.append((hits, frees))
            assert runs[0] == runs[1] == runs[2], f"{name} seed {seed}"


def test_bad_options_name_themselves(sglang_worker):
    with pytest.raises(NativeError, match=r"decode_steps is 'merged' or 'token', not 'x'"):
        _native(sglang_worker, decode_steps="x")
    with pytest.raises(NativeError, match=r"tree_core is 'rust' or 'python', not 'c'"):
        _native(sglang_worker, tree_core="c")
    with pytest.raises(NativeError, match=r"leaves 0 state slots .* SGLang refuses to start"):
        _native(sglang_worker, blocks=4)


EXACT = ["chains", "block-multiples", "siblings", "edits"]
OPTS = {"grid": GRID, "chunk": CHUNK, "track_interval": GRID}


def _pair(worker: Worker, name: str, seed: int, blocks: int) -> tuple[list[int], list[int]]:
    prof = tiny_profile(blocks)
    reqs = WORKLOADS[name](np.random.default_rng(seed), B)
    theirs = drive(make_policy("sglang-native", prof, **OPTS).make_cache(prof, worker=worker), reqs)
    ours = drive(make_policy("sglang", prof, **OPTS).make_cache(prof), reqs)
    return ours, theirs


@pytest.mark.parametrize("name", EXACT)
def test_sglang_matches_sglangs_own_cache_request_by_request(sglang_worker, name):
    for seed in range(3):
        ours, theirs = _pair(sglang_worker, name, seed, 400)
        assert ours == theirs, f"{name} seed {seed}: ours {ours}\nSGLang {theirs}"


def test_tight_pool_bound(sglang_worker):
    """Overlapping conversations in 60 blocks (13 state slots, 2 running requests): the
    same requests wait, and a few hits part where SGLang keeps a KV-only node our model frees
    at once, or counts a request's tokens where ours counts blocks. Bound measured over these
    seeds 0-7 (scripts/native_agreement.py): at most 3 of 30 requests differ (8 of 240 in
    all), cached tokens within 128 (5,888 against 5,904 in all)."""
    for seed in range(3):
        ours, theirs = _pair(sglang_worker, "tight", seed, 60)
        a, b, diff = compare(ours, theirs)
        assert [x < 0 for x in ours] == [x < 0 for x in theirs], f"seed {seed}"
        assert diff <= 3, f"seed {seed}: ours {ours}\nSGLang {theirs}"
        assert abs(a - b) <= 128, f"seed {seed}: {a} vs {b}"


@pytest.mark.slow
def test_simulate_replays_a_corpus_through_sglangs_code(sglang_worker, small_corpus):
    """The whole loop (`simulate`, sessions, trace timing) with SGLang's radix cache as the
    cache, on a synthesized corpus scaled 16× down (blocks, grid and chunk with it): the
    same requests run, and our `sglang` gives nearly every one the same cached tokens.
    Measured: 3 of 265 differ (a state inside a 272-token block keeps the whole block here,
    SGLang's pages are tokens), cached tokens 3,366,288 against 3,366,528."""
    from replay.profiles import load_profile
    from replay.sim.runner import SimConfig, simulate
    from replay.traces import load_trace

    trace = load_trace(small_corpus)
    glm = load_profile("glm-5.3-flash")
    prof = glm.model_copy(update={"block_tokens": 272, "chunk_tokens": 544})
    opts = {"grid": 16, "chunk": 1024, "track_interval": 16}
    got = {}
    for policy in ("sglang", "sglang-native"):
        cfg = SimConfig(policy, 8, duration_s=900.0, window=(300.0, 900.0), policy_opts=opts)
        res = simulate(trace, cfg, prof)
        got[policy] = [(r.trajectory, r.turn, r.status, r.cached_tokens) for r in res.records]
    ours, theirs = got["sglang"], got["sglang-native"]
    assert len(ours) > 60 and [r[:3] for r in ours] == [r[:3] for r in theirs]
    assert sum(a != b for a, b in zip(ours, theirs, strict=True)) <= len(ours) // 30
    a, b = (sum(r[3] or 0 for r in x) for x in (ours, theirs))
    assert b > 0 and abs(a - b) <= b / 1000


def test_a_recomputed_prefix_the_tree_holds_is_kept_once(sglang_worker):
    """SGLang's side of rule 8 (`sglang_policy.py`; the model's side in
    test_sim_sglang_recompute.py): B's prompt is A's first 80 tokens, whose state at 80 lies
    past n − 1, so B resumes from 64 and recomputes [64, 80) while the tree holds that KV.
    After B's prefill the KV in use is still A's 80 tokens: the insert kept the tree's copy
    and freed B's duplicates (96 if both were held)."""
    from replay.sim.cache.keys import TokenPrefix

    prof = tiny_profile()
    pol = make_policy("sglang-native", prof, grid=GRID, chunk=1024, track_interval=GRID)
    c = pol.make_cache(prof, worker=sglang_worker)
    kv = int(c.config["kv_tokens"])
    a_ids, a_out = list(range(64)), list(range(1000, 1032))
    a_prompt = TokenPrefix(a_ids, B)
    a = c.begin(a_prompt, 64, c.lookup(a_prompt, 64, 0.0), 0.0)
    assert c.reserve(a, 96, 0.0)
    c.prefill_done(a, 0.0)
    c.finish(a, TokenPrefix(a_ids + a_out, B), 96, 1.0)
    assert kv - c.stats()["free"] == 80  # the tree keeps KV up to A's last state
    b_ids = a_ids + a_out[:16]
    b_prompt = TokenPrefix(b_ids, B)
    info = c.lookup(b_prompt, 80, 2.0)
    assert info.resume_pos == 64
    b = c.begin(b_prompt, 80, info, 2.0)
    assert c.reserve(b, 96, 2.0)  # the native drive prefills here
    assert kv - c.stats()["free"] == 80
    c.finish(b, TokenPrefix(b_ids + list(range(2000, 2016)), B), 96, 3.0)
