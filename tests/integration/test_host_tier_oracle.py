"""vLLM 0.32's own scheduler, KV offloading connector and CPU manager as the oracle of our host
tier (replay/sim/native/host_oracle.py, vllm_host_worker.py; scripts/tier_agreement.py prints
the tables): with a host larger than the GPU cache, every request's GPU-hit and host-hit tokens
agree; with a host about the GPU cache's size they differ as docs/cache-tiers.md ("The oracle")
says, and the test pins that known residue so a change to either side is seen.

The oracle needs the vLLM environment (`bash scripts/setup_vllm_cpu.sh`): skipped without it,
a failure under REPLAY_REQUIRE_VLLM=1. About 15 s (most of it vLLM's import).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from replay.sim.native.crosscheck import tight
from replay.sim.native.host_oracle import (
    ENGINE,
    B,
    agreement,
    conversations,
    run_engine,
    run_model,
)
from replay.sim.native.worker import NativeError, Worker
from tests.required import VLLM, missing

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    try:
        w = Worker.start(engine=ENGINE)
    except NativeError as e:
        missing(f"vLLM's offloading connector cannot run here: {e}", VLLM)
    try:
        yield w
    finally:
        w.close()


def test_host_larger_than_the_gpu_agrees_request_by_request(worker: Worker) -> None:
    for reqs in (conversations(np.random.default_rng(0)), tight(np.random.default_rng(0), B)):
        theirs, chunks = run_engine(worker, reqs, 40, 1 << 20)
        assert chunks == 128  # 1 MiB over 8 KiB chunks (a KV block or one state group's block)
        a = agreement(run_model(reqs, 40, chunks), theirs)
        assert a["differ"] == []
        assert a["host"][1] > 0  # prefixes did leave the GPU and came back from the host
        assert a["gpu"][1] > 0


def test_without_a_host_tier_both_hit_the_gpu_only(worker: Worker) -> None:
    reqs = conversations(np.random.default_rng(0))
    theirs, chunks = run_engine(worker, reqs, 40, 0)
    assert chunks == 0
    a = agreement(run_model(reqs, 40, 0), theirs)
    assert a["differ"] == []
    assert a["host"] == (0, 0)


def test_a_host_the_gpus_size_keeps_what_vllms_lru_keeps_not_ours(worker: Worker) -> None:
    """The residue: vLLM's CPU LRU evicts host copies of GPU-resident blocks too
    (v1/kv_offload/cpu/manager.py:311-330), tiers.py's HostTier._fit never does, so a host of
    30 chunks beside a 40-block GPU cache gives ours no room and vLLM its latest stores."""
    reqs = conversations(np.random.default_rng(0))
    theirs, chunks = run_engine(worker, reqs, 40, 240 << 10)
    assert chunks == 30
    a = agreement(run_model(reqs, 40, chunks), theirs)
    assert a["host"][0] == 0 < a["host"][1]
    assert a["gpu"][0] == a["gpu"][1]
    _, ours, th = a["differ"][0]
    assert ours.host == 0 < th.host
