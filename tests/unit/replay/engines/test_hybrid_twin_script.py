"""scripts/hybrid_twin.py without an engine: its flag messages, and the figures it prints
(cliff, agreement, exactness, the clock fit) on small frames whose answers are known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.required import real_trace
from tests.scripts import load_script

twin = load_script("hybrid_twin")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--sessions", "2,x"], "--sessions '2,x': expected whole numbers"),
        (["--sessions", "0,4"], "--sessions '0,4': expected session counts of at least 1"),
        (["--seeds", "0"], "--seeds 0: expected at least 1"),
        (["--scale", "0"], "--scale 0: expected at least 1"),
        (["--blocks", "20"], "--blocks 20: expected at least 70 (one 16,384-token request"),
        (["--minutes", "nan"], "--minutes nan: expected a positive number of minutes"),
        (["--trace", "no/such.jsonl"], "--trace no/such.jsonl: no such file"),
        (["--engine", "no-such-engine"], "--engine: "),
    ],
)
def test_a_bad_flag_is_named_with_what_to_pass(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The flag under test comes last, so it wins over the defaults given first.
    rc = twin.main(["--trace", str(real_trace()), "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("hybrid_twin: ") and says in err, err
    assert "Traceback" not in err


def test_the_cliff_is_the_first_point_below_half_the_lightest() -> None:
    assert twin.cliff({2: 0.9, 4: 0.8, 8: 0.44, 12: 0.1}) == 8
    assert twin.cliff({2: 0.9, 4: 0.46}) is None  # not below half: no cliff in the sweep
    assert twin.cliff({2: 0.0, 4: 0.0}) is None  # nothing to halve
    assert twin.cliff({}) is None


def _frame(rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"session": s, "trajectory": "t", "agent": "main", "turn": t, "cached_tokens": c}
            for s, t, c in rows
        ]
    )


def test_agreement_counts_matched_requests_only() -> None:
    a = _frame([(0, 0, 0), (0, 1, 256), (0, 2, 512), (1, 0, 0)])
    b = _frame([(0, 0, 0), (0, 1, 256), (0, 2, 256)])  # session 1 not run by b
    share, matched = twin.agreement(a, b)
    assert matched == 3 and share == pytest.approx(2 / 3)
    share, matched = twin.agreement(a, _frame([(5, 0, 0)]))
    assert matched == 0 and np.isnan(share)


def test_exactness_compares_with_the_align_rule_ideal() -> None:
    df = pd.DataFrame({"cached_tokens": [0, 256, 512, 0], "rule_ideal_tokens": [0, 256, 768, None]})
    assert twin.exactness(df) == (2, 3)  # the request without an ideal is not counted


def test_the_clock_fit_recovers_a_linear_prefill_and_the_median_step() -> None:
    new = np.array([100, 500, 1000, 2000, 4000], float)
    df = pd.DataFrame(
        {
            "sent_s": 10.0,
            "first_token_s": 10.0 + 0.05 + 0.0012 * new,
            "prompt_tokens": new + 256,
            "cached_tokens": 256,
            "output_tokens": [11, 21, 1, 41, 11],
        }
    )
    df["done_s"] = df.first_token_s + 0.018 * (df.output_tokens - 1)
    clock = twin.fit_clock(df)
    assert clock["prefill_s_per_token"] == pytest.approx(0.0012)
    assert clock["ttft_intercept_s"] == pytest.approx(0.05)
    assert clock["decode_s_per_step"] == pytest.approx(0.018)
    with pytest.raises(twin.TwinError, match="too few requests to fit the clock"):
        twin.fit_clock(df.head(2))
