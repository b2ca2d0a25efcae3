"""LMCache 0.5.6's own storage code (its engine, chunked token database and CPU backend with its
LRU) as the oracle of our external store's `lmcache` rule (replay/sim/native/lmcache_oracle.py,
lmcache_worker.py; scripts/lmcache_agreement.py prints the tables): with room for everything
and block-sized chunks storing outputs too, every request's held prefix agrees; with LMCache's
default write rule, and with a store smaller than the GPU cache, they differ as
docs/cache-tiers.md ("LMCache's storage") says, and the tests pin those known residues so a
change to either side is seen.

The oracle needs the LMCache environment (`bash scripts/setup_lmcache_cpu.sh`): skipped without
it, a failure under REPLAY_REQUIRE_LMCACHE=1. About 15 s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from replay.sim.native.crosscheck import tight
from replay.sim.native.host_oracle import B, Req, conversations
from replay.sim.native.lmcache_oracle import (
    ENGINE,
    Setup,
    agreement,
    run_engine,
    run_model,
    written,
)
from replay.sim.native.worker import NativeError, Worker
from tests.required import LMCACHE, missing


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    try:
        w = Worker.start(engine=ENGINE)
    except NativeError as e:
        missing(f"LMCache's storage code cannot run here: {e}", LMCACHE)
    try:
        yield w
    finally:
        w.close()


def _held(worker: Worker, reqs: Sequence[Req], s: Setup) -> tuple[list[int], list[int], int]:
    theirs, cap = run_engine(worker, reqs, s)
    return [h.store for h in run_model(reqs, s, cap)], [h.store for h in theirs], cap


def test_room_for_everything_agrees_request_by_request(worker: Worker) -> None:
    s = Setup(40, B, 1024, True)
    for reqs in (conversations(np.random.default_rng(0)), tight(np.random.default_rng(0), B)):
        ours, theirs, cap = _held(worker, reqs, s)
        assert cap == 1024  # the measured room is the configured one
        a = agreement(ours, theirs)
        assert a["differ"] == []
        assert a["tokens"][1] > 0


def test_lmcaches_default_write_rule_is_the_whole_residue(worker: Worker) -> None:
    """Prompts only (save_decode_cache False), whole chunks: ours holds more, and ours read
    with that write rule agrees on every request."""
    reqs = conversations(np.random.default_rng(0))
    for chunk in (B, 4 * B):
        s = Setup(40, chunk, 1024 * B // chunk, False)
        ours, theirs, _ = _held(worker, reqs, s)
        assert sum(ours) > sum(theirs) > 0
        ruled = [
            min(o // chunk * chunk, w)
            for o, w in zip(ours, written(reqs, chunk, False), strict=True)
        ]
        assert agreement(ruled, theirs)["differ"] == []


def test_a_store_smaller_than_the_gpu_keeps_what_lmcaches_lru_keeps_not_ours(
    worker: Worker,
) -> None:
    """The eviction residue: LMCache's LRU evicts its copies of blocks still on the GPU
    (local_cpu_backend.py:649-745), rule 5 never does, so with 30 chunks beside a 40-block
    GPU cache ours says the store holds more than LMCache does."""
    reqs = conversations(np.random.default_rng(0))
    ours, theirs, cap = _held(worker, reqs, Setup(40, B, 30, True))
    assert cap == 30
    assert all(o >= t for o, t in zip(ours, theirs, strict=True))
    a = agreement(ours, theirs)
    assert a["differ"]
    i = a["differ"][0][0]
    assert written(reqs, B, True)[i] >= ours[i]  # written, then evicted: not the write rule
