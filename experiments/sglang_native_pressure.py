"""Experiment: our `sglang` model against SGLang 0.5.22's own hybrid radix cache
(`sglang-native`) request by request under pressure, one rule toggled at a time (issue 22,
the pressure clause; docs/native-policies.md "SGLang under the demo's pressure").

    .venv/bin/python experiments/sglang_native_pressure.py --trace ../shared/traces/kvct-dev.jsonl.gz
    .venv/bin/python experiments/sglang_native_pressure.py --minutes 15    # full-size synth, 48 sessions

Trace timing, seed 0. SGLang's cache runs in its own process with page size 1 (one KV slot
per token), so the full-size synthesized corpus (`.corpus/synth-full-seed0.jsonl.gz`, the one
`experiments/vllm_native_pressure.py` uses; written on first use) at 48 sessions takes it tens
of minutes; `--minutes` replays a shorter run (window: its last two thirds). kvct-dev at 48
sessions takes a few minutes. Each of our runs takes seconds.

Printed per variant: the window's hit rate, cached tokens over the whole run beside
SGLang's, and how many requests get a different number of cached tokens than SGLang gives
them. The variants are the shipped rules and each holding rule of `replay/sim/cache/sglang_policy.py`
set to its other value (rule 6: what a running request locks).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_pressure import main as compare

VARIANTS: dict[str, dict[str, Any]] = {
    "sglang (shipped)": {},
    "rule 6: the state resumed from not locked": {"pin_resumed_state": False},
    "rule 6: the latest prefill state not locked to the end": {"hold_chunk_state": False},
}


def main(argv: list[str] | None = None) -> int:
    return compare("sglang", VARIANTS, __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(main())
