"""The one window parser: minutes on every command, the last two thirds by default."""

from __future__ import annotations

import pytest

from replay.windows import WindowError, parse_window_min, resolve_window_min, seconds


def test_forms_and_default() -> None:
    assert parse_window_min("15-45") == parse_window_min([15, 45]) == (15.0, 45.0)
    lo, hi, used = resolve_window_min(None, 45)
    assert (lo, hi) == (15.0, 45.0) and "none given: the last two thirds" in used
    assert resolve_window_min(None, 5)[:2] == pytest.approx((5 / 3, 5.0))
    assert seconds((15, 45)) == (900.0, 2700.0)
    assert resolve_window_min("1-2", 5, "--window")[2] == "window 1-2 min (--window)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", "--window 'abc': expected A-B in minutes of the run, e.g. 15-45"),
        ("45-15", "--window 45-15: need 0 ≤ A < B (minutes)"),
        ("nan-3", "need 0 ≤ A < B"),
        (True, "expected A-B"),
    ],
)
def test_bad_windows_name_the_flag(text: object, message: str) -> None:
    with pytest.raises(WindowError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_window_min(text, "--window")


def test_a_window_after_the_run_says_both_flags() -> None:
    with pytest.raises(WindowError, match=r"ends after the run \(--duration-min 5\)"):
        resolve_window_min("15-45", 5)
