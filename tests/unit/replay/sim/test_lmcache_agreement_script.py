"""scripts/lmcache_agreement.py refuses bad arguments with one line naming the flag, before it
starts LMCache, a missing LMCache environment is one line naming the setup script, and the
oracle's model side holds what rule 5 says (so these run without `.venv-lmcache`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from replay.sim.native.host_oracle import B, conversations
from replay.sim.native.lmcache_oracle import ENGINE, Setup, run_model, written
from replay.sim.native.worker import NativeError, find_engine
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[4]
script = load_script("lmcache_agreement")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--seeds", "0"], "error: --seeds 0: expected at least 1"),
        (
            ["--python", "no/such/python"],
            "error: --python names no/such/python, which does not exist: run `bash "
            "scripts/setup_lmcache_cpu.sh`",
        ),
    ],
)
def test_bad_arguments_are_refused_naming_the_flag(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert script.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(says)
    assert "\n" not in err


def test_the_lmcache_environment_is_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """LMCache is looked for in `.venv-lmcache`, never in vLLM's environment."""
    monkeypatch.setenv("REPLAY_LMCACHE_PYTHON", "no/such/python")
    with pytest.raises(NativeError, match="REPLAY_LMCACHE_PYTHON names no/such/python"):
        find_engine(ENGINE)
    monkeypatch.delenv("REPLAY_LMCACHE_PYTHON")
    try:
        found = find_engine(ENGINE)
    except NativeError as e:  # not installed here: the message names the setup script
        assert "scripts/setup_lmcache_cpu.sh" in str(e)
        assert ".venv-lmcache" in str(e)
    else:
        assert found.how in (".venv-lmcache", "this environment")


def test_an_lmcache_store_serves_a_hybrid_resume_nothing() -> None:
    """KV only (rule 5): where a Mooncake store of the same room serves tokens, ours with
    `lmcache` serves none, though it holds the KV (LMCache's engine has no place for a state)."""
    reqs = conversations(np.random.default_rng(0))
    s = Setup(40, B, 1024, True)
    lm = run_model(reqs, s, 1024, "lmcache")
    assert sum(h.served for h in lm) == 0
    assert sum(h.store for h in lm) > 0
    assert sum(h.served for h in run_model(reqs, s, 1024, "mooncake")) > 0


def test_the_write_rule_counts_whole_chunks_of_earlier_prompts() -> None:
    """`written`: a continuation finds its parent's prompt in whole chunks, its output only
    when outputs are stored; a first request finds nothing."""
    reqs = conversations(np.random.default_rng(0))
    prompts, outputs = written(reqs, B, False), written(reqs, B, True)
    assert prompts[0] == outputs[0] == 0
    for i, r in enumerate(reqs):
        assert prompts[i] % B == 0 and prompts[i] <= outputs[i] <= r.n
        if r.parent >= 0:
            p = reqs[r.parent]
            assert prompts[i] >= p.n // B * B
            assert outputs[i] >= min(p.n + p.out, r.n) // B * B


@pytest.mark.parametrize("store", ["lmcache", "mooncake"])
@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {"PYTHON": "no-such-python", "{STORE}_VENV": "{tmp}/venv"},
            "setup_{store}_cpu: PYTHON=no-such-python: no such interpreter",
        ),
        (
            {"{STORE}_VENV": "/proc/no-venv"},
            "setup_{store}_cpu: cannot create /proc/no-venv ({STORE}_VENV); choose a folder",
        ),
    ],
)
def test_the_setup_script_refuses_a_bad_interpreter_or_folder(
    tmp_path: Path, store: str, env: dict[str, str], says: str
) -> None:
    """Both stores' setup scripts. Before: bash's 'No such file or directory' and exit 127,
    or Python's, exit 1."""
    names = {"store": store, "STORE": store.upper(), "tmp": str(tmp_path)}
    given = {k.format(**names): v.format(**names) for k, v in env.items()}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / f"setup_{store}_cpu.sh")],
        capture_output=True, text=True, env={**os.environ, **given}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and says.format(**names) in done.stderr, done.stderr
    assert not (tmp_path / "venv").exists()
