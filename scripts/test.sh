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
# ... and LMCache's and Mooncake's own stores (.venv-lmcache, .venv-mooncake): the oracles.
export REPLAY_REQUIRE_LMCACHE=1
export REPLAY_REQUIRE_MOONCAKE=1
# ... and built the compiled cache model (.mypyc/): the suite runs it, and checks that it does.
export REPLAY_REQUIRE_SIM_BUILD=1
# The slowest tests are printed at the end: CI keeps its run under 45 minutes by them.
pytest_run() {
  .venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 "$@"
  local rc=$?
  if [[ $rc == 5 ]]; then
    echo "pytest collected no tests ($*): treating that as a failure"
    return 1
  fi
  return $rc
}
if [[ $# -gt 0 ]]; then
  pytest_run "$@"
  exit $?
fi
# The whole suite: the unit tests in parallel (pytest-xdist, one process a core, at most 4;
# they share no server, port or file), then the integration and browser tests in one process
# (they start engines, routers and browsers whose timings a second process would disturb).
procs=$(nproc 2>/dev/null || echo 2)
(( procs > 4 )) && procs=4
(( procs < 2 )) && procs=2
echo "-- unit tests, $procs processes"
pytest_run -n "$procs" tests/unit
unit_rc=$?
echo "-- integration and browser tests, one process"
pytest_run tests/integration tests/browser
rest_rc=$?
(( unit_rc != 0 )) && exit $unit_rc
exit $rest_rc
