"""A trace long enough that simulating it keeps a command busy for minutes (50 sessions × 300
minutes of it), for the tests that stop a running command and look at what it left: each of
`sessions` conversations has `turns` requests 2 s apart, each growing the last by one block."""

from __future__ import annotations

import json
from pathlib import Path


def write_long_trace(path: Path, sessions: int = 40, turns: int = 300) -> Path:
    lines = []
    for s in range(sessions):
        reqs = [{"t": 2.0 * k, "type": "s", "in": 640 + 64 * k, "out": 4,
                 "hash_ids": list(range(s * 1000, s * 1000 + 10 + k))} for k in range(turns)]  # fmt: skip
        lines.append(json.dumps({"id": f"s{s}", "block_size": 64, "hash_id_scope": "local",
                                 "requests": reqs}))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path
