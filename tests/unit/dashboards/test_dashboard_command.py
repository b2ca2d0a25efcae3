"""`replay dashboard`: argument checks, and a real start on 127.0.0.1 that prints its address."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.commands.dashboard import app_script, free_port, port_is_free, streamlit_command


def test_missing_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["dashboard", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "nope: no such folder" in result.output
    assert "run directories" in result.output


def test_a_file_given_for_the_folder_is_named_a_file(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x")
    result = CliRunner().invoke(app, ["dashboard", str(tmp_path / "f.txt")])
    assert result.exit_code == 2
    assert "f.txt: a file, not a folder" in result.output


def test_bad_or_busy_port_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["dashboard", str(tmp_path), "--port", "70000"])
    assert result.exit_code == 2 and "--port 70000" in result.output
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert not port_is_free(port)
        result = CliRunner().invoke(app, ["dashboard", str(tmp_path), "--port", str(port)])
    assert result.exit_code == 2 and "already in use" in result.output


def test_streamlit_command_is_local_headless_and_private(tmp_path: Path) -> None:
    cmd = streamlit_command(app_script(), tmp_path, 8765)
    opts = dict(zip(cmd[5:-2:2], cmd[6:-2:2], strict=True))
    assert opts["--server.address"] == "127.0.0.1"
    assert opts["--server.headless"] == "true"
    assert opts["--browser.gatherUsageStats"] == "false"
    assert opts["--server.port"] == "8765"
    assert cmd[-2:] == ["--", str(tmp_path)]  # the app reads the folder as its argument
    assert cmd[1:4] == ["-m", "dashboards.serve", "run"]  # streamlit, imports warmed first
    assert app_script().is_file()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _health(url: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            time.sleep(0.2)
    return False


@pytest.mark.timeout(120)
def test_starts_streamlit_and_prints_the_address(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "replay.cli", "dashboard", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, COLUMNS="200"),
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:(\d+))", first)
        assert match, first
        assert str(tmp_path.resolve()) in first
        assert _health(match.group(1), time.monotonic() + 60)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    # SIGTERM to the command stops the server it started: nothing listens there any more.
    # (Connecting, not binding: the closed server's sockets may linger in TIME_WAIT.)
    deadline = time.monotonic() + 15
    while _listening(int(match.group(2))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _listening(int(match.group(2)))


def test_free_port_is_bindable() -> None:
    assert port_is_free(free_port())


def test_serve_is_streamlit_after_preloading(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboards import serve

    monkeypatch.setattr(sys, "argv", list(sys.argv))  # serve.main rewrites it for streamlit
    assert serve.main(["--version"]) == 0
    assert "Streamlit, version" in capsys.readouterr().out
    assert all(name in sys.modules for name in serve.PRELOAD)


def test_sigkill_of_the_command_ends_its_streamlit_server(tmp_path: Path) -> None:
    """Issue 24: the server dies with the command even when the command cannot stop it
    (SIGKILL), so a new dashboard on that port starts."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "replay.cli", "dashboard", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, COLUMNS="200"),
    )
    assert proc.stdout is not None
    match = re.search(r"at (http://127\.0\.0\.1:(\d+))", proc.stdout.readline())
    assert match
    try:
        assert _health(match.group(1), time.monotonic() + 60)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    deadline = time.monotonic() + 15
    while _listening(int(match.group(2))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _listening(int(match.group(2)))
