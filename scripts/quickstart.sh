#!/usr/bin/env bash
# Set up the project (.venv) and run the main job: the embedded default — three engine
# emulators (flashstate, vllm, sglang) on loopback replaying the bundled sample trace, ending
# with a side-by-side table and the run directory's path. No GPU needed. Extra arguments go
# to `replay run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/replay run --engines flashstate,vllm,sglang "$@"
