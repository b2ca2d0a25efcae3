#!/usr/bin/env bash
# Install the peer benchmark clients the test suite runs against the emulators into their own
# virtual environment, .venv-peers: aiperf (NVIDIA) and GuideLLM (vLLM project). Their pins
# clash with the project's (aiperf pins orjson ~=3.11, plotly ~=6.4, kaleido ~=1.2, rich ~=14.1;
# the project uses newer ones), so they cannot live in .venv.
#
# GuideLLM imports torch unconditionally (guidellm/data/loaders/torch.py) but uses it only for
# multimodal data; PyPI's Linux torch drags ~3 GB of CUDA libraries. So GuideLLM is installed
# without its dependencies, its other dependencies are installed explicitly, and torch is borrowed
# from the CPU vLLM environment (.venv-vllm, scripts/setup_vllm_cpu.sh) through a .pth file that
# appends that environment's site-packages to the END of sys.path (the peers' own packages win).
# Without .venv-vllm, GuideLLM is left out and its test skips, saying why.
#
# The Shepherd Model Gateway (smg, SGLang's router: scripts/router_agreement.py puts it in front
# of emulator replicas) goes into its own small environment, .venv-smg: it brings grpcio,
# grpcio-health-checking and protobuf, which aiperf's and GuideLLM's pins must not be made to
# share, and the router needs nothing else from the peers. Its stamp is its own, so adding or
# bumping it never reinstalls the peers.
#
# Idempotent: a stamp file records a finished install of these exact versions.
#
# Usage: bash scripts/setup_peers.sh [--force]
#   PYTHON=python3.11   interpreter used to create the environment (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."

AIPERF_VERSION=${AIPERF_VERSION:-0.13.0}
GUIDELLM_VERSION=${GUIDELLM_VERSION:-0.8.1}
VENV=.venv-peers
PY=${PYTHON:-python3}
STAMP=$VENV/.installed-aiperf-$AIPERF_VERSION-guidellm-$GUIDELLM_VERSION
[[ -d .venv-vllm ]] || STAMP=$STAMP-no-torch

force=0
for arg in "$@"; do
  case $arg in
    --force) force=1 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "setup_peers: unknown argument '$arg' (expected --force or --help)" >&2; exit 2 ;;
  esac
done

# smg: pinned, since its entry points' defaults differ between versions (issue 26).
SMG_VERSION=${SMG_VERSION:-1.13.0}
SMG_VENV=.venv-smg
SMG_STAMP=$SMG_VENV/.installed-smg-$SMG_VERSION
if [[ $force == 1 || ! -f $SMG_STAMP ]]; then
  [[ -x $SMG_VENV/bin/python ]] || $PY -m venv "$SMG_VENV"
  echo "setup_peers: installing smg==$SMG_VERSION into $SMG_VENV"
  "$SMG_VENV/bin/python" -m pip install -q --upgrade pip
  "$SMG_VENV/bin/python" -m pip install -q "smg==$SMG_VERSION"
  "$SMG_VENV/bin/smg" --version >/dev/null \
    || { echo "setup_peers: $SMG_VENV/bin/smg does not run" >&2; exit 1; }
  rm -f "$SMG_VENV"/.installed-smg-*
  touch "$SMG_STAMP"
else
  echo "setup_peers: smg==$SMG_VERSION already in $SMG_VENV"
fi

if [[ $force == 0 && -f $STAMP ]]; then
  echo "setup_peers: aiperf==$AIPERF_VERSION, guidellm==$GUIDELLM_VERSION already in $VENV"
  exit 0
fi

if [[ ! -x $VENV/bin/python ]]; then
  echo "setup_peers: creating $VENV with $($PY --version 2>&1)"
  $PY -m venv "$VENV"
fi
echo "setup_peers: installing aiperf==$AIPERF_VERSION into $VENV (a few minutes)"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "aiperf==$AIPERF_VERSION"
"$VENV/bin/python" -m aiperf --help >/dev/null
touch "$VENV/.installed-aiperf-$AIPERF_VERSION"

# GuideLLM: its dependencies as its wheel lists them (0.8.1), less torch.
echo "setup_peers: installing guidellm==$GUIDELLM_VERSION into $VENV (torch borrowed from .venv-vllm)"
"$VENV/bin/python" -m pip install -q --no-deps "guidellm==$GUIDELLM_VERSION"
"$VENV/bin/python" -m pip install -q "click~=8.4.0" "culsans~=0.10.0" "datasets>=5.0.1" \
  eval_type_backport faker "ftfy>=6.0.0" "httpx[http2]<1.0.0" loguru msgpack protobuf \
  "pydantic>=2.11.7" "pydantic-settings>=2.0.0" "pyyaml>=6.0.0" sanic tabulate transformers \
  "uvloop>=0.18" "more-itertools>=10.8.0" "typing-extensions>=4.15.0" "websockets>=13.0" \
  "rich~=14.1"  # aiperf's pin; GuideLLM takes any rich
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [[ -d .venv-vllm ]]; then
  vsite=$(.venv-vllm/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  borrowed="$site/../borrowed-torch"
  rm -rf "$borrowed"
  mkdir -p "$borrowed"
  # Only torch and what it imports that the peers lack: nothing else of vLLM's leaks in.
  for name in torch torchgen functorch sympy mpmath networkx; do
    for path in "$vsite/$name" "$vsite/$name"-*.dist-info; do
      [[ -e $path ]] && ln -sfn "$path" "$borrowed/$(basename "$path")"
    done
  done
  (cd "$borrowed" && pwd -P) > "$site/zz-borrowed-torch.pth"
  PYTHONPATH= "$VENV/bin/python" -c "import guidellm.benchmark, torch" \
    || { echo "setup_peers: guidellm does not import" >&2; exit 1; }
else
  echo "setup_peers: .venv-vllm is missing, so GuideLLM has no torch; its test will skip"
fi

rm -f "$VENV"/.installed-aiperf-*-guidellm-*
touch "$STAMP"
