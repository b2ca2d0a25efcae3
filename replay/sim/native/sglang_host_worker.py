"""Worker: SGLang 0.5.22's HiCache (its `UnifiedRadixCache` with a host KV pool and a host
Mamba pool, `HybridCacheController`) on the CPU, one request at a time, for the host tier's
oracle (`replay.sim.native.hicache_oracle`).

Runs inside the environment where SGLang is importable (`.venv-vllm`), started by
`replay.sim.native.worker.Worker` (engine "sglang-host", registered by `hicache_oracle.py`);
like `sglang_worker.py`, whose engine it extends, it imports only the standard library, torch,
SGLang and its siblings.

What is SGLang's own code: the radix tree and its FULL and MAMBA components (what a match
finds on the device and in the host, `host_hit_length`, `mamba_host_hit_length`), the write
policy (`write_through`, its default: a node is backed up to the host as it is inserted),
the host pools (`MHATokenToKVPoolHost`, `MambaPoolHost`, sized by `--hicache-ratio` from the
device pools: `pool_host/base.py`, `pool_host/mamba.py:156-164`), their LRU evictions, the
device evictions that demote a backed-up node to the host, `init_load_back` (what is loaded,
the 10-token threshold), the controller with its transfer engine (`io_backend` "direct":
`torch` copies between the CPU "device" pools and the host pools, on `torch.cpu` streams and
events) and the per-step acks (`check_hicache_events`). The bytes do move.

What stands in: (1) the host buffers are not page-locked: `pool_host/common.py`
`_cuda_host_register` (cudaHostRegister, `:143-147`) needs CUDA and is replaced by a no-op;
it changes no decision. (2) The scheduler: as `sglang_worker.py` drives the device cache,
plus, between the match and admission, what `PrefillAdder.add_one_req` does with a host hit
(`managers/schedule_policy.py:1397-1475`: `init_load_back`, then the loaded tokens join the
prefix) and `ready_to_load_host_cache` (the batch's load starts); the scheduler's per-step
`check_hicache_events` is called after every call into the cache here (a transfer on the CPU
is complete when it returns, so write-through locks are released at once, as after a step
on a GPU whose copy has finished).

Commands: those of `sglang_worker.py`, and
  run {rid, n} + ids  → the request whole (prompt ids[:n], output ids[n:]): match, load-back,
                        prefill, decode, release; answers the prefix tokens found on the
                        device (`gpu`) and loaded back from the host (`host`)
  host               → the host pools' sizes (KV tokens, Mamba slots) and what they hold
"""

from __future__ import annotations

import sys
from typing import Any

try:  # imported as part of the package (tests, type checks)
    from replay.sim.native import sglang_worker
    from replay.sim.native.wire import CACHE_COMMANDS, serve_engine
except ImportError:  # run as a script inside the engine's environment: sibling modules
    import sglang_worker  # type: ignore[import-not-found,no-redef,unused-ignore]
    from wire import CACHE_COMMANDS, serve_engine  # type: ignore[import-not-found,no-redef,unused-ignore]


def _stand_ins() -> None:
    """Stand-ins (1) and (2): host pools in plain, not page-locked, memory (no CUDA to
    register them with), and copies between the pools that move no bytes (the copy kernels
    are sgl_kernel's CUDA ones, `pool_host/mha.py:56-70`)."""
    from sglang.srt.mem_cache.pool_host import common
    from sglang.srt.mem_cache.pool_host.mamba import MambaPoolHost
    from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost

    common._cuda_host_register = lambda *a, **k: None
    for cls in (MHATokenToKVPoolHost, MambaPoolHost):
        cls.backup_from_device_all_layer = _no_copy
        cls.load_to_device_per_layer = _no_copy


def _no_copy(*args: Any, **kwargs: Any) -> None:
    return None


