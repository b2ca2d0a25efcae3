"""The real dashboard in headless Chromium: `replay dashboard`'s streamlit command on a
generated runs folder, every page opened by its address, no exception shown, a screenshot
of each saved (to $DASHBOARD_SCREENSHOTS if set, else the test's tmp folder). And Compare on
a folder of unlike runs (a trace-timing `replay simulate` sweep beside an emulated 48-session
run): each kind its own lines, never one line through both."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def _serving(root: Path) -> Iterator[str]:
    """`replay dashboard`'s streamlit command on `root`; its address once it answers."""
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
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("runs")
    synth: dict[str, Any] = runpy.run_path(str(REPO / "scripts" / "bench_dashboard.py"))
    synth["write_synthetic_run"](root / "sweep-a", n_requests=1_500, seed=1)
    synth["write_synthetic_run"](root / "sweep-b", n_requests=3_000, seed=2)
    synth["write_synthetic_run"](root / "in-progress", n_requests=800, seed=3, close=False)
    with _serving(root) as url:
        yield url


SIM_SESSIONS = {2, 4, 8}
EMULATED_SESSIONS = 48


def _unlike_runs(root: Path) -> None:
    """A trace-timing simulation sweep (2, 4, 8 sessions; 6 minutes, window 2–6) made by the
    real `replay simulate`, and beside it a run shaped as an emulated live run writes it (48
    sessions, 45 minutes, window 15–45, the same corpus): synthetic records under the
    manifest fields that make it emulated (executor live, emulated), so the test needs no
    emulator and stays fast."""
    sessions = ",".join(map(str, sorted(SIM_SESSIONS)))
    subprocess.run(
        [
            *(sys.executable, "-m", "replay", "simulate", "--policies", "flashstate,vllm,sglang"),
            *("--sessions", sessions, "--timing", "trace", "--duration-min", "6"),
            *("--window", "2-6", "--out", str(root / "sim-sweep")),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=120,
    )
    sim = json.loads((root / "sim-sweep" / "vllm-s2-seed0" / "manifest.json").read_text())
    synth: dict[str, Any] = runpy.run_path(str(REPO / "scripts" / "bench_dashboard.py"))
    live = synth["write_synthetic_run"](
        root / "emulated-48", n_requests=1_500, seed=7, sessions=EMULATED_SESSIONS
    )
    manifest = json.loads((live / "manifest.json").read_text())
    manifest.update(executor="live", emulated=True, trace=sim["trace"])
    manifest["config"].update(
        duration_s=2700.0, window=[900.0, 2700.0], token_scale=16.0, time_scale=1.0
    )
    (live / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def unlike_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("unlike-runs")
    _unlike_runs(root)
    with _serving(root) as url:
        yield url


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
    # A screenshot of every page (the folder may hold the other tests' too).
    assert {f"{p or 'replay'}.png" for p, _ in PAGES} <= {f.name for f in shots.glob("*.png")}


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


# Every chart's traces as the browser holds them: legend group, name and x values.
_TRACES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => ({
    title: p.layout.title.text,
    traces: p._fullData.map(t => ({group: t.legendgroup || '', name: t.name,
                              x: Array.from(t.x, Number)}))}))"""


@pytest.mark.timeout(300)
def test_compare_never_joins_unlike_runs(unlike_server: str, shots: Path) -> None:
    from playwright.sync_api import sync_playwright

    page_errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 2000})
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            page.goto(f"{unlike_server}/compare")
            page.get_by_text("Hit rate (%) vs sessions").first.wait_for(timeout=60_000)
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
            assert page.locator('[data-testid="stException"]').count() == 0
            # The note says there are two kinds and what each is.
            note = page.get_by_text("unlike runs are never joined")
            note.wait_for(timeout=30_000)
            text = page.locator('[data-testid="stAlertContentInfo"]').first.inner_text()
            assert "simulated, trace timing" in text and "emulated" in text
            assert "window 2–6 min" in text and "window 15–45 min" in text
            charts = page.evaluate(_TRACES_JS)
            page.screenshot(path=str(shots / "compare-unlike.png"), full_page=True)
        finally:
            browser.close()
    assert not page_errors
    assert len(charts) == 5
    groups: dict[str, set[float]] = {}
    for chart in charts:
        for trace in chart["traces"]:
            xs = set(trace["x"])
            # One line never spans both kinds: its points are all simulated or all emulated.
            assert xs <= SIM_SESSIONS or xs == {EMULATED_SESSIONS}, (chart["title"], trace)
            groups.setdefault(trace["group"], set()).update(xs)
    # Two legend groups, one per kind (A: the six simulated runs, B: the emulated one).
    assert groups == {"A": SIM_SESSIONS, "B": {EMULATED_SESSIONS}}
    hit = next(c for c in charts if "Hit rate" in c["title"])
    assert {t["group"] for t in hit["traces"]} == {"A", "B"}  # the one both can know
    # Trace timing has no clock: its throughput is n/a, so only the emulated line is drawn.
    out = next(c for c in charts if "Output tokens/min/GPU" in c["title"])
    assert {t["group"] for t in out["traces"]} == {"B"}
