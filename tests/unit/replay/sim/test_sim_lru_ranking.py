"""`scripts/lru_ranking.py` (issue 22): every toggle is a rule switch each of its policies
takes, and a bad toggle or a missing trace says so."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from replay.sim.policies import make_policy

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"


@pytest.fixture(scope="module")
def lr():
    spec = importlib.util.spec_from_file_location("lru_ranking", SCRIPTS / "lru_ranking.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["lru_ranking"] = mod
    spec.loader.exec_module(mod)
    return mod


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
