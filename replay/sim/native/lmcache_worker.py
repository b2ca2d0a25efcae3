"""Worker: LMCache's own storage code (its `LMCacheEngine` with the chunked token database and
the local CPU backend with its LRU), one request at a time, for the external store's oracle
(`replay.sim.native.lmcache_oracle`).

Runs inside the environment `scripts/setup_lmcache_cpu.sh` makes (`.venv-lmcache`: LMCache
0.5.6 beside a CPU torch), started by `replay.sim.native.worker.Worker` (engine "lmcache",
registered by `lmcache_oracle.py`); like the other workers it imports only the standard
library, LMCache (and its torch) and its sibling `wire.py`, and speaks the same protocol.

Commands:
  hello                    → LMCache's version
  init {config}            → a fresh engine: `chunk` tokens a chunk, room for `chunks` chunks
                             (`max_local_cpu_size` = chunks × a chunk's bytes), `decode`:
                             whether finished requests' output tokens are stored too (LMCache's
                             `save_decode_cache`); answers the chunks its CPU backend holds at
                             most, measured by filling a probe engine of the same settings
  run {rid, n} + ids       → looks the prompt ids[:n] up as vLLM's LMCache connector does
                             (`lookup(pin=True)`, which refreshes the hit chunks' recency, then
                             `lookup_unpin`), then stores the request's full chunks past the hit
                             (the prompt's, or prompt and output with `decode`), as the
                             connector's `wait_for_save` does; answers the prefix tokens LMCache
                             held (`held`) and the chunks it holds after the store (`chunks`)

What is LMCache's own code: the config, the chunked token database (prefix hashes of
`chunk`-token chunks), `LMCacheEngine.lookup` / `store` / `lookup_unpin`, the storage manager,
the local CPU backend, its allocator and its LRU eviction (`cache_policy` "LRU", the
default). Stood in: the GPU side, with LMCache's own `MockGPUConnector` (no bytes are copied:
the oracle says which tokens LMCache holds, not their contents or timing), and the vLLM
connector's bookkeeping (`integration/vllm/vllm_v1_adapter.py`: which tokens a request stores,
`from_request_tracker` and `wait_for_save`), written out in `Store.run`.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

try:  # imported as part of the package (tests, type checks)
    from replay.sim.native.wire import serve_engine
except ImportError:  # run as a script inside the engine's environment: sibling module
    from wire import serve_engine  # type: ignore[import-not-found,no-redef,unused-ignore]

HEAD_SIZE = 64  # one layer, K and V, one head of 64 fp16 values: 256 bytes a token


def _build(name: str, chunk: int, chunks: int, decode: bool) -> Any:
    import torch
    from lmcache.v1.cache_engine import LMCacheEngineBuilder
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.gpu_connector.mock_gpu_connector import MockGPUConnector
    from lmcache.v1.metadata import LMCacheMetadata

    shape = (1, 2, chunk, 1, HEAD_SIZE)
    chunk_bytes = 2 * chunk * HEAD_SIZE * 2  # K and V, fp16
    cfg = LMCacheEngineConfig.from_defaults(
        chunk_size=chunk,
        local_cpu=True,
        max_local_cpu_size=chunks * chunk_bytes / (1 << 30),
        save_unfull_chunk=False,  # the default: a partial last chunk is not stored
        save_decode_cache=decode,
    )
    meta = LMCacheMetadata(
        model_name="oracle",
        world_size=1,
        local_world_size=1,
        worker_id=0,
        local_worker_id=0,
        kv_dtype=torch.float16,
        kv_shape=shape,
        role="worker",
    )
    engine = LMCacheEngineBuilder.get_or_create(
        name, cfg, meta, MockGPUConnector(shape), lambda t, r: None, lambda o, r: o
    )
    engine.post_init()
    return engine


def _destroy(name: str) -> None:
    from lmcache.v1.cache_engine import LMCacheEngineBuilder

    LMCacheEngineBuilder.destroy(name)


def _backend(engine: Any) -> Any:
    return engine.storage_manager.storage_backends["LocalCPUBackend"]


class Store:
    """One LMCache engine and the vLLM connector's store rule around it."""

    made = 0

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.chunk = int(cfg["chunk"])
        self.decode = bool(cfg["decode"])
        chunks = int(cfg["chunks"])
        Store.made += 1
        self.capacity = self._probe(chunks)
        self.name = f"oracle-{Store.made}"
        self.engine = _build(self.name, self.chunk, chunks, self.decode)

    def _probe(self, chunks: int) -> int:
        """The chunks an engine of these settings holds at most: distinct chunks stored
        until its LRU starts evicting."""
        name = f"probe-{Store.made}"
        engine = _build(name, self.chunk, chunks, self.decode)
        try:
            most = 0
            for i in range(2 * chunks + 4):
                engine.store([1_000_000 + i] * self.chunk)  # a new first chunk each time
                held = len(_backend(engine).hot_cache)
                if held <= most:
                    break
                most = held
            return most
        finally:
            engine.close()
            _destroy(name)

    def run(self, rid: str, n: int, ids: list[int]) -> dict[str, Any]:
        import torch

        e = self.engine
        held = int(e.lookup(ids[:n], lookup_id=rid, pin=True))  # touches the hit chunks
        e.lookup_unpin(rid)
        # vllm_v1_adapter.py `from_request_tracker`: full chunks only (save_unfull_chunk
        # False), the prompt's, and the decode phase's only with save_decode_cache; the
        # leading tokens already saved (the hit, `num_saved_tokens`) are masked out
        end = (len(ids) if self.decode else n) // self.chunk * self.chunk
        if end > held:
            mask = torch.ones(end, dtype=torch.bool)
            mask[:held] = False
            e.store(ids[:end], mask=mask, req_id=rid)
        return {"held": held, "chunks": len(_backend(e).hot_cache)}

    def close(self) -> None:
        self.engine.close()
        _destroy(self.name)


def hello() -> dict[str, Any]:
    import lmcache

    return {"version": getattr(lmcache, "__version__", "unknown"), "python": sys.executable}


def _own_stdout() -> None:
    """The protocol owns standard output: anything a library prints goes to standard error."""
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(proto, write_through=True)
    os.environ.setdefault("LMCACHE_LOG_LEVEL", "WARNING")


def main() -> int:
    _own_stdout()
    current: list[Store] = []

    def init(config: dict[str, Any]) -> tuple[Store, dict[str, Any]]:
        while current:
            current.pop().close()
        store = Store(config)
        current.append(store)
        return store, {"capacity": store.capacity}

    rc = serve_engine(
        hello,
        init,
        {"run": lambda e, h, t: e.run(str(h["rid"]), int(h["n"]), t)},
    )
    while current:
        current.pop().close()
    return rc


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # LMCache's engine leaves non-daemon threads behind (found: a worker told to quit did
    # not exit), so the process ends here rather than waiting for them.
    os._exit(code)
