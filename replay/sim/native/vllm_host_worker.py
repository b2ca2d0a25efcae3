"""Worker: vLLM 0.32's own v1 `Scheduler` with its native KV offloading connector (a CPU
host tier), one request at a time, for the host tier's oracle (`replay.sim.native.host_oracle`).

Runs inside an environment where vLLM is importable (the project's `.venv-vllm`), started by
`replay.sim.native.worker.Worker` (engine "vllm-host", registered by `host_oracle.py`); like the
other workers it imports only the standard library, vLLM and its siblings (`wire.py`,
`vllm_worker.py`, `vllm_sched_worker.py`), and speaks the same protocol.

Commands:
  hello                    → vLLM's version
  init {config}            → the Scheduler of `vllm_sched_worker.py` with
                             `kv_transfer_config` = OffloadingConnector (kv_both,
                             `cpu_bytes_to_use`), and the host's size in chunks
  run {rid, n} + ids       → adds the request (prompt ids[:n], output ids[n:]), steps until it
                             has finished and its stores are done; answers the tokens the GPU
                             cache gave (`gpu`) and the connector loaded from the host (`host`)

What is vLLM's own code: the Scheduler, its KVCacheManager (hybrid coordinator, Mamba
"align"), the connector's scheduler side (`distributed/kv_transfer/kv_connector/v1/offloading/
scheduler.py`: lookups, load and store jobs, which keys and states are offloaded) and the CPU
manager with its LRU (`v1/kv_offload/cpu/manager.py`). Stubbed: the model (as in
`vllm_sched_worker.py`) and the worker side of the connector: every load and store job the
scheduler hands out completes in the step it was issued (its job id in
`OffloadingWorkerMetadata.completed_jobs`, a load's request in `finished_recving`), as a
transfer that takes no time would. So the oracle says which tokens hit where, not when.
"""

from __future__ import annotations

import sys
from typing import Any

try:  # imported as part of the package (tests, type checks)
    from replay.sim.native.vllm_sched_worker import Engine as SchedEngine
    from replay.sim.native.vllm_worker import kv_cache_config
    from replay.sim.native.wire import serve_engine
except ImportError:  # run as a script inside the engine's environment: sibling modules
    from vllm_sched_worker import (  # type: ignore[import-not-found,no-redef,unused-ignore]
        Engine as SchedEngine,
    )
    from vllm_worker import kv_cache_config  # type: ignore[import-not-found,no-redef,unused-ignore]
    from wire import serve_engine  # type: ignore[import-not-found,no-redef,unused-ignore]


class HostEngine(SchedEngine):
    """The scheduler oracle's engine with the offloading connector switched on."""

    def __init__(self, cfg: dict[str, Any]):
        import vllm.config as vc
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.structured_output import StructuredOutputManager

        super().__init__(cfg)  # the scheduler oracle's config, then the same with a connector
        self.hits: dict[str, tuple[int, int]] = {}
        self._watch_hits()
        self.conn: Any = None
        if not int(cfg["cpu_bytes"]):  # no host tier: the scheduler oracle as it is
            return
        self.vllm_config.kv_transfer_config = vc.KVTransferConfig(
            kv_connector="OffloadingConnector",
            kv_role="kv_both",
            kv_connector_extra_config={"cpu_bytes_to_use": int(cfg["cpu_bytes"])},
        )
        self.sched = Scheduler(
            self.vllm_config,
            kv_cache_config(cfg, self.B),
            StructuredOutputManager(self.vllm_config),
            block_size=self.B,
            hash_block_size=self.B,
        )
        self._watch_evictions()
        assert self.sched.connector is not None, "the Scheduler built no KV connector"
        self.conn = self.sched.connector
        self._watch_hits()

    def _watch_hits(self) -> None:
        """Record each request's first allocation: its GPU hit and the connector's tokens."""
        mgr = self.sched.kv_cache_manager
        alloc = mgr.allocate_slots

        def allocate_slots(request: Any, *a: Any, **kw: Any) -> Any:
            rid = request.request_id
            if rid not in self.hits and request.num_computed_tokens == 0:
                self.hits[rid] = (
                    int(kw.get("num_new_computed_tokens", 0)),
                    int(kw.get("num_external_computed_tokens", 0)),
                )
            return alloc(request, *a, **kw)

        mgr.allocate_slots = allocate_slots

    def host_chunks(self) -> int:
        if self.conn is None:
            return 0
        return int(self.conn.connector_scheduler.manager._get_num_free_chunks())

    def step(self, now: float = 0.0) -> dict[str, Any]:
        from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
            OffloadingWorkerMetadata,
        )
        from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput

        s = self.sched
        so = s.schedule()
        self.steps += 1
        out = None
        if self.conn is not None:
            meta = so.kv_connector_metadata
            workers = self.conn.connector_scheduler.config.num_workers
            done = {jid: workers for jid in (*meta.load_jobs, *meta.store_jobs)}
            out = KVConnectorOutput(
                finished_sending=set(),
                finished_recving={job.req_id for job in meta.load_jobs.values()},
                kv_connector_worker_meta=OffloadingWorkerMetadata(completed_jobs=done),
            )
        ids = list(so.num_scheduled_tokens)
        sampled: list[list[int]] = []
        for rid in ids:
            r = s.requests[rid]
            if r.num_computed_tokens >= r.num_tokens:
                sampled.append([self.outputs[rid][len(r.output_token_ids)]])
            else:
                sampled.append([])
        mro = ModelRunnerOutput(
            req_ids=ids,
            req_id_to_index={rid: i for i, rid in enumerate(ids)},
            sampled_token_ids=sampled,
            kv_connector_output=out,
        )
        return {"finished": self._update(so, mro)}

    def run(self, rid: str, n: int, ids: list[int]) -> dict[str, Any]:
        self.add(rid, n, ids)
        for _ in range(10 * (len(ids) + 10)):
            self.step()
            pending = self.conn is not None and self.conn.has_pending_push_work()
            if rid not in self.sched.requests and not pending:
                break
        else:
            raise RuntimeError(f"request {rid} did not finish")
        gpu, host = self.hits.pop(rid, (0, 0))
        return {"gpu": gpu, "host": host, "free_chunks": self.host_chunks()}


def hello() -> dict[str, Any]:
    import vllm

    return {"version": getattr(vllm, "__version__", "unknown"), "python": sys.executable}


def main() -> int:
    def init(config: dict[str, Any]) -> tuple[HostEngine, dict[str, Any]]:
        engine = HostEngine(config)
        return engine, {"settings": engine.settings(), "host_chunks": engine.host_chunks()}

    return serve_engine(
        hello,
        init,
        {"run": lambda e, h, t: e.run(str(h["rid"]), int(h["n"]), t)},
    )


if __name__ == "__main__":
    sys.exit(main())
