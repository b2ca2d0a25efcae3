#!/usr/bin/env bash
# Install Mooncake's store (its master service `mooncake_master` and the
# `MooncakeDistributedStore` client) into its own virtual environment, .venv-mooncake, so the
# external store's `mooncake` oracle (replay/sim/native/mooncake_worker.py,
# scripts/mooncake_agreement.py, tests/integration/test_mooncake_oracle.py) can drive it on a
# machine without a GPU or RDMA: TCP on localhost.
#
# Which wheel: mooncake-transfer-engine-non-cuda (the same store without CUDA). The plain
# mooncake-transfer-engine 0.3.13.post1 links libcuda.so.1, libcudart.so.12 and libmlx5.so.1
# and does not import on a machine without the CUDA driver ("ImportError: libcuda.so.1:
# cannot open shared object file", with libibverbs present; `ldd .../mooncake/store.so`).
# Both link libibverbs.so.1 (RDMA's user library, unused over TCP), which is Debian's
# libibverbs1 with libnl-3-200 and libnl-route-3-200: fetched with `apt-get download` and
# unpacked into $VENV/lib/native (nothing is installed system-wide); the worker loads them from
# there and gives the master that LD_LIBRARY_PATH.
# Why a separate environment: the wheel brings its own binaries and aiohttp/msgpack pins; the
# project's environments stay as they are.
#
# Idempotent: a stamp file records a finished install of this exact version, so a rerun only
# checks and returns at once. Delete .venv-mooncake (or pass --force) to reinstall.
#
# Usage: bash scripts/setup_mooncake_cpu.sh [--force]
#   PYTHON=python3.11   interpreter used to create the environment (default: python3)
#   MOONCAKE_VENV       where to create it (default: .venv-mooncake)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.3.13.post1
VENV=${MOONCAKE_VENV:-.venv-mooncake}
PY=${PYTHON:-python3}
STAMP=$VENV/.installed-mooncake-$VERSION
DEBS=(libibverbs1 libnl-3-200 libnl-route-3-200)

force=0
for arg in "$@"; do
  case $arg in
    --force) force=1 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "setup_mooncake_cpu: unknown argument '$arg' (expected --force or --help)" >&2; exit 2 ;;
  esac
done

check() {
  # The check is the oracle's own worker: its hello names Mooncake's version, and an empty
  # store of 64 blocks is measured (a master started and stopped on free localhost ports).
  local ans
  ans=$(printf '%s\n' '{"cmd": "hello"}' \
    '{"cmd": "init", "config": {"block": 16, "blocks": 64, "state_blocks": 2}}' '{"cmd": "quit"}' \
    | timeout 120 "$VENV/bin/python" -u replay/sim/native/mooncake_worker.py 2>/dev/null \
    | tr '\n' ' ') || true
  if [[ $ans != *'"version": "'$VERSION'"'*'"capacity": 64'* ]]; then
    echo "setup_mooncake_cpu: Mooncake's store does not run in $VENV: $ans" >&2
    echo "setup_mooncake_cpu: see its error with: $VENV/bin/python -u replay/sim/native/mooncake_worker.py" >&2
    exit 1
  fi
}

if [[ $force == 0 && -f $STAMP ]]; then
  echo "setup_mooncake_cpu: mooncake $VERSION already installed in $VENV (stamp $STAMP)"
  check
  exit 0
fi

if [[ ! -x $VENV/bin/python ]]; then
  if ! command -v "$PY" >/dev/null 2>&1; then
    echo "setup_mooncake_cpu: PYTHON=$PY: no such interpreter; set PYTHON to a python3 (or unset it)" >&2
    exit 2
  fi
  echo "setup_mooncake_cpu: creating $VENV with $("$PY" --version 2>&1)"
  if ! "$PY" -m venv "$VENV"; then
    echo "setup_mooncake_cpu: cannot create $VENV (MOONCAKE_VENV); choose a folder that can be written" >&2
    exit 2
  fi
fi

echo "setup_mooncake_cpu: installing mooncake-transfer-engine-non-cuda==$VERSION into $VENV (about 150 MB)"
"$VENV/bin/python" -m pip install -q "mooncake-transfer-engine-non-cuda==$VERSION"

native=$VENV/lib/native
if [[ ! -f $native/libibverbs.so.1 ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  fetch() { (cd "$tmp" && apt-get download "${DEBS[@]}" >/dev/null 2>&1); }
  # A fresh machine's package lists may be empty: as root, update them once and retry.
  if ! fetch && ! { [[ $(id -u) == 0 ]] && apt-get update -qq >/dev/null 2>&1 && fetch; }; then
    echo "setup_mooncake_cpu: apt-get download ${DEBS[*]} failed; run 'apt-get update' first" >&2
    exit 1
  fi
  mkdir -p "$tmp/x" "$native"
  for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/x"; done
  find "$tmp/x" -name '*.so*' -exec cp -a {} "$native"/ \;
fi

check
rm -f "$VENV"/.installed-mooncake-*
touch "$STAMP"
echo "setup_mooncake_cpu: done; compare with: .venv/bin/python scripts/mooncake_agreement.py"