class HostEngine(sglang_worker.Engine):
    """`sglang_worker.Engine` with HiCache switched on (`--enable-hierarchical-cache`,
    `--hicache-ratio R`, `--hicache-io-backend direct`, `--hicache-mem-layout
    page_first_direct`, the Mamba host pool's only layout: `pool_host/mamba.py:102-105`)."""

    def __init__(self, cfg: dict[str, Any]):
        super().__init__(cfg)
        self.host_hit = 0
        self.match: dict[str, int] = {}  # what the latest match found, before a load-back
        self.refused = 0  # KV tokens the host had no room to back up
        ratio = float(cfg.get("hicache_ratio", 0.0))
        if ratio <= 0:  # no host tier: the device cache alone
            return
        _stand_ins()
        from sglang.srt.runtime_context import get_context

        server_args = (
            get_context()
            .override_server_args(
                page_size=1,
                _mamba_cache_chunk_size=self.G,
                mamba_track_interval=self.track,
                enable_hierarchical_cache=True,
                hicache_ratio=ratio,
                hicache_io_backend="direct",
                hicache_mem_layout="page_first_direct",
                hicache_write_policy=str(cfg.get("write_policy", "write_through")),
            )
            .install()
        )
        self.cache.init_hicache(server_args, self.params)
        assert self.cache.cache_controller is not None, "HiCache built no controller"
        self._count_refused_backups()

    def _count_refused_backups(self) -> None:
        """Count the KV tokens whose write-through found no room in the host pool
        (`_execute_kv_backup` answers None when `evict_host` cannot free enough host-only
        entries, unified_radix_cache.py:1655-1673): they stay on the device without a copy."""
        backup = self.cache._execute_kv_backup

        def counted(node_id: Any, device_value: Any, *rest: Any) -> Any:
            got = backup(node_id, device_value, *rest)
            if got is None:
                self.refused += len(device_value)
            return got

        self.cache._execute_kv_backup = counted

    # the scheduler's side of a host hit ------------------------------------------------
    def _matched(self, req: Any) -> None:
        """`PrefillAdder.add_one_req` with a host hit (schedule_policy.py:1397-1475)."""
        from sglang.srt.mem_cache.base_prefix_cache import InitLoadBackParams

        self.host_hit = 0
        self.match = {
            "device_prefix": int(req.prefix_len),
            "host_hit_length": int(req.host_hit_length),
            "mamba_host_hit_length": int(req.mamba_host_hit_length),
        }
        if self.cache.cache_controller is None or not req.needs_host_load_back():
            return
        promised = int(req.host_hit_length)
        loaded = self.cache.init_load_back(
            InitLoadBackParams(
                best_match_node=req.best_match_node, host_hit_length=promised, req=req
            )
        )
        req.host_loaded_length, req.last_node = loaded
        req.prefix_len += req.host_loaded_length
        req.kv.cache_protected_len = req.prefix_len
        self.cache.ready_to_load_host_cache()
        self.host_hit = int(req.materialized_host_hit_len())
        self._events()

    def _events(self) -> None:
        """The scheduler's per-step poll: write-through and load-back acks."""
        if self.cache.cache_controller is not None:
            self.cache.check_hicache_events()

    def run(self, rid: str, n: int, ids: list[int]) -> dict[str, Any]:
        self.lookup(rid, ids[:n])
        ans = self.start(rid, len(ids))
        if not ans["ok"]:
            self.drop(rid)
            raise RuntimeError(f"request {rid} was not admitted: {ans.get('why')}")
        self._events()
        self.decode(rid, ids[n:])
        self._events()
        self.free(rid)
        self._events()
        hit = int(ans["hit"])
        return {"gpu": hit - self.host_hit, "host": self.host_hit, **self.match, **self.host()}

    def host(self) -> dict[str, Any]:
        cc = self.cache.cache_controller
        if cc is None:
            return {"host_kv": 0, "host_states": 0}
        out: dict[str, Any] = {"refused_backup_tokens": self.refused}
        for entry in cc.mem_pool_host.entries:
            pool = entry.host_pool
            name = "kv" if entry.name.value == "kv" else "states"
            out[f"host_{name}"] = int(pool.size)
            out[f"host_{name}_free"] = int(pool.available_size())
        return out


def hello() -> dict[str, Any]:
    ans = sglang_worker.hello()
    import sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller  # noqa: F401

    return ans


def main() -> int:
    def init(config: dict[str, Any]) -> tuple[HostEngine, dict[str, Any]]:
        engine = HostEngine(config)
        return engine, {**engine._free(), **engine.host()}

    commands = {
        **CACHE_COMMANDS,
        "run": lambda e, h, t: e.run(str(h["rid"]), int(h["n"]), t),
        "host": lambda e, h, t: e.host(),
    }
    return serve_engine(hello, init, commands)


if __name__ == "__main__":
    sys.exit(main())
