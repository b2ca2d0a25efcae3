"""Skip a test whose optional part is missing, unless the run requires that part.

`scripts/test.sh` installs the CPU vLLM and the peer clients, builds the compiled cache model, and
sets `REPLAY_REQUIRE_VLLM=1` / `REPLAY_REQUIRE_PEERS=1` / `REPLAY_REQUIRE_SIM_BUILD=1`: there a missing part is a failure, never a quiet skip."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

VLLM = "REPLAY_REQUIRE_VLLM"
SGLANG = "REPLAY_REQUIRE_SGLANG"  # SGLang beside the CPU vLLM (setup_vllm_cpu.sh --with-sglang)
PEERS = "REPLAY_REQUIRE_PEERS"
SIM_BUILD = "REPLAY_REQUIRE_SIM_BUILD"  # the compiled cache model (scripts/build_sim.py)


def missing(message: str, required_by: str = VLLM) -> NoReturn:
    """Fail when `required_by` is set to 1, skip otherwise; `message` says what is missing and
    how to install it."""
    if os.environ.get(required_by) == "1":
        pytest.fail(f"{message} — {required_by}=1 makes this a failure")
    pytest.skip(message)
