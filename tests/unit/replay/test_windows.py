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
        ("abc", "--window abc: expected A-B in minutes of the run, e.g. 15-45"),
        ("45-15", "--window 45-15: need 0 ≤ A < B (minutes)"),
        ("nan-3", "need 0 ≤ A < B"),
        (True, "expected A-B"),
    ],
)
def test_bad_windows_name_the_flag(text: object, message: str) -> None:
    with pytest.raises(WindowError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_window_min(text, "--window")


def test_the_spec_field_parses_and_checks_the_window() -> None:
    """`WorkloadSpec.window` is the one typed value: text, a YAML pair or a tuple, in minutes;
    a bad one is refused by the field, named by whoever gave it."""
    from replay.runspec.fields import WorkloadSpec
    from replay.runspec.resolve import FLAGS, Layer, SpecError, build

    assert WorkloadSpec(window="15-45").window == WorkloadSpec(window=[15, 45]).window
    assert WorkloadSpec(window=(1, 2.5)).window == (1.0, 2.5)
    with pytest.raises(SpecError, match=r"^--window 9-3: need 0 ≤ A < B"):
        build(WorkloadSpec, [Layer(FLAGS, {"window": "9-3"})])
    with pytest.raises(SpecError, match=r"^--config r\.yaml: field 'window' x: expected A-B"):
        build(WorkloadSpec, [Layer("--config r.yaml", {"window": "x"})])


def test_a_window_after_the_run_says_both_flags() -> None:
    with pytest.raises(WindowError, match=r"ends after the run \(--duration-min 5\)"):
        resolve_window_min("15-45", 5)


def test_clip_to_covered_keeps_clips_or_refuses() -> None:
    """Issue 24: the one parser also fits a window to the time a run's data covers."""
    from replay.windows import WindowError, clip_to_covered

    assert clip_to_covered(60.0, 120.0, 180.0, "--window 1-2 min") == (60.0, 120.0, None)
    lo, hi, note = clip_to_covered(60.0, 6000.0, 180.0, "--window 1-100 min")
    assert (lo, hi) == (60.0, 180.0) and note is not None
    assert "ends after the data: clipped to 60-180 s" in note and "0-3 min (180 s)" in note
    with pytest.raises(WindowError, match="starts after the run ends"):
        clip_to_covered(300.0, 600.0, 180.0, "--window 5-10 min")
    kept = clip_to_covered(900.0, 2700.0, 180.0, "manifest config.window", refuse_past=False)
    assert kept[:2] == (900.0, 2700.0) and "nothing measured" in str(kept[2])


def test_an_end_too_large_for_seconds_is_refused_by_the_one_parser() -> None:
    """`0-1e308` is finite minutes but infinite seconds: every command's --window (and a
    config's `window:`) is refused here, as `0-inf` is."""
    with pytest.raises(WindowError, match=r"--window 0-1e308: B is too large to be a time"):
        parse_window_min("0-1e308")
    assert parse_window_min("0-1e300") == (0.0, 1e300)
