"""`replay traces stats --compare`: the corpus figures on known traces, the reference file's
checks, and the command line (bad names, JSON, scaled traces, the real corpus)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.traces import load_trace, sample_path
from replay.traces.figures import corpus_figures, ideal_walk, main_gaps, peak_concurrent
from replay.traces.model import Trace, Trajectory
from replay.traces.reference import (
    ReferenceError,
    compare,
    known_references,
    load_reference,
    parse_reference,
)
from tests.required import real_trace

runner = CliRunner()
NAN = math.nan


def traj(
    tid: str, blocks: list[list[int]], t: list[float], api: list[float], **kw: object
) -> Trajectory:
    n = len(blocks)
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in blocks])
    return Trajectory(
        id=tid,
        block_size=64,
        hash_scope="local",
        namespace=tid.split("/")[0],
        t=np.array(t, dtype=float),
        input_tokens=np.array([64 * len(b) for b in blocks], dtype=np.int64),
        output_tokens=np.full(n, 10, dtype=np.int64),
        api_time=np.array(api, dtype=float),
        think_time=np.full(n, NAN),
        ttft=np.full(n, NAN),
        request_type=np.ones(n, dtype=np.int8),
        stop=np.zeros(n, dtype=np.int8),
        hash_offsets=offsets,
        hash_ids=np.array([i for b in blocks for i in b], dtype=np.int64),
        **kw,  # type: ignore[arg-type]
    )


# A subagent starting 12 s into the session (after the root's second request), running 5 s.
SUB = traj("r/a", [[1, 2, 9], [1, 2, 9, 10]], [0, 2], [1, 1], parent_id="r", agent_id="a",
           spawn_t=12, spawn_index=2, meta={"duration_ms": 5000})  # fmt: skip
ROOT = traj(
    "r",
    [[1, 2], [1, 2, 3], [1, 2, 3, 4], [7]],
    [0, 10, 30, 31],
    [2, 2, NAN, 1],
    subagents=(SUB,),
)
TRACE = Trace([ROOT], "hand", "weka", 64)


def test_gaps_follow_the_definition() -> None:
    # 10 − (0 + 2) = 8; 30 − (10 + 2) = 18; the third has no api_time before it: left out.
    gaps, missing = main_gaps(ROOT)
    assert gaps.tolist() == [8.0, 18.0] and missing == 1


def test_ideal_walk_in_session_clock_order() -> None:
    hits, total, new = ideal_walk(ROOT)
    # Order: root 0 (t 0), root 1 (10), sub 0 (12), sub 1 (14), root 2 (30), root 3 (31).
    assert total.tolist() == [2, 3, 3, 4, 4, 1]
    assert hits.tolist() == [0, 2, 2, 3, 3, 0]
    assert new.tolist() == [128, 64, 64, 64, 64, 64]


def test_corpus_figures_known_answers() -> None:
    f = corpus_figures(TRACE)
    assert f["main_requests"] == 4 and f["subagent_requests"] == 2 and f["subagent_groups"] == 1
    assert f["sessions_with_subagents_share"] == 1.0 and f["main_turns_p50"] == 4
    assert f["ideal_prefix_hit"] == pytest.approx(10 / 17)
    assert f["gap_p50_s"] == 13.0 and f["gaps_without_api_time"] == 1
    # Span 0 → 32; busy [0,2] + [10,12] + [30,30] + [31,32]: waiting 1 − 5/32.
    assert f["waiting_share"] == pytest.approx(1 - 5 / 32)
    assert f["subagent_peak_concurrent_p50"] == 1
    assert f["token_scale"] == 1.0


def test_peak_concurrent_closes_before_it_opens() -> None:
    assert peak_concurrent([(0, 5), (5, 9), (6, 7)]) == 2
    assert peak_concurrent([]) == 0


def test_the_bundled_reference_has_a_source_and_definition_for_every_figure() -> None:
    assert "cc-traces-062126" in known_references()
    ref = load_reference("cc-traces-062126")
    assert 0 < ref.tolerance < 1 and len(ref.figures) >= 30
    assert all(f.source in ref.sources and f.definition for f in ref.figures)
    rows = compare(corpus_figures(TRACE), ref)
    assert [r["figure"] for r in rows] == [f.key for f in ref.figures]


def test_unknown_reference_lists_the_known_ones() -> None:
    with pytest.raises(ReferenceError, match=r"unknown reference corpus 'nope'; known: cc-traces"):
        load_reference("nope")
    result = runner.invoke(app, ["traces", "stats", "--compare", "nope"])
    assert result.exit_code == 2
    assert "--compare: unknown reference corpus 'nope'; known: cc-traces-062126" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("figures: [1]", "expected a mapping with a 'figures' mapping"),
        ("sources: {a: x}\nfigures: {f: {value: one, source: a, definition: d}}",
         "figure 'f': field 'value': expected a number"),
        ("sources: {a: x}\nfigures: {f: {value: 1, source: b, definition: d}}",
         "figure 'f': field 'source': 'b' is not one of the file's sources (a)"),
        ("sources: {a: x}\nfigures: {f: {value: 1, source: a}}",
         "figure 'f': field 'definition': missing"),
        ("tolerance: 2\nfigures: {}", "field 'tolerance': expected a share in (0, 1)"),
        ("figures: {a: [", "not valid YAML"),
    ],
)  # fmt: skip
def test_a_malformed_reference_names_file_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "reference-x.yaml"
    path.write_text(text)
    with pytest.raises(ReferenceError) as e:
        parse_reference(path, "x")
    assert str(path) in str(e.value) and message in str(e.value)


def test_compare_json_on_the_scaled_sample_is_at_full_size() -> None:
    result = runner.invoke(app, ["traces", "stats", "--compare", "cc-traces-062126", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["reference"] == "cc-traces-062126" and out["token_scale"] == 16
    rows = {r["figure"]: r for r in out["comparison"]}
    sample = load_trace(sample_path())
    raw = np.concatenate([tr.input_tokens for tr in sample.trajectories])
    assert rows["main_prompt_p50"]["trace"] == pytest.approx(16 * float(np.median(raw)))
    assert rows["main_prompt_p50"]["ratio"] == pytest.approx(
        rows["main_prompt_p50"]["trace"] / 254_080
    )
    table = runner.invoke(app, ["traces", "stats", "--compare", "cc-traces-062126"])
    assert table.exit_code == 0 and "beside cc-traces-062126" in table.stdout


def test_compare_on_the_real_corpus() -> None:
    path = real_trace()
    result = runner.invoke(app, ["traces", "stats", str(path), "--compare", "cc-traces-062126", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {r["figure"]: r for r in json.loads(result.stdout)["comparison"]}
    # kvct-dev's contexts are about half as long as the 062126 corpus's (its README).
    assert 0.3 < rows["main_prompt_p50"]["ratio"] < 0.6
    assert 0.9 < rows["ideal_prefix_hit"]["ratio"] < 1.0
    assert all(r["trace"] == r["trace"] for r in rows.values())  # no NaN on a real trace
