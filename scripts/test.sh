#!/usr/bin/env bash
# Set up everything and run the whole test suite: lint (ruff), types (mypy), tests (pytest:
# unit, integration against the emulator and the real CPU vLLM, browser). Extra arguments go
# to pytest. Exit code 5 from pytest (no tests collected) is a failure, not a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test || exit 1

echo "== ruff"; .venv/bin/ruff check . || exit 1
echo "== mypy"; .venv/bin/mypy || exit 1
echo "== pytest"
# setup.sh --test installed the CPU vLLM: its tests must run, not skip.
export REPLAY_REQUIRE_VLLM=1
export REPLAY_REQUIRE_SGLANG=1  # ... and SGLang beside it (setup_vllm_cpu.sh --with-sglang)
# ... and the peer clients (.venv-peers): their tests must run too.
export REPLAY_REQUIRE_PEERS=1
# ... and smg, SGLang's router (.venv-smg, also setup_peers.sh): the router-agreement test.
export REPLAY_REQUIRE_SMG=1
# ... and built the compiled cache model (.mypyc/): the suite runs it, and checks that it does.
export REPLAY_REQUIRE_SIM_BUILD=1
# The slowest tests are printed at the end: CI keeps its run under 45 minutes by them.
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 "$@"
rc=$?
if [[ $rc == 5 ]]; then
  echo "pytest collected no tests: treating that as a failure"
  exit 1
fi
exit $rc
