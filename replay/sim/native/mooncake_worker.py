"""Worker: Mooncake's own store (its `mooncake_master` service with the master's allocator,
leases and batch eviction, and a `MooncakeDistributedStore` client over TCP on localhost),
one request at a time, for the external store's `mooncake` oracle
(`replay.sim.native.mooncake_oracle`).

Runs inside the environment `scripts/setup_mooncake_cpu.sh` makes (`.venv-mooncake`:
mooncake-transfer-engine-non-cuda, with the libibverbs its binaries link against in
`lib/native`), started by `replay.sim.native.worker.Worker` (engine "mooncake", registered by
`mooncake_oracle.py`); like the other workers it imports only the standard library, Mooncake
and its sibling `wire.py`, and speaks the same protocol.

Commands:
  hello                  → Mooncake's version
  init {config}          → an empty store: `block` tokens a key, room for `blocks` blocks (a
                           state object is `state_blocks` blocks; `watermark`, the master's
                           eviction_high_watermark_ratio, its default 0.9); answers the blocks the
                           master's allocator holds at most (`capacity`), measured by filling
                           it with hard-pinned probe objects, which eviction never takes, and
                           the master's process id (`master`)
  run {rid, n, states} + ids
                         → looks the prompt ids[:n] up as vLLM's Mooncake store connector does
                           (`batch_is_exist` over its full blocks' prefix-hash keys, then the
                           state keys at the held blocks' ends), then puts the finished
                           request's full blocks (prompt and output) that the store lacks, and
                           a state object at each position in `states`; answers the prefix
                           tokens whose KV the store held (`held`), the deepest of them with a
                           state (`usable`) and the puts refused for want of room (`refused`)

What is Mooncake's own: the master (metadata, the offset allocator over the client's mounted
segment, `PutStart` refusing a put with no room and asking for eviction, the eviction thread
every 10 ms with its high watermark and ratio, `BatchEvict` taking the objects whose lease
ran out first), the client, its transfer engine (TCP) and `batch_is_exist`, which renews the
read lease eviction orders by (as a finished put does). Stood in: the engine (which keys and states are written: the
oracle's caller says, as our model writes them) and time: the master runs with a lease of
0 ms (a key's lease is the time it was last put or looked up, expired at once: eviction then
orders by that time alone, least recent first; Mooncake's default, 10 s, keeps anything looked up in the last 10
seconds), and after each put the worker waits for the eviction thread to act on it (reading
the master's metrics), as if puts came slower than the thread's 10 ms turns.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

try:  # imported as part of the package (tests, type checks)
    from replay.sim.native.wire import serve_engine
except ImportError:  # run as a script inside the engine's environment: sibling module
    from wire import serve_engine  # type: ignore[import-not-found,no-redef,unused-ignore]

SEGMENT = 64 << 20  # the client's mounted segment (Mooncake's minimum is 16 MiB)
WATERMARK = 0.9  # eviction_high_watermark_ratio, Mooncake's default (`mooncake_master --help`)
SETTLE = 0.5  # seconds, at most, waiting for the eviction thread (every 10 ms) after a put
PACKAGE = "mooncake-transfer-engine-non-cuda"
NATIVE = Path(sys.prefix) / "lib" / "native"  # libibverbs and libnl (setup_mooncake_cpu.sh)


def _preload() -> None:
    """The binaries link libibverbs (RDMA's user library, unused over TCP); the setup script
    unpacks it beside the environment, loaded here before `mooncake.store` is imported."""
    for name in ("libnl-3.so.200", "libnl-route-3.so.200", "libibverbs.so.1"):
        path = NATIVE / name
        if path.is_file():
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """The master is killed if this worker dies (PR_SET_PDEATHSIG, Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)


class Master:
    """`mooncake_master` on free localhost ports, with its HTTP metadata server."""

    def __init__(self, watermark: float) -> None:
        import mooncake

        binary = Path(mooncake.__file__).with_name("mooncake_master")
        self.rpc, self.http, self.metrics = _free_port(), _free_port(), _free_port()
        env = {**os.environ, "LD_LIBRARY_PATH": str(NATIVE)}
        self.proc = subprocess.Popen(
            [
                str(binary),
                f"--rpc_port={self.rpc}",
                "--rpc_address=127.0.0.1",
                "--enable_http_metadata_server=true",
                "--http_metadata_server_host=127.0.0.1",
                f"--http_metadata_server_port={self.http}",
                "--metrics_host=127.0.0.1",
                f"--metrics_port={self.metrics}",
                "--default_kv_lease_ttl=0",
                f"--eviction_high_watermark_ratio={watermark}",
                "--rpc_thread_num=2",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sys.stderr,
            preexec_fn=_die_with_parent,  # the worker starts no thread before this
        )
        try:
            self._wait()
        except BaseException:
            self.stop()
            raise

    def _wait(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mooncake_master exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.rpc), timeout=0.2):
                    pass
                with socket.create_connection(("127.0.0.1", self.http), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mooncake_master did not listen within 30 s")

    def used(self) -> tuple[int, int]:
        """The master's allocated and total bytes (its metrics: `master_allocated_bytes`,
        `master_total_capacity_bytes`)."""
        url = f"http://127.0.0.1:{self.metrics}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        found = dict(
            line.split()[:2]
            for line in text.splitlines()
            if line.startswith(("master_allocated_bytes ", "master_total_capacity_bytes "))
        )
        return int(found["master_allocated_bytes"]), int(found["master_total_capacity_bytes"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _keys(ids: list[int], block: int) -> list[str]:
    """Prefix-hash keys of the full blocks of `ids` (each hashes its predecessor's key)."""
    out: list[str] = []
    prev = b""
    for i in range(len(ids) // block):
        chunk = b"".join(
            t.to_bytes(4, "little", signed=True) for t in ids[i * block : (i + 1) * block]
        )
        prev = hashlib.sha256(prev + chunk).digest()
        out.append("kv/" + prev.hex())
    return out


class Store:
    """One master and one client; `init` empties the store for each case."""

    def __init__(self, watermark: float) -> None:
        _preload()
        from mooncake.store import MooncakeDistributedStore

        self.watermark = watermark
        self.master = Master(watermark)
        self.client = MooncakeDistributedStore()
        rc = self.client.setup(
            "127.0.0.1",
            f"http://127.0.0.1:{self.master.http}/metadata",
            SEGMENT,
            16 << 20,
            "tcp",
            "",
            f"127.0.0.1:{self.master.rpc}",
        )
        if rc != 0:
            self.master.stop()
            raise RuntimeError(f"MooncakeDistributedStore.setup returned {rc}")
        self.block = 16
        self.state_blocks = 1
        self.value = b""
        self.capacities: dict[int, int] = {}

    def init(self, cfg: dict[str, Any]) -> dict[str, Any]:
        self.block = int(cfg["block"])
        self.state_blocks = int(cfg["state_blocks"])
        blocks = int(cfg["blocks"])
        size = SEGMENT // blocks // 4096 * 4096  # a block's bytes: the segment holds `blocks`
        self._clear()
        if size not in self.capacities:
            self.capacities[size] = self._probe(size)
        self.value = b"\0" * size
        return {"capacity": self.capacities[size], "bytes": size, "master": self.master.proc.pid}

    def _settle(self, refused: bool) -> None:
        """Waits for the master's eviction thread (every 10 ms) to act on this put: until the
        segment is back at or under the high watermark, or, after a put refused for want of
        room, until an eviction has freed some (at most `SETTLE` seconds: nothing evictable
        may be left). So eviction acts at once, as if puts came slower than the thread."""
        used, total = self.master.used()
        deadline = time.monotonic() + SETTLE
        start = used
        while time.monotonic() < deadline:
            if (refused and used < start) or (not refused and used <= self.watermark * total):
                return
            time.sleep(0.002)
            used, total = self.master.used()

    def _clear(self) -> None:
        self.client.remove_all(True)
        time.sleep(0.05)

    def _probe(self, size: int) -> int:
        """Hard-pinned objects of `size` bytes put until the allocator refuses one."""
        from mooncake.store import ReplicateConfig

        cfg = ReplicateConfig()
        cfg.with_hard_pin = True
        value = b"\0" * size
        n = 0
        while self.client.put(f"probe/{n}", value, cfg) == 0:
            n += 1
        self._clear()
        return n

    def run(self, n: int, states: list[int], ids: list[int]) -> dict[str, Any]:
        c, B = self.client, self.block
        keys = _keys(ids, B)
        prompt = keys[: n // B]
        found = c.batch_is_exist(prompt) if prompt else []
        held = next((i for i, f in enumerate(found) if f != 1), len(found))
        usable = 0
        if held:
            marks = c.batch_is_exist([f"state/{k}" for k in prompt[:held]])
            usable = max((i + 1 for i, f in enumerate(marks) if f == 1), default=0) * B
        refused = 0
        state = self.value * self.state_blocks
        puts = [(k, self.value) for k in keys[held:]]
        for p in states:
            if p % B or not 0 < p <= len(keys) * B:
                raise ValueError(f"a state at {p} is not at a full block's end")
            puts.append((f"state/{keys[p // B - 1]}", state))
        for k, v in puts:
            if c.put(k, v) != 0 and c.is_exist(k) != 1:
                refused += 1
                self._settle(refused=True)
            else:
                self._settle(refused=False)
        return {"held": held * B, "usable": usable, "refused": refused}

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            self.master.stop()


def hello() -> dict[str, Any]:
    from importlib.metadata import version

    return {"version": version(PACKAGE), "python": sys.executable}


def _own_stdout() -> None:
    """The protocol owns standard output: anything a library prints goes to standard error."""
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(proto, write_through=True)


def main() -> int:
    _own_stdout()
    current: list[Store] = []

    def init(config: dict[str, Any]) -> tuple[Store, dict[str, Any]]:
        mark = float(config.get("watermark", WATERMARK))
        if current and current[0].watermark != mark:  # a master flag: a new master
            current.pop().close()
        if not current:
            current.append(Store(mark))
        return current[0], current[0].init(config)

    try:
        return serve_engine(
            hello,
            init,
            {
                "run": lambda e, h, t: e.run(int(h["n"]), [int(p) for p in h["states"]], t),
            },
        )
    finally:
        while current:
            current.pop().close()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the client's threads are not daemons: end here, the master stopped
