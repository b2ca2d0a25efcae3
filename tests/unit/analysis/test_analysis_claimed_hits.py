"""The false-hit check (`analysis.claimed_hits`) on synthetic records with a known prefill
rate: lies are found, honest hits are not flagged, and too little data says why."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.claimed_hits import check_engine, clear_queue, theil_sen_slope
from analysis.summary import engine_warnings

RATE = 10_000.0  # tokens per second of prefill
BASE = 0.05  # seconds of queueing + the first decode step


def _records(lies: set[int], n: int = 60, seed: int = 0) -> pd.DataFrame:
    """`n` requests over 4 sessions, one at a time (3 s apart, each TTFT under 2.1 s): each
    session's first is cold, the rest claim most of their prompt cached; the requests in
    `lies` claim a hit but take the full prefill."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        session, cold = i % 4, i < 8
        prompt = int(rng.integers(4_000, 20_000))
        cached = 0 if cold else prompt - int(rng.integers(200, 1_000))
        computed = prompt if (cold or i in lies) else prompt - cached
        ttft = BASE + computed / RATE + float(rng.normal(0, 0.005))
        sent = 3.0 * i
        rows.append(
            {
                "engine": "e",
                "session": session,
                "sent_s": sent,
                "first_token_s": sent + ttft,
                "prompt_tokens": prompt,
                "cached_tokens": cached,
                "status": "ok",
            }
        )
    return pd.DataFrame(rows)


def test_theil_sen_ignores_a_minority_of_outliers() -> None:
    x = np.arange(20, dtype=float)
    y = 2 * x + 1
    y[[3, 9, 15]] += 50
    assert theil_sen_slope(x, y) == 2.0
    assert np.isnan(theil_sen_slope(np.ones(3), np.arange(3.0)))


def test_every_lie_is_found_and_no_honest_hit_is_flagged() -> None:
    lies = {10, 17, 23, 31, 40, 41, 55}
    got = check_engine(_records(lies))
    flagged = set(got.flags.index[got.flags["false_hit"]])
    assert flagged == lies
    ev = got.evidence
    assert ev["false_hits"] == len(lies) and ev["flagged"] is True
    assert ev["assessed"] == ev["claimed_hits"] == 52
    assert abs(1 / ev["prefill_s_per_token"] - RATE) / RATE < 0.05
    row = got.flags.loc[10]
    assert row["expected_full_s"] - row["expected_hit_s"] > 0.3


def test_an_honest_engine_has_no_false_hits() -> None:
    got = check_engine(_records(set(), seed=3))
    assert got.false_hits == 0 and got.evidence["flagged"] is False
    assert not got.flags["false_hit"].any()


def test_a_claim_smaller_than_the_noise_is_not_judged() -> None:
    df = _records({20})
    df.loc[20, "cached_tokens"] = 10  # 1 ms of claimed saving: below 4 sigmas of 5 ms
    got = check_engine(df)
    assert not got.flags.loc[20, "assessed"] and not got.flags.loc[20, "false_hit"]


def test_too_few_cold_requests_say_why() -> None:
    df = _records(set())
    df = df[df.index >= 6]  # 2 cold requests left
    got = check_engine(df)
    assert got.false_hits is None
    assert "prefill rate needs 4" in got.evidence["reason"]
    assert not got.flags["false_hit"].any()


def test_cold_requests_of_one_size_give_no_rate() -> None:
    df = _records(set())
    df.loc[df.index < 8, ["prompt_tokens", "cached_tokens"]] = [1000, 500]
    got = check_engine(df)
    assert got.false_hits is None and "all one size" in got.evidence["reason"]


def test_failed_requests_are_left_out() -> None:
    df = _records({12})
    df.loc[12, "status"] = "error"
    df.loc[13, "first_token_s"] = np.nan
    got = check_engine(df)
    assert got.false_hits == 0
    assert not got.flags.loc[[12, 13], "assessed"].any()


def test_false_hits_raise_a_warning() -> None:
    row = {"false_hits": 3, "claimed_hits": {"assessed": 40}}
    (w,) = engine_warnings("vllm", row)
    assert w.metric == "false_hits" and w.severity == "warning"
    assert "3 of 40 judged cache hits" in w.text and "TTFT of a full prefill" in w.text
    assert engine_warnings("vllm", {"false_hits": 0}) == []


def test_a_hit_that_waited_behind_an_earlier_prefill_is_not_judged() -> None:
    """An honest hit sent while a cold request's prefill runs waits for it: its TTFT is
    that of a full prefill though nothing was recomputed. Judged before, flagged as a lie
    (the embedded default's emulated run flagged 12-16% of an honest engine's hits so)."""
    df = _records(set())
    cold = 4  # a cold request of session 0 (20,000 tokens: ~2 s of prefill)
    df.loc[cold, ["prompt_tokens", "cached_tokens"]] = [20_000, 0]
    df.loc[cold, "first_token_s"] = df.loc[cold, "sent_s"] + BASE + 2.0
    hit = 40
    df.loc[hit, "sent_s"] = df.loc[cold, "sent_s"] + 0.1  # sent behind it
    df.loc[hit, "first_token_s"] = df.loc[cold, "first_token_s"] + 0.05
    got = check_engine(df)
    assert not got.flags.loc[hit, "assessed"] and got.false_hits == 0
    assert got.evidence["clear_queue_requests"] == len(df) - 1


def test_the_queue_is_each_engines_and_replicas_own() -> None:
    df = pd.DataFrame(
        {
            "engine": ["a", "a", "b", "a", "a"],
            "replica": ["0", "1", "0", "0", "0"],
            "sent_s": [0.0, 0.5, 0.5, 0.5, 3.0],
            "first_token_s": [2.0, 1.0, 1.0, 2.5, np.nan],
            "done_s": [4.0, 2.0, 2.0, 3.0, 9.0],
        }
    )
    # a/0 at 0.5 waits behind a/0 at 0 (first token 2.0); a/0 at 3.0, after every wait, is
    # clear; other replicas and engines are not in its queue.
    assert clear_queue(df).tolist() == [True, True, True, False, True]
    df.loc[0, "first_token_s"] = np.nan  # no first token: it waited until it ended (4.0)
    assert clear_queue(df).tolist() == [True, True, True, False, False]
    df.loc[3, "sent_s"] = 0.0  # sent at the same instant: each is ahead of the other
    assert clear_queue(df).tolist()[:4] == [False, True, True, False]
