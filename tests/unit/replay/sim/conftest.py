"""Shared pieces for the simulator tests: a tiny profile, a one-call request driver, and
what the cyclic collector finds after a call."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from replay.profiles import ModelProfile
from replay.sim.cache.hybrid import HybridCache, ResumeInfo
from replay.sim.cache.keys import LineagePrefix

T = TypeVar("T")


def cyclic_garbage(call: Callable[[], T]) -> tuple[T, Counter[str]]:
    """`call()`'s result and the objects, by type name, that only the cyclic collector
    could free once it returned (the collector paused meanwhile, then run once); under
    "linked Block", the prefix-tree blocks among them still linked to their path."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        out = call()
        gc.collect()
        kinds = Counter(type(o).__name__ for o in gc.garbage)
        kinds["linked Block"] = sum(1 for o in gc.garbage if type(o).__name__ == "Block" and o.up)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    return out, kinds


def tiny_profile(blocks: int = 40, block: int = 16, ckpt: int = 2, chunk: int = 32) -> ModelProfile:
    """Small numbers with the GLM shape: chunk = two blocks, a checkpoint = `ckpt` blocks."""
    return ModelProfile(
        name="tiny",
        model="tiny hybrid",
        gpus=1,
        block_tokens=block,
        blocks_per_engine=blocks,
        checkpoint_blocks=ckpt,
        prefill_cost_d=1.862e-5,
        prefill_cost_e=3.33e-6,
        cost_unit_tokens=100,
        chunk_tokens=chunk,
    )


@pytest.fixture
def profile() -> ModelProfile:
    return tiny_profile()


Turn = Callable[..., tuple[ResumeInfo, LineagePrefix]]


def run_turn(
    cache: HybridCache,
    seq_id: int,
    n: int,
    out: int,
    now: float,
    parent: LineagePrefix | None = None,
    shared: int = 0,
    hold: float = 1.0,
) -> tuple[ResumeInfo, LineagePrefix]:
    """One request start to finish: look up, pin, reserve, prefill, finish `hold` s later."""
    seq = LineagePrefix(seq_id, n + out, parent, shared)
    info = cache.lookup(seq, n, now)
    h = cache.begin(seq, n, info, now)
    assert cache.reserve(h, n + out, now), "the request should fit"
    cache.prefill_done(h, now)
    cache.finish(h, seq, n + out, now + hold)
    return info, seq


@pytest.fixture
def make_profile() -> Callable[..., ModelProfile]:
    return tiny_profile


@pytest.fixture
def turn() -> Callable[..., tuple[ResumeInfo, LineagePrefix]]:
    return run_turn


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthesized Weka corpus (token lengths scaled down 16×), written once."""
    from replay.traces.synth import SynthConfig, write_synth

    path = tmp_path_factory.mktemp("sim-corpus") / "small.jsonl"
    write_synth(path, SynthConfig(n_trajectories=12, seed=1, scale=16))
    return path


@pytest.fixture(scope="session")
def vllm_worker() -> Iterator[object]:
    """One worker process running vLLM's own KV cache manager, shared by the session (each
    test re-initialises it). Skips when no vLLM is found; REPLAY_REQUIRE_VLLM=1 (what
    `scripts/test.sh` sets) makes that a failure."""
    from replay.sim.native.worker import NativeError, Worker
    from tests.required import missing

    try:
        w = Worker.start()
    except NativeError as e:
        missing(str(e))
    yield w
    w.close()
