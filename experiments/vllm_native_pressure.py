"""Experiment: our `vllm` model against vLLM's own KV cache manager (`vllm-native`) request
by request under pressure, one memory rule toggled at a time (issue 22, the pressure
clause; docs/native-policies.md "Under the demo's pressure").

    .venv/bin/python experiments/vllm_native_pressure.py                  # full-size synth, 48 sessions
    .venv/bin/python experiments/vllm_native_pressure.py --trace ../shared/traces/kvct-dev.jsonl.gz
    .venv/bin/python experiments/vllm_native_pressure.py --blocks 300 --sessions 8 \\
        --trace .corpus/synth-full-seed11.jsonl.gz                     # the held-out tight case

Trace timing, seed 0, 45 minutes; the native run takes 1-3 minutes (vLLM's manager in its
own process), each of ours a few seconds. The default corpus is the full-size synthesized
one `scripts/bench_native.py` uses (`.corpus/synth-full-seed0.jsonl.gz`, written on first
use); at 48 sessions its working set is 1.42 of the 2,531-block cache, the demo's pressure.

Printed per variant: the window's hit rate, cached tokens over the whole run beside vLLM's,
and how many requests get a different number of cached tokens than vLLM gives them. The
variants are the shipped rules and each rule of `replay/sim/cache/vllm_policy.py` set back to
its other value (rule 4's two stamps, rule 5's copies).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_pressure import main as compare

VARIANTS: dict[str, dict[str, Any]] = {
    "vllm (shipped)": {},
    "rule 4: prefill state stamped at the request's end": {"prefill_state_stamp": "end"},
    "rule 4: resumed-from state held to the request's end": {"pin_resumed_state": True},
    "rule 5: both copies kept at the end (vLLM's code)": {"cached_copies": True},
}


def main(argv: list[str] | None = None) -> int:
    return compare("vllm", VARIANTS, __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(main())
