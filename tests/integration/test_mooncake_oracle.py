"""Mooncake 0.3.13's own store (its master service and client over TCP on localhost) as the
oracle of our external store's `mooncake` rule (replay/sim/native/mooncake_oracle.py,
mooncake_worker.py; scripts/mooncake_agreement.py prints the tables): with room for
everything, every request's held prefix and its deepest state agree; with a store not much
larger than the GPU cache, Mooncake's LRU over every key (copies of GPU entries included)
holds less than rule 5 says, as docs/cache-tiers.md ("Mooncake's store") says, and the tests
pin that residue so a change to either side is seen. The master is a separate process: the
worker starts it on free ports and stops it, also when the worker is killed.

The oracle needs the Mooncake environment (`bash scripts/setup_mooncake_cpu.sh`): skipped
without it, a failure under REPLAY_REQUIRE_MOONCAKE=1. About 20 s.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from replay.sim.native.crosscheck import tight
from replay.sim.native.host_oracle import Req, conversations
from replay.sim.native.mooncake_oracle import (
    ENGINE,
    Held,
    Setup,
    agreement,
    init,
    measure,
    run_engine,
    run_model,
)
from replay.sim.native.worker import NativeError, Worker
from tests.required import MOONCAKE, missing


def _start() -> Worker:
    try:
        return Worker.start(engine=ENGINE)
    except NativeError as e:
        missing(f"Mooncake's store cannot run here: {e}", MOONCAKE)


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    w = _start()
    try:
        yield w
    finally:
        w.close()


def _held(worker: Worker, reqs: Sequence[Req], s: Setup) -> tuple[list[Held], list[Held], int]:
    cap = measure(worker, s)
    steps = run_model(reqs, s, cap)
    theirs, _ = run_engine(worker, reqs, steps)
    return [st.held for st in steps], theirs, cap


def _gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_room_for_everything_agrees_request_by_request(worker: Worker) -> None:
    s = Setup(40, 1024)
    for reqs in (conversations(np.random.default_rng(0)), tight(np.random.default_rng(0), 16)):
        ours, theirs, cap = _held(worker, reqs, s)
        assert cap == 1024  # the measured room is the configured one
        held = agreement([h.store for h in ours], [h.store for h in theirs])
        usable = agreement([h.usable for h in ours], [h.usable for h in theirs])
        assert held["differ"] == [] and usable["differ"] == []
        assert 0 < usable["tokens"][1] < held["tokens"][1]  # states written, and looked up


def test_a_store_near_the_gpus_size_holds_less_than_rule_5_says(worker: Worker) -> None:
    """The eviction residue: Mooncake evicts the least recently put or looked-up keys once
    over its high watermark, copies of blocks still on the GPU included, and a prefix whose
    first block went is lost whole; rule 5 never evicts the store's copies of GPU and host
    entries. At 64 blocks beside a 40-block GPU cache, ours holds more on `conversations`."""
    reqs = conversations(np.random.default_rng(0))
    ours, theirs, cap = _held(worker, reqs, Setup(40, 64))
    assert cap == 64
    a = agreement([h.store for h in ours], [h.store for h in theirs])
    assert a["tokens"][0] > a["tokens"][1] > 0
    assert a["differ"]
    _, mine, its = a["differ"][0]
    assert mine > its  # the first difference is Mooncake holding less, never more
    assert sum(1 for _, m, t in a["differ"] if m < t) <= len(a["differ"]) // 4


def test_the_master_is_stopped_with_the_worker() -> None:
    """`quit` stops the master; a killed worker takes it down too (PR_SET_PDEATHSIG)."""
    for kill in (False, True):
        w = _start()
        pid = int(init(w, Setup(40, 64))["master"])
        os.kill(pid, 0)  # running
        if kill:
            w.proc.send_signal(signal.SIGKILL)
            w.proc.wait(timeout=10)
        w.close()
        assert _gone(pid), f"mooncake_master {pid} outlived its worker (killed: {kill})"
