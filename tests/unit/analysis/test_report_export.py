"""The static exporter's handling of its browser driver's logs (`analysis.report.export`);
the real export runs in tests/browser/test_report_browser.py."""

from __future__ import annotations

import logging
from pathlib import Path

import plotly.graph_objects as go
import pytest

from analysis.report import export
from analysis.report.export import _held_browser_logs, export_static


def _driver_logs_an_ignored_message() -> None:
    # What choreographer's pipe does with a browser message it cannot decode (its module,
    # imported with kaleido, made the logger).
    import choreographer.channels.pipe  # noqa: F401

    try:
        raise ValueError("Expecting property name enclosed in double quotes")
    except ValueError:
        logging.getLogger("choreographer.channels.pipe").exception(
            "JSONError decoding message. Ignoring"
        )


def test_the_drivers_traceback_is_held_not_printed(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with _held_browser_logs() as held:
        _driver_logs_an_ignored_message()
    assert capfd.readouterr().err == ""
    assert caplog.records == []  # not handed on to the root logger's handlers
    assert held == ["choreographer.channels.pipe: JSONError decoding message. Ignoring"]
    assert logging.getLogger("choreographer").propagate  # restored after
    assert not logging.getLogger("choreographer").handlers


def test_outside_an_export_the_drivers_logs_are_untouched(caplog: pytest.LogCaptureFixture) -> None:
    _driver_logs_an_ignored_message()
    assert [r.getMessage() for r in caplog.records] == ["JSONError decoding message. Ignoring"]


def test_a_failed_export_names_what_the_driver_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    def fails(figs: object, paths: object) -> None:
        _driver_logs_an_ignored_message()
        raise RuntimeError("the browser closed")

    monkeypatch.setattr(export, "find_browser", lambda: "/usr/bin/chromium")
    monkeypatch.setattr(export.pio, "write_images", fails)
    result = export_static({"tiny": go.Figure()}, tmp_path)
    assert result.skipped is not None
    assert "failed (the browser closed)" in result.skipped
    assert "its driver logged: choreographer.channels.pipe: JSONError" in result.skipped
    assert "Traceback" not in capfd.readouterr().err
