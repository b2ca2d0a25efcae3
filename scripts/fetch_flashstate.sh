#!/usr/bin/env bash
# Fetch and build FlashState (the system under test) at its pinned commit, for
# `replay engines launch flashstate-glm53-b200` on a GPU node (2×B200 for the paper's setup).
#
# What it does, in order:
#   1. clone FutureMLS-Lab/FlashStates and check out the pinned commit;
#   2. `git submodule update --init --recursive` (the repository carries the vLLM fork, branch
#      `flashstate`, as a submodule), then make sure the fork sits at its pinned commit;
#   3. create the virtual environment .venv-flashstate and pip-install the fork from source
#      (CUDA kernels are compiled: the fork adds in-chunk state export to the KDA kernel, so
#      vLLM's precompiled wheels do not fit; expect tens of minutes with MAX_JOBS cores);
#   4. check that the installed server knows the six FlashState flags the config passes.
# Nothing of the fork is copied into this repository: sources go under the environment folder
# (git-ignored), unless --dest says otherwise.
#
# The pins below must match configs/engines/flashstate-glm53-b200.yaml (a unit test checks):
# FlashStates e2ea9a7 and fork 3cfd432 are the commits the seed document read.
#
# Usage: bash scripts/fetch_flashstate.sh [--dry-run] [--dest DIR] [--venv DIR] [--jobs N]
#   --dry-run   print every step, run nothing (no network, no GPU needed)
#   --dest DIR  where to clone FlashStates (default: <venv>/src/FlashStates)
#   --venv DIR  environment to create (default: .venv-flashstate, what the config uses)
#   --jobs N    parallel compile jobs (MAX_JOBS; default: the number of CPUs)
#   PYTHON=python3.12   interpreter for the environment (default: python3; vLLM wants 3.10–3.13)
#   TORCH_CUDA_ARCH_LIST  GPU architectures to compile for (default: 10.0, i.e. B200)
set -euo pipefail
cd "$(dirname "$0")/.."

FLASHSTATES_REPO=https://github.com/FutureMLS-Lab/FlashStates.git
FLASHSTATES_COMMIT=e2ea9a7
FORK_REPO=FutureMLS-Lab/vllm
FORK_BRANCH=flashstate
FORK_COMMIT=3cfd432
FLAGS=(--mamba-frontier-checkpoint --mamba-prefill-export --prefix-cache-eviction
       --prefill-cost-coefficients --prefix-cache-leaf-last --prefix-cache-leaf-idle-seconds)

dry=0
VENV=.venv-flashstate
DEST=""
JOBS=$(nproc 2>/dev/null || echo 8)
while [[ $# -gt 0 ]]; do
  case $1 in
    --dry-run) dry=1 ;;
    --dest) DEST=${2:?--dest needs a folder}; shift ;;
    --venv) VENV=${2:?--venv needs a folder}; shift ;;
    --jobs) JOBS=${2:?--jobs needs a number}; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "fetch_flashstate: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
DEST=${DEST:-$VENV/src/FlashStates}
PY=${PYTHON:-python3}
export MAX_JOBS=$JOBS
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-10.0}
STAMP=$VENV/.installed-flashstate-$FLASHSTATES_COMMIT-$FORK_COMMIT

step() { echo; echo "== $*"; }
run() {
  echo "+ $*"
  if [[ $dry == 0 ]]; then "$@"; fi
}

if [[ $dry == 0 && -f $STAMP ]]; then
  echo "fetch_flashstate: FlashStates $FLASHSTATES_COMMIT with fork $FORK_COMMIT already installed in $VENV"
  exit 0
fi

