"""The live panel and its plain-text twin show each engine's numbers."""

from __future__ import annotations

import time

from rich.console import Console

from replay.client.panel import panel, progress_line
from replay.client.session import LiveStats
from replay.records import RequestRecord


def stats() -> LiveStats:
    s = LiveStats(sessions=4)
    now = time.perf_counter_ns()
    for k in range(10):
        r = RequestRecord(
            "vllm",
            0,
            "t",
            "main",
            k,
            scheduled_s=1.0,
            sent_s=1.0,
            first_token_s=1.0 + 0.01 * (k + 1),
            done_s=2.0,
            prompt_tokens=1000,
            cached_tokens=800,
            ideal_cached_tokens=900,
            output_tokens=50,
        )
        s.observe(r, now)
    s.observe(
        RequestRecord("vllm", 0, "t", "main", 11, 1.0, status="error", error="HTTP 500: boom"), now
    )
    s.observe(RequestRecord("vllm", 0, "t", "main", 12, 1.0, status="overflow"), now)
    return s


def test_panel_shows_hit_rate_ttft_and_errors() -> None:
    s = stats()
    assert s.hit_rate == 0.8 and s.done == 10 and s.errors == 1 and s.overflows == 1
    assert s.output_per_min(time.perf_counter_ns()) == 500.0
    console = Console(width=160, record=True)
    console.print(panel({"vllm": s}, 30.0, 60.0))
    text = console.export_text()
    assert "vllm" in text and "80.0%" in text and "90.0%" in text
    assert "HTTP 500: boom" in text and "30 s of 60 s (50%)" in text
    p50 = s.ttft_pct(50)
    assert p50 is not None and 50 < p50 < 60


def test_progress_line_for_logs() -> None:
    line = progress_line({"vllm": stats()}, 12.0, 60.0)
    assert line.startswith("[12/60 s] vllm: done 10 err 1 hit 80.0%")
