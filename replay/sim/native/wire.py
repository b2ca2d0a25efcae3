"""The native workers' wire protocol, one loop for all of them (`vllm_worker.py`,
`vllm_sched_worker.py`, `sglang_worker.py`). Standard library only: the workers run inside
the engines' own environment and import it as a sibling module.

Each command is one JSON line, followed by `ntok` little-endian int32 token ids when the
header says so; each answer is one JSON line. A handler's exception is answered as
`{"error": "Type: message"}` (the caller raises with it); a handler that returns None ends
the worker (`quit`).
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Callable
from typing import Any

Handler = Callable[[str, dict[str, Any], list[int]], "dict[str, Any] | None"]


def serve(handle: Handler) -> int:
    """Answer commands from standard input until it closes or `handle` returns None."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = inp.readline()
        if not line:
            return 0
        head = json.loads(line)
        tokens: list[int] = []
        ntok = int(head.get("ntok", 0))
        if ntok:
            a = array("i")
            a.frombytes(inp.read(4 * ntok))
            if sys.byteorder != "little":
                a.byteswap()
            tokens = a.tolist()
        try:
            ans = handle(head["cmd"], head, tokens)
            if ans is None:
                return 0
        except Exception as e:  # reported to the caller, which raises with the message
            ans = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(ans).encode() + b"\n")
        out.flush()


Command = Callable[[Any, dict[str, Any], list[int]], dict[str, Any]]

# The commands of a cache worker (`vllm_worker.py`, `sglang_worker.py`): one request's
# calls as `replay.sim.native.online.NativeCache` makes them, each its engine's method of the
# same name (`start` is told the sequence's total length; an engine may not need it).
CACHE_COMMANDS: dict[str, Command] = {
    "lookup": lambda e, h, t: e.lookup(h["rid"], t),
    "start": lambda e, h, t: e.start(h["rid"], h.get("total")),
    "decode": lambda e, h, t: e.decode(h["rid"], t),
    "free": lambda e, h, t: e.free(h["rid"]),
    "drop": lambda e, h, t: e.drop(h["rid"]),
    "stats": lambda e, h, t: e.stats(),
}


def serve_engine(
    hello: Callable[[], dict[str, Any]],
    init: Callable[[dict[str, Any]], tuple[Any, dict[str, Any]]],
    commands: dict[str, Command],
) -> int:
    """The commands every worker shares around its own: `hello` (versions), `init {config}`
    (builds the engine: `init` returns it and the answer), `quit`; any other command is
    looked up in `commands` and called with the engine, the header and the token ids. A
    command before `init` is refused, as is an unknown one."""
    engine: Any = None

    def handle(cmd: str, head: dict[str, Any], tokens: list[int]) -> dict[str, Any] | None:
        nonlocal engine
        if cmd == "hello":
            return hello()
        if cmd == "init":
            engine, answer = init(head["config"])
            return answer
        if engine is None:
            raise ValueError("send init first")
        if cmd == "quit":
            return None
        run = commands.get(cmd)
        if run is None:
            raise ValueError(f"unknown command {cmd!r}")
        return run(engine, head, tokens)

    return serve(handle)
