"""The synthesizer: determinism, scaling, block structure, subagents (the calibration against
the published figures is test_synth_reference.py)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from replay.traces import load_trace
from replay.traces.stats import prefix_relations
from replay.traces.synth import Knobs, SynthConfig, synth_lines, write_synth

# The published figures (prompt and output quantiles, gaps, subagent structure, totals) are
# checked against the reference file in test_synth_reference.py; the working set is an
# output of the simulator, measured in docs/corpus.md, not a target of the generator.


def test_same_seed_same_bytes_other_seed_other_bytes() -> None:
    cfg = SynthConfig(n_trajectories=3, seed=5, scale=32)
    a, b = list(synth_lines(cfg)), list(synth_lines(cfg))
    assert a == b
    assert list(synth_lines(SynthConfig(n_trajectories=3, seed=6, scale=32))) != a


def test_scale_divides_token_lengths(tmp_path: Path) -> None:
    full, small = tmp_path / "full.jsonl", tmp_path / "small.jsonl"
    write_synth(full, SynthConfig(n_trajectories=2, seed=3))
    write_synth(small, SynthConfig(n_trajectories=2, seed=3, scale=8))
    a, b = load_trace(full, strict=True), load_trace(small, strict=True)
    assert a.num_requests == b.num_requests
    ratio = sum(t.input_tokens.sum() for t in a.walk()) / sum(
        t.input_tokens.sum() for t in b.walk()
    )
    assert 7.5 < ratio < 8.5
    # Times are not scaled (ttft follows the context, which the scale rounds: within 0.1%);
    # the scale is declared in every line.
    assert np.allclose(a.trajectories[0].t, b.trajectories[0].t, rtol=1e-3, atol=0.05)
    assert all(tr.meta.get("token_scale") == 8 for tr in b.trajectories)
    assert all("token_scale" not in tr.meta for tr in a.trajectories)


def test_block_structure_is_real(tmp_path: Path) -> None:
    """Continuations carry every full block of their predecessor, then only new ids; every
    new id is new to the session; requests have ceil(in/64) ids."""
    path = tmp_path / "s.jsonl"
    write_synth(path, SynthConfig(n_trajectories=4, seed=11, scale=16))
    trace = load_trace(path, strict=True)
    for root in trace.trajectories:
        seen: set[int] = set()
        for tr in root.walk():
            counts = np.diff(tr.hash_offsets)
            assert np.array_equal(counts, -(-tr.input_tokens // 64))
            rel = prefix_relations(tr)
            for i in range(1, tr.num_requests):
                prev, cur = tr.blocks(i - 1), tr.blocks(i)
                if rel[i] == 1:
                    full = int(tr.input_tokens[i - 1]) // 64
                    assert set(cur[full:].tolist()).isdisjoint(prev.tolist())
            for i in range(tr.num_requests):
                seen.update(tr.blocks(i).tolist())
        # Local scope: ids count up from 1 within the session.
        assert min(seen) == 1 and max(seen) >= len(seen)


def test_subagents_nest_and_share_the_parent_system_prompt(tmp_path: Path) -> None:
    # The published corpus has no nesting (reference file, choices); the knob still makes it.
    path = tmp_path / "s.jsonl"
    knobs = Knobs(p_nested=0.3, p_subagents=1.0)
    write_synth(path, SynthConfig(n_trajectories=40, seed=2, scale=32), knobs=knobs)
    trace = load_trace(path)
    subs = [tr for tr in trace.walk() if tr.is_subagent]
    assert subs and all(s.parent_id and s.agent_id and s.subagent_type for s in subs)
    assert any(s.parent_id and s.parent_id.count("/") == 1 for s in subs)  # depth two
    by_id = {tr.id: tr for tr in trace.walk()}
    shared = [
        s
        for s in subs
        if s.subagent_type == "general-purpose"
        and s.blocks(0)[0] == by_id[s.parent_id].blocks(0)[0]
    ]
    assert shared, "general-purpose subagents start with the parent's system blocks"


def test_min_bytes_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl.gz"
    n = write_synth(path, SynthConfig(n_trajectories=1, seed=0, scale=64), min_bytes=3_000_000)
    assert n > 1
    assert len(gzip.decompress(path.read_bytes())) >= 3_000_000


def test_bad_config() -> None:
    with pytest.raises(ValueError, match="scale must be a finite number of at least 1"):
        next(synth_lines(SynthConfig(scale=0.5)))
    with pytest.raises(ValueError, match="at most 1,048,576"):  # issue 36: 1e200 wrote "t": null
        next(synth_lines(SynthConfig(scale=1e200)))
