"""The native policies' parts that need no vLLM: token ids drawn for lineage prefixes, where
the engine's code is looked for, and the messages when it cannot run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from replay.prompts import HIGH_RESERVED, LOW_RESERVED
from replay.sim.cache.keys import LineagePrefix, TokenPrefix
from replay.sim.cache.policies import POLICY_NAMES, make_policy
from replay.sim.native.tokens import TokenSource
from replay.sim.native.worker import ENV_PYTHON, NativeError, Worker, find_vllm


def test_lineage_ids_agree_exactly_where_the_lineage_shares():
    src = TokenSource(vocab_size=151_552)
    a = LineagePrefix(1, 500)
    b = LineagePrefix(2, 700, a, 321)  # the first 321 tokens of a, then its own
    c = LineagePrefix(3, 400, b, 390)  # 321 of a, 69 of b, then its own
    ia, ib, ic = (src.ids(s, 0, s.length) for s in (a, b, c))
    assert len(ia) == 500 and len(ib) == 700 and len(ic) == 400
    assert (ia[:321] == ib[:321]).all() and ia[321] != ib[321]
    assert (ib[:390] == ic[:390]).all() and ib[390] != ic[390]
    # any window gives the same ids as the whole
    assert (src.ids(c, 300, 395) == ic[300:395]).all()
    assert ia.min() >= LOW_RESERVED and ia.max() < 151_552 - HIGH_RESERVED
    # a different salt is a different run: nothing shared
    assert (TokenSource(151_552, salt=1).ids(a, 0, 500) != ia).mean() > 0.99


def test_token_prefix_ids_are_its_tokens():
    toks = list(range(1000, 1100))
    got = TokenSource(151_552).ids(TokenPrefix(toks), 10, 200)
    assert got.dtype == np.int32 and got.tolist() == toks[10:]


def test_native_policy_is_registered():
    assert "vllm-native" in POLICY_NAMES


def test_env_var_names_the_interpreter(monkeypatch):
    monkeypatch.setenv(ENV_PYTHON, sys.executable)
    assert find_vllm().how == ENV_PYTHON
    monkeypatch.setenv(ENV_PYTHON, "/nowhere/python")
    with pytest.raises(
        NativeError,
        match=r"REPLAY_VLLM_PYTHON names /nowhere/python, which "
        r"does not exist: run `bash scripts/setup_vllm_cpu.sh`",
    ):
        Worker.start()


def test_an_environment_without_vllm_names_the_setup_script():
    with pytest.raises(
        NativeError,
        match=r"cannot import vLLM: .*No module named 'vllm'.*"
        r"scripts/setup_vllm_cpu.sh",
    ):
        Worker.start(sys.executable)


def test_an_unsupported_version_is_refused(tmp_path: Path):
    """A real process answering the worker protocol as an old vLLM would."""
    fake = tmp_path / "python"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    print(json.dumps({'version': '0.10.1', 'fork_flags': []}), flush=True)\n"
    )
    fake.chmod(0o755)
    with pytest.raises(
        NativeError,
        match=r"has vLLM 0.10.1; the native policy is checked "
        r"against 0.32.x, 0.33.x: run `bash scripts/setup_vllm_cpu.sh`",
    ):
        Worker.start(str(fake))


def test_bad_options_name_themselves(profile):
    with pytest.raises(ValueError, match=r"policy 'vllm-native' has no option grid"):
        make_policy("vllm-native", profile, grid=3)


def test_simulate_says_what_to_install(small_corpus: Path, tmp_path: Path):
    env = {"REPLAY_VLLM_PYTHON": "/nowhere/python", "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "replay",
            "simulate",
            "--trace",
            str(small_corpus),
            "--policies",
            "vllm-native",
            "--sessions",
            "2",
            "--duration-min",
            "3",
            "--window",
            "1-3",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        env={**_pyenv(), **env},
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "/nowhere/python, which does not exist" in r.stderr
    assert "scripts/setup_vllm_cpu.sh" in r.stderr


def _pyenv() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME", "LANG")}


def test_engines_native_says_what_is_missing():
    r = subprocess.run(
        [sys.executable, "-m", "replay", "engines", "native", "--python", "/nowhere/python"],
        capture_output=True,
        text=True,
        env=_pyenv(),
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "--python names /nowhere/python, which does not exist" in r.stderr
    assert "scripts/setup_vllm_cpu.sh" in r.stderr


def test_sglang_native_is_registered_and_says_what_to_install(monkeypatch):
    assert "sglang-native" in POLICY_NAMES
    monkeypatch.setenv("REPLAY_SGLANG_PYTHON", "/nowhere/python")
    with pytest.raises(
        NativeError,
        match=r"REPLAY_SGLANG_PYTHON names /nowhere/python, which does not exist: "
        r"run `bash scripts/setup_vllm_cpu.sh --with-sglang`",
    ):
        Worker.start(engine="sglang")


def test_an_environment_without_sglang_names_the_setup_script():
    with pytest.raises(
        NativeError,
        match=r"cannot import SGLang: .*No package metadata was found for sglang.*"
        r"setup_vllm_cpu.sh --with-sglang",
    ):
        Worker.start(sys.executable, engine="sglang")


def test_sglang_pools_are_sized_from_memory():
    """GLM-5.3-Flash (2,531 blocks of 4,352 tokens, 5-block states) at SGLang's fallback
    mamba_full_memory_ratio 0.9: ⌊(2531·0.9/1.9 − 5)/5⌋ = 238 state slots, and the KV what is
    left after 239 states: 1,336 blocks."""
    from replay.sim.native.sglang_cache import pool_sizes

    assert pool_sizes(2531, 4352, 5) == (1336 * 4352, 238)
    assert pool_sizes(2531, 4352, 5, max_states=430) == ((2531 - 431 * 5) * 4352, 430)
    with pytest.raises(NativeError, match=r"mamba_full_memory_ratio must be positive, not -1"):
        pool_sizes(2531, 4352, 5, ratio=-1)
