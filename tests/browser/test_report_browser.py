"""`report.html` in a real headless Chromium: every figure renders, no console errors, and
nothing is fetched from the network (the page is self-contained). Also the static export
(PNG/SVG/PDF) through kaleido with the same browser."""

from __future__ import annotations

import os
from pathlib import Path

import plotly.graph_objects as go
import pytest

from analysis.report import build_report
from analysis.report.export import export_static
from replay.records import RequestRecord
from replay.rundir import RunWriter
from replay.rundir_models import Manifest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed"),
]


def _run_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    manifest = {
        "config": {"window": [0, 300], "sessions": 2, "seed": 1},
        "engines": [{"name": "flashstate", "gpus": 2}, {"name": "vllm", "gpus": 2}],
        "trace": {"path": "sample", "sha256": "cd" * 32},
    }
    with RunWriter(run_dir, Manifest.model_validate(manifest)) as w:
        for engine, hit in (("flashstate", 0.9), ("vllm", 0.4)):
            for i in range(40):
                t = 5.0 * i
                w.add(
                    RequestRecord(
                        engine=engine,
                        session=i % 2,
                        trajectory=f"t{i // 8}",
                        agent="main",
                        turn=i % 8,
                        scheduled_s=t,
                        first_token_s=t + (0.3 if hit > 0.5 else 2.0),
                        done_s=t + 4.0,
                        prompt_tokens=10_000 + 500 * i,
                        cached_tokens=int((10_000 + 500 * i) * hit),
                        ideal_cached_tokens=10_000 + 400 * i,
                        output_tokens=200,
                        tool_gap_s=float(i % 7) * 10,
                    )
                )
    return run_dir


def test_report_html_renders_without_console_errors(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    out = tmp_path / "report"
    build_report([_run_dir(tmp_path)], out, "html", static=False)
    page_url = (out / "report.html").resolve().as_uri()
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_url)
            page.wait_for_selector("#fig-economics .main-svg", timeout=30_000)
            plots = page.locator(".js-plotly-plot").count()
            tables = page.locator("section.table table").count()
            page.screenshot(path=str(out / "screenshot.png"), full_page=False)
        finally:
            browser.close()
    assert errors == []
    assert plots == 10
    assert tables >= 8
    assert [u for u in requests if not u.startswith("file://")] == []


def test_static_export_writes_png_svg_pdf(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2]))
    result = export_static({"tiny": fig}, tmp_path)
    assert result.skipped is None
    assert "Traceback" not in capfd.readouterr().err  # the driver's logs are held
    assert (tmp_path / "tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "tiny.pdf").read_bytes()[:5] == b"%PDF-"
    assert b"<svg" in (tmp_path / "tiny.svg").read_bytes()[:500]
