"""Worker: SGLang 0.5.22's own hybrid radix cache, driven as SGLang's scheduler drives it.

Runs inside an environment where SGLang is importable (the project's `.venv-vllm`, where
`scripts/setup_vllm_cpu.sh --with-sglang` adds it), started by
`replay.sim.native.worker.Worker`; it imports nothing from this project but the protocol
loop beside it (`wire.py`, standard library only), besides the standard library, torch and
SGLang. Same protocol as `vllm_worker.py` (one JSON line per command,
`ntok` little-endian int32 token ids after it; one JSON line per answer).

The cache: `UnifiedRadixCache` with the FULL and MAMBA tree components over a
`HybridLinearKVPool` (page size 1, CPU), the Mamba "extra buffer" strategy SGLang resolves
by default (`arg_groups/overrides.py` L453-461: overlap scheduling is on by default, so
"auto" becomes "extra_buffer"), a KV pool of `kv_tokens` and `state_slots` Mamba slots
(sized by the caller as `kv_cache_configurator.py` L3024-3068 sizes them).

One request, as the scheduler (paths under `sglang/srt/`):
  start  `Req.init_next_round_input(tree_cache)` (managers/schedule_batch.py L1624-1677:
         `match_prefix` capped at n − 1, copy-on-write of the matched state into a slot of the
         request's own); the prefix locked (`tree_cache.lock(req.last_node)`,
         managers/schedule_policy.py L1591); then each prefill chunk of at most
         `chunked_prefill_size` tokens: `alloc_req_slots` (mem_cache/allocation.py L320:
         the running slot and the two ping-pong track slots, evicting states for them),
         `alloc_token_slots` (L152: evicts the KV shortfall the allocator reports), the
         chunk's state tracked where `_mamba_radix_cache_v2` puts it (schedule_batch.py
         L3040-3108: prefix + ⌊extend/G⌋·G, or the branching point), and
         `checkpoint_kv_cache` at the chunk's end (batch_result_processor.py L394, scheduler.py
         L3648: the state and the KV up to it go into the tree);
  decode one KV slot per step (`alloc_for_decode_default`, allocation.py L618-680), a state
         tracked when the committed length reaches a multiple of lcm(G, 256)
         (batch_result_processor.py L1607-1626, L1503-1530);
  free   `release_kv_cache(req, tree_cache, checkpoint=True)` (mem_cache/common.py L385-420).
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from array import array
from typing import Any

try:  # imported as part of the package (tests, type checks)
    from replay.sim.native.wire import CACHE_COMMANDS, serve_engine
except ImportError:  # run as a script inside the engine's environment: a sibling module
    from wire import CACHE_COMMANDS, serve_engine  # type: ignore[import-not-found,no-redef,unused-ignore]

SUPPORTED = "0.5.22"


def _torchvision_absent() -> None:
    """SGLang's config package imports multimodal image helpers that import torchvision,
    which the CPU torch environment cannot have (PyPI's torchvision needs CUDA torch's
    operators). The cache never uses them: after transformers has recorded torchvision as
    unavailable, its modules import as placeholders whose every call raises."""
    try:
        import torchvision  # noqa: F401

        return
    except Exception:
        pass
    from transformers.utils import import_utils

    import_utils.is_torchvision_available()  # cached (lru_cache) as False before the finder

    class Absent(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            m = Absent(f"{self.__name__}.{name}")
            setattr(self, name, m)
            return m

        def __call__(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError(f"{self.__name__}: torchvision is not installed here")

    class Finder:
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
            if name == "torchvision" or name.startswith("torchvision."):
                loader: Any = self
                return importlib.machinery.ModuleSpec(name, loader, is_package=True)
            return None

        def create_module(self, spec: Any) -> Any:
            return Absent(spec.name)

        def exec_module(self, module: Any) -> None:
            pass

    sys.meta_path.append(Finder())


class Engine:
    """One UnifiedRadixCache with its pools, and the requests it serves."""

    def __init__(self, cfg: dict[str, Any]):
        _torchvision_absent()
        import torch
        from sglang.srt.runtime_context import get_context

        self.G = int(cfg["grid"])  # _mamba_cache_chunk_size
        self.track = int(cfg["track_interval"])  # --mamba-track-interval
        # A published config instead of ServerArgs("dummy"), which loads a model config
        # from the hub (RECIPES.md); the fields the cache reads.
        get_context().override_server_args(
            page_size=1, _mamba_cache_chunk_size=self.G, mamba_track_interval=self.track
        ).install()
        from sglang.srt.configs.mamba_utils import Mamba2CacheParams, Mamba2StateShape
        from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.memory_pool import HybridLinearKVPool, HybridReqToTokenPool
        from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
        from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
        from sglang.srt.runtime_context import get_exec, mamba_track_grid

        if get_exec().mamba.mamba_track_interval != self.track:
            raise ValueError("the published config did not take mamba_track_interval")
        shape = Mamba2StateShape.create(
            tp_world_size=1,
            intermediate_size=8,
            n_groups=1,
            num_heads=1,
            head_dim=4,
            state_size=4,
            conv_kernel=2,
        )
        self.kv_tokens = int(cfg["kv_tokens"])
        self.slots = int(cfg["state_slots"])
        self.max_len = int(cfg["max_model_len"])
        # The request rows: max_running_requests, capped by the state pool at
        # max_mamba_cache_size // 5 (kv_cache_configurator.py L2812-2831: 3 slots per request
        # + 2 tracking slots with the extra buffer and overlap scheduling).
        rows = int(cfg["max_running"])
        self.rtp = HybridReqToTokenPool(
            size=rows,
            mamba_size=self.slots,
            mamba_spec_state_size=rows,
            max_context_len=self.max_len + 8,
            device="cpu",
            enable_memory_saver=False,
            cache_params=Mamba2CacheParams(shape=shape, layers=[0]),
            mamba_layer_ids=[0],
            enable_mamba_extra_buffer=True,
            speculative_num_draft_tokens=None,
        )
        pool = HybridLinearKVPool(
            size=self.kv_tokens,
            dtype=torch.bfloat16,
            page_size=1,
            head_num=1,
            head_dim=1,
            full_attention_layer_ids=[1],
            device="cpu",
            mamba_pool=self.rtp.mamba_pool,
        )
        self.alloc = TokenToKVPoolAllocator(
            size=self.kv_tokens,
            dtype=torch.bfloat16,
            device="cpu",
            kvcache=pool,
            need_sort=False,
        )
        self.params = CacheInitParams(
            req_to_token_pool=self.rtp,
            token_to_kv_pool_allocator=self.alloc,
            page_size=1,
            disable=False,
            enable_mamba_extra_buffer=True,
            chunked_prefill_size=int(cfg["chunk"]),
            tree_components=(ComponentType.FULL, ComponentType.MAMBA),
            tree_core_backend=cfg.get("tree_core"),
        )
        self.cache = UnifiedRadixCache(self.params)  # kept: HiCache's init takes them too
        self.chunk = int(cfg["chunk"])
        self.track_grid = mamba_track_grid(1)
        self.token_decode = cfg.get("decode_steps", "merged") == "token"
        self.pending: dict[str, list[int]] = {}
        self.running: dict[str, Any] = {}
        self.steps = 0

    # helpers ---------------------------------------------------------------------------
    def _key(self, ids: list[int]) -> Any:
        from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams
        from sglang.srt.mem_cache.radix_cache import RadixKey

        return MatchPrefixParams(
            key=RadixKey(token_ids=array("q", ids), limit=max(len(ids) - 1, 0))
        )

    def _free(self) -> dict[str, int]:
        return {
            "free": int(self.alloc.available_size()),
            "free_states": int(self.rtp.mamba_allocator.available_size()),
        }

    # commands --------------------------------------------------------------------------
    def lookup(self, rid: str, tokens: list[int]) -> dict[str, Any]:
        """The hit a waiting request would get: SGLang matches waiting requests each round
        (which refreshes the matched path's recency), without the copy-on-write."""
        if rid in self.pending or rid in self.running:
            raise ValueError(f"request id {rid} is in use")
        self.pending[rid] = tokens
        res = self.cache.match_prefix(self._key(tokens))
        return {"hit": int(res.device_prefix_len)}

    def start(self, rid: str, total: int | None = None) -> dict[str, Any]:
        from sglang.srt.managers.schedule_batch import Req
        from sglang.srt.mem_cache.allocation import alloc_req_slots, alloc_token_slots
        from sglang.srt.mem_cache.common import checkpoint_kv_cache, release_kv_cache
        from sglang.srt.sampling.sampling_params import SamplingParams

        tokens = self.pending.pop(rid)
        if self.rtp.available_size() <= 0:  # every request row in use: it waits
            self.pending[rid] = tokens  # (scheduler.py get_num_allocatable_reqs, L3907-3925)
            return {"ok": False, "hit": 0, "why": "max running requests", **self._free()}
        req = Req(
            rid=rid,
            origin_input_text="",
            origin_input_ids=array("q", tokens),
            sampling_params=SamplingParams(max_new_tokens=self.max_len, temperature=0),
        )
        n = len(tokens)
        req.init_next_round_input(self.cache)  # match_prefix + copy-on-write of the state
        self._matched(req)
        hit = int(req.prefix_len)
        req.lock = self.cache.lock(req.last_node)
        # Admission (PrefillAdder.add_one_req, managers/schedule_policy.py L1336-1394; the
        # temporarily pinned prefix is not evictable): the prompt's rest and, with the output
        # length known (ignore_eos, max_new_tokens), its decode steps fit in free + evictable
        # KV, and the request's three Mamba slots in free + evictable states.
        need_kv = (n if total is None else int(total) - 1) - hit
        need_states = (0 if req.kv.holds_mamba else 1) + self.rtp.mamba_initial_tracking_slots
        kv_room = self.alloc.available_size() + self.cache.full_evictable_size()
        st_room = self.rtp.mamba_allocator.available_size() + self.cache.mamba_evictable_size()
        if need_kv > kv_room or need_states > st_room:
            self._unadmit(req)
            self.pending[rid] = tokens
            return {"ok": False, "hit": hit, "why": "no room", **self._free()}
        chunks: list[int] = []
        prefix = hit
        try:
            while prefix < n:
                end = min(prefix + self.chunk, n)
                req.extend_end = end
                req.prefix_len = prefix
                if not chunks:
                    alloc_req_slots(self.rtp, [req], self.cache)
                    if hit:
                        self.rtp.write(
                            (req.kv.req_pool_idx, slice(0, hit)),
                            self.cache.prefix_device_indices(req)[:hit].to(torch_int32()),
                        )
                loc = alloc_token_slots(self.cache, end - prefix)
                self.rtp.write((req.kv.req_pool_idx, slice(prefix, end)), loc.to(torch_int32()))
                req.kv.kv_allocated_len = req.kv.kv_committed_len = end
                self._track_extend(req)
                self.steps += 1
                checkpoint_kv_cache(req, self.cache)
                chunks.append(end - prefix)
                prefix = end
        except RuntimeError as e:  # out of memory mid-prefill: SGLang would retract it
            release_kv_cache(req, self.cache, checkpoint=False)
            self.pending[rid] = tokens
            return {"ok": False, "hit": hit, "why": f"retracted: {e}"[:200], **self._free()}
        self.running[rid] = req
        return {"ok": True, "hit": hit, "chunks": chunks, **self._free()}

    def _matched(self, req: Any) -> None:
        """After the match, before admission: nothing here (no host tier); the HiCache
        worker (`sglang_host_worker.py`) loads a host hit back."""

    def _unadmit(self, req: Any) -> None:
        self.cache.unlock(req.lock)
        req.lock = None
        if req.kv.holds_mamba:  # the copy-on-write slot (common.py release_kv_cache L390)
            self.rtp.mamba_allocator.free(req.kv.mamba_pool_idx.unsqueeze(-1))
            req.kv.mamba_pool_idx = None

    def _track_extend(self, req: Any) -> None:
        """`_mamba_radix_cache_v2` for an extend without DCP (schedule_batch.py L3052-3108):
        track at prefix + ⌊extend/G⌋·G when the chunk has at least G tokens, or at the
        branching point when it lies in the chunk at a multiple of G from the prefix."""
        G, prefix, end = self.G, req.prefix_len, req.extend_end
        ext = end - prefix
        if ext < G:
            return
        aligned = prefix + (ext // G) * G
        kv = req.kv
        kv.mamba_last_track_idx = kv.mamba_next_track_idx
        kv.mamba_next_track_idx = self.rtp.get_mamba_ping_pong_other_idx(kv.mamba_next_track_idx)
        br = req.mamba_branching_seqlen
        if br is not None and prefix < br < end and (br - prefix) % G == 0:
            aligned = br
        kv.mamba_last_track_seqlen = aligned

    def decode(self, rid: str, out: list[int]) -> dict[str, Any]:
        """The first output token comes from the prefill; each decode step computes the KV
        of the last one sampled (the final one is sampled, never computed)."""
        from sglang.srt.mem_cache.allocation import alloc_token_slots

        req = self.running[rid]
        if not out:
            return {"complete": True, **self._free()}
        req.output_ids.append(out[0])
        todo = out[1:]
        i = 0
        try:
            while i < len(todo):
                done = req.kv.kv_committed_len
                if self.token_decode:
                    k = 1
                else:  # the steps up to the next track boundary, in one allocation
                    k = min(len(todo) - i, (done // self.track_grid + 1) * self.track_grid - done)
                loc = alloc_token_slots(self.cache, k)
                self.rtp.write((req.kv.req_pool_idx, slice(done, done + k)), loc.to(torch_int32()))
                req.kv.kv_allocated_len += k
                req.kv.kv_committed_len += k
                req.output_ids.extend(todo[i : i + k])
                self.steps += k
                i += k
                self._track_decode(req)
        except RuntimeError:  # SGLang would retract it; the rest is not computed
            return {"complete": False, **self._free()}
        return {"complete": True, **self._free()}

    def _track_decode(self, req: Any) -> None:
        """A decode step that reaches a multiple of lcm(G, track interval) tracks its state
        there (batch_result_processor.py L1607-1626 and L1503-1530, no overlap lookahead)."""
        kv = req.kv
        if kv.kv_committed_len % self.track_grid:
            return
        track_idx = kv.mamba_next_track_idx
        kv.mamba_prev_track_seqlen = kv.mamba_last_track_seqlen
        kv.mamba_last_track_seqlen = kv.kv_committed_len
        kv.mamba_last_track_idx = track_idx
        kv.mamba_next_track_idx = self.rtp.get_mamba_ping_pong_other_idx(track_idx)

    def free(self, rid: str) -> dict[str, Any]:
        from sglang.srt.managers.schedule_batch import FINISH_LENGTH
        from sglang.srt.mem_cache.common import release_kv_cache

        req = self.running.pop(rid)
        req.finished_reason = FINISH_LENGTH(length=len(req.output_ids))
        release_kv_cache(req, self.cache, checkpoint=True)
        return self._free()

    def drop(self, rid: str) -> dict[str, Any]:
        from sglang.srt.mem_cache.common import release_kv_cache

        self.pending.pop(rid, None)
        req = self.running.pop(rid, None)
        if req is not None:
            release_kv_cache(req, self.cache, checkpoint=False)
        return self._free()

    def stats(self) -> dict[str, Any]:
        c = self.cache
        return {
            **self._free(),
            "kv_tokens": self.kv_tokens,
            "state_slots": self.slots,
            "kv_evictable": int(c.full_evictable_size()),
            "kv_protected": int(c.full_protected_size()),
            "states_evictable": int(c.mamba_evictable_size()),
            "states_protected": int(c.mamba_protected_size()),
            "steps": self.steps,
            "tree_core": type(c.tree_core).__name__,
        }


def torch_int32() -> Any:
    import torch

    return torch.int32


def hello() -> dict[str, Any]:
    import importlib.metadata

    version = importlib.metadata.version("sglang")
    _torchvision_absent()
    import sglang.srt.mem_cache.unified_radix_cache  # noqa: F401  (fails here if broken)

    return {"version": version, "fork_flags": [], "python": sys.executable}


def main() -> int:
    def init(config: dict[str, Any]) -> tuple[Engine, dict[str, Any]]:
        engine = Engine(config)
        return engine, engine._free()

    return serve_engine(hello, init, CACHE_COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