step "0. prerequisites: git, $PY, a CUDA toolkit (nvcc) and NVIDIA GPUs"
if [[ $dry == 0 ]]; then
  command -v git >/dev/null || { echo "fetch_flashstate: git is required" >&2; exit 1; }
  command -v "$PY" >/dev/null || { echo "fetch_flashstate: $PY not found (set PYTHON=)" >&2; exit 1; }
  command -v nvcc >/dev/null || echo "fetch_flashstate: warning: nvcc not on PATH; the CUDA build needs a CUDA toolkit (CUDA_HOME)"
  command -v nvidia-smi >/dev/null || echo "fetch_flashstate: warning: nvidia-smi not found; the server will need GPUs to run"
fi

step "1. clone $FLASHSTATES_REPO at $FLASHSTATES_COMMIT into $DEST"
if [[ $dry == 1 || ! -d $DEST/.git ]]; then
  run git clone "$FLASHSTATES_REPO" "$DEST"
fi
run git -C "$DEST" fetch --quiet origin
run git -C "$DEST" checkout --quiet --detach "$FLASHSTATES_COMMIT"

step "2. submodules (the vLLM fork $FORK_REPO, branch $FORK_BRANCH, pinned $FORK_COMMIT)"
run git -C "$DEST" submodule update --init --recursive
# The fork's path inside FlashStates is read from .gitmodules (the entry whose URL names it).
FORK_PATH=vllm
if [[ $dry == 0 ]]; then
  FORK_PATH=$(git -C "$DEST" config -f .gitmodules --get-regexp 'submodule\..*\.url' \
    | awk -v repo="$FORK_REPO" 'index($2, repo) {sub(/^submodule\./, "", $1); sub(/\.url$/, "", $1); print $1; exit}')
  [[ -n $FORK_PATH ]] || { echo "fetch_flashstate: no submodule of $DEST points at $FORK_REPO (.gitmodules)" >&2; exit 1; }
  FORK_PATH=$(git -C "$DEST" config -f .gitmodules --get "submodule.$FORK_PATH.path")
else
  echo "   (the fork's path is read from $DEST/.gitmodules; '$FORK_PATH' below stands for it)"
fi
FORK_DIR=$DEST/$FORK_PATH
if [[ $dry == 1 ]] || ! git -C "$FORK_DIR" rev-parse HEAD | grep -q "^$FORK_COMMIT"; then
  echo "   the submodule must be at $FORK_COMMIT; checking it out explicitly"
  run git -C "$FORK_DIR" fetch --quiet origin "$FORK_BRANCH"
  run git -C "$FORK_DIR" checkout --quiet --detach "$FORK_COMMIT"
fi

step "3. build the fork into $VENV (MAX_JOBS=$MAX_JOBS, TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST)"
if [[ $dry == 1 || ! -x $VENV/bin/python ]]; then
  run "$PY" -m venv "$VENV"
fi
run "$VENV/bin/python" -m pip install --upgrade pip
# From source, not VLLM_USE_PRECOMPILED: the fork changes CUDA kernels.
run "$VENV/bin/python" -m pip install -e "$FORK_DIR"

step "4. check the server knows FlashState's flags"
echo "+ $VENV/bin/python -m vllm.entrypoints.openai.api_server --help=all | grep each of: ${FLAGS[*]}"
if [[ $dry == 0 ]]; then
  help=$("$VENV/bin/python" -m vllm.entrypoints.openai.api_server --help=all 2>/dev/null || true)
  missing=()
  for f in "${FLAGS[@]}"; do grep -q -- "$f" <<<"$help" || missing+=("$f"); done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "fetch_flashstate: the installed server lacks ${missing[*]}: is $FORK_DIR the flashstate fork at $FORK_COMMIT?" >&2
    exit 1
  fi
  touch "$STAMP"
fi

echo
if [[ $dry == 1 ]]; then
  echo "fetch_flashstate: dry run, nothing was run. After a real run, start it on a 2×B200 node with:"
else
  echo "fetch_flashstate: done. Start it on a 2×B200 node with:"
fi
echo "  replay engines launch flashstate-glm53-b200 --model <GLM-5.3-Flash NVFP4 id or path>"
