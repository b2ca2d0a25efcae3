"""`experiments/lru_ranking.py` (issue 22): every toggle is a rule switch each of its policies
takes, and a bad toggle or a missing trace says so."""

from __future__ import annotations

import sys

import pytest

from replay.sim.cache.policies import make_policy
from tests.scripts import load_experiment


@pytest.fixture(scope="module")
def lr():
    return load_experiment("lru_ranking", register=True)


def test_every_toggle_is_a_rule_every_ranked_policy_takes(lr, profile):
    names = [t.name for t in lr.TOGGLES]
    assert len(names) == len(set(names)) and names[0] == "baseline"
    for t in lr.TOGGLES:
        for p in lr.POLICIES:
            pol = make_policy(p, profile, **t.rules)
            assert all(pol.rules[k] == v for k, v in t.rules.items()), (t.name, p)


def test_an_unknown_toggle_and_a_missing_trace_are_named(lr, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lru_ranking.py", "--toggles", "baseline,nope"])
    with pytest.raises(SystemExit, match=r"unknown toggle nope \(known: baseline,"):
        lr.main()
    with pytest.raises(SystemExit, match=r"no trace at .*missing.jsonl \(pass --trace\)"):
        lr.load_real(str(tmp_path / "missing.jsonl"))
