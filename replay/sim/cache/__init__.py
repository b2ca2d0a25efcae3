"""The cache model and its policies: what an engine's prefix cache holds, how a request
resumes from it, and what each engine's policy keeps and evicts.

The core is `hybrid.HybridCache` (its API's values in `requests`, what it holds in `nodes`,
prefix identities in `keys`, ending a request in `materialize`, eviction and admission in
`eviction`); a policy is made of the pieces in `policy_base`, and `policies` names them all
(`vllm_policy`, `sglang_policy`, and the engines' own code from `replay.sim.native`).
`cost` is the prefill cost model (restore seconds, the engine clock's shape);
`capacity` resolves how many blocks a cache holds; `kv_lru` is a plain KV cache beside the
hybrid one. This layer imports nothing of the engine model (`replay.sim.engine`) or of the
run driver above it.

The hot modules run compiled when a build matches them (`replay.sim.compiled`): the build's
modules go ahead of the sources on this package's search path before any is imported.
"""

from __future__ import annotations

from replay.sim.compiled import use_build

use_build(__path__)  # the compiled cache modules, when built from these sources (see there)
