"""The real dashboard in headless Chromium: `replay dashboard`'s streamlit command on a
generated runs folder, every page opened by its address, no exception shown, a screenshot
of each saved (to $DASHBOARD_SCREENSHOTS if set, else the test's tmp folder)."""

from __future__ import annotations

import os
import runpy
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replay.commands.dashboard import app_script, free_port, streamlit_command

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parents[2]
# (address path, text that shows the page finished drawing its data)
PAGES = (
    ("", "User $/1M in"),
    ("compare", "Output tokens/min/GPU vs sessions"),
    ("pricing", "Profit per GPU-hour"),
    ("sessions", "Prompt tokens per request"),
    ("live", "Requests completed per minute"),
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,  # starts a real server and browser: ~30 s
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("runs")
    synth: dict[str, Any] = runpy.run_path(str(REPO / "scripts" / "bench_dashboard.py"))
    synth["write_synthetic_run"](root / "sweep-a", n_requests=1_500, seed=1)
    synth["write_synthetic_run"](root / "sweep-b", n_requests=3_000, seed=2)
    synth["write_synthetic_run"](root / "in-progress", n_requests=800, seed=3, close=False)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        streamlit_command(app_script(), root, port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the dashboard did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("DASHBOARD_SCREENSHOTS")
    folder = Path(wanted) if wanted else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.timeout(300)
def test_every_page_renders_without_exceptions(server: str, shots: Path) -> None:
    from playwright.sync_api import sync_playwright

    page_errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1800})
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            for path, ready_text in PAGES:
                page.goto(f"{server}/{path}")
                page.get_by_text(ready_text).first.wait_for(timeout=60_000)
                if not path:  # the Replay page's chart is opt-in
                    page.get_by_text("Show output over time").click()
                page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
                assert page.locator('[data-testid="stException"]').count() == 0, path
                alerts = page.locator('[data-testid="stAlertContentError"]')
                assert alerts.count() == 0, f"{path}: {alerts.all_inner_texts()}"
                page.screenshot(path=str(shots / f"{path or 'replay'}.png"), full_page=True)
        finally:
            browser.close()
    assert not page_errors
    assert sorted(f.name for f in shots.glob("*.png")) == sorted(
        f"{p or 'replay'}.png" for p, _ in PAGES
    )


@pytest.mark.timeout(300)
def test_replay_play_moves_the_slider_in_the_browser(server: str, shots: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1800})
            page.goto(server)
            page.get_by_text("User $/1M in").first.wait_for(timeout=60_000)
            slider = page.get_by_role("slider", name="Run time (s)")
            end = int(slider.input_value())
            page.get_by_role("button", name="Play").click()
            page.get_by_role("button", name="Pause").wait_for(timeout=30_000)
            # Playing restarts from 0 and moves forward on a timer.
            deadline = time.monotonic() + 30
            now = -1
            while time.monotonic() < deadline:
                now = int(slider.input_value())
                if 0 < now < end:
                    break
                time.sleep(0.3)
            assert 0 < now < end
            page.screenshot(path=str(shots / "replay-playing.png"), full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0
        finally:
            browser.close()
