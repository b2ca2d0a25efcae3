"""The engines' own cache code in the simulator's loop.

- `vllm-native` (`replay.sim.native.vllm_cache`): vLLM's `KVCacheManager`, run in a worker
  process inside the vLLM environment (`replay.sim.native.worker` finds it), driven the way
  vLLM's scheduler drives it.
- The policies (`replay.sim.native.policies`) register with `replay.sim.cache.policies`' registry.
"""
