"""The largest load meeting an SLO (analysis.slo_search, issue 35 point 3): the search on
monotone fake objectives, the objective against summary.json's share, and the file."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from analysis.runs import load_run
from analysis.slo import Slo
from analysis.slo_search import (
    EngineAnswer,
    Probe,
    SearchError,
    SloSearch,
    read_search,
    search_largest,
    search_rows,
    slo_share,
    write_search,
)
from analysis.summary import build_summary

Builder = Callable[[], Any]


def _edge(edge: int) -> tuple[Callable[[int], bool], list[int]]:
    asked: list[int] = []

    def meets(n: int) -> bool:
        asked.append(n)
        return n <= edge

    return meets, asked


@pytest.mark.parametrize("edge", [1, 2, 7, 8, 9, 37, 63, 64, 99, 100])
@pytest.mark.parametrize("start", [1, 8, 50])
def test_the_search_finds_the_edge_of_a_monotone_objective(edge: int, start: int) -> None:
    meets, asked = _edge(edge)
    got = search_largest(meets, start, 100)
    assert got.answer == edge
    assert got.capped == (edge == 100)
    assert len(asked) == len(set(asked)) == len(got.probes)  # each count asked once
    assert len(asked) <= 2 * math.ceil(math.log2(100)) + 2  # bracketing + bisection


def test_the_search_says_when_nothing_or_the_limit_holds() -> None:
    got = search_largest(lambda n: False, 8, 64)
    assert (got.answer, got.capped, got.probes) == (0, False, [8, 4, 2, 1])
    got = search_largest(lambda n: True, 8, 64)
    assert (got.answer, got.capped, got.probes) == (64, True, [8, 16, 32, 64])
    got = search_largest(lambda n: True, 5, 5)
    assert (got.answer, got.capped) == (5, True)


def test_bad_bounds_are_named() -> None:
    with pytest.raises(SearchError, match="limit must be at least 1"):
        search_largest(lambda n: True, 1, 0)
    with pytest.raises(SearchError, match=r"start must lie within 1\.\.10"):
        search_largest(lambda n: True, 11, 10)


def test_the_objective_is_summary_jsons_request_share(builder: Builder) -> None:
    b = builder()
    b.req("a", 90.0, first=91.0, done=92.0, priming=True)  # warm-up: out
    b.req("a", 100.0, first=101.0, done=110.0, output=10)  # ttft 1, itl 1: fails itl
    b.req("a", 120.0, first=120.5, done=121.4, output=10)  # within
    b.req("a", 130.0, first=139.0, done=140.0, output=10)  # ttft 9: fails
    b.req("a", 150.0, first=150.2, done=150.3, output=2)  # within
    b.req("a", 160.0, status="error")
    b.rows[-1].first_token_s = b.rows[-1].done_s = None
    run = load_run(b.write("run", config={"window": [100, 200], "sessions": 1}))
    df = run.requests[run.requests["engine"] == "a"]
    share, n = slo_share(df, (100.0, 200.0), Slo())
    assert (share, n) == (0.5, 4)
    summary = build_summary(run).engines["a"]
    assert summary.model_dump()["slo_request_share"] == pytest.approx(share)
    assert slo_share(df, (100.0, 200.0), Slo(ttft_s=10, itl_s=None)) == (1.0, 4)
    assert math.isnan(slo_share(df, (500.0, 600.0), Slo())[0])


def test_the_search_file_round_trips_and_tabulates(tmp_path: Path) -> None:
    probe = [Probe(8, 0, 40, 0.95, True), Probe(16, 0, 80, 0.7, False)]
    band = {"engines": [{"points": [{"hit_rate": 0.5, "ttft_p50_s": 1.0},
                                    {"hit_rate": 0.7, "ttft_p50_s": 2.0}]}]}  # fmt: skip
    answer = EngineAnswer("vllm", "vllm", 2, 12, False, probe,
                          [Probe(12, 0, 50, 0.9, True), Probe(12, 1, 50, math.nan, False)],
                          band)  # fmt: skip
    search = SloSearch({"ttft_s": 6.0, "itl_s": 0.2, "e2e_s": None, "task_slowdown": 2.0},
                       0.9, 0, [0, 1], 8, 64, 600.0, (200.0, 600.0), "sample", [answer])  # fmt: skip
    write_search(tmp_path, search)
    back = read_search(tmp_path)
    assert back is not None
    assert back.engines[0].agents_per_gpu == 6.0 and back.engines[0].held == 1
    assert math.isnan(back.engines[0].confirm[1].share)
    assert (
        back.tier == "TTFT ≤ 6 s and output ≥ 5 tok/s per agent (ITL ≤ 0.2 s) for ≥ 90% of requests"
    )
    (row,) = search_rows(back)
    assert (row["sessions"], row["agents_per_gpu"], row["held"]) == (12, 6.0, "1 of 2")
    assert (row["share_min"], row["share_max"], row["hit_min"], row["hit_max"]) == (
        0.9,
        0.9,
        0.5,
        0.7,
    )
    assert read_search(tmp_path / "nowhere") is None
