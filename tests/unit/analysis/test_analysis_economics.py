"""The one pricing of a run (`analysis.economics`) and the comparison labels
(`analysis.comparison`), on the FlashState demo's measured rates."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import pricing
from analysis.comparison import comparison_panel, ratio_label
from analysis.economics import UnknownGpuError, engine_economics, price_engines


def _metrics() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "engine": ["flashstate", "vllm", "sglang"],
            "gpu_type": ["B200", "B200", None],
            "hit_rate": [0.87, 0.30, 0.06],
            "prefill_tokens_per_min_per_gpu": [4.74e6, 1.54e6, 1.29e6],
            "output_tokens_per_min_per_gpu": [30850.0, 11000.0, 7700.0],
        }
    )


def test_engine_economics_reproduces_the_demo() -> None:
    notes: list[str] = []
    econ = engine_economics(_metrics(), notes=notes).set_index("engine")
    assert econ.loc["flashstate", "user_cost_per_m_input"] == pytest.approx(0.0456)
    assert econ.loc["vllm", "user_cost_per_m_input"] == pytest.approx(0.114)
    # 4.74M x 60 / 1M x $0.0456 + 30,850 x 60 / 1M x $0.50 - $8.60
    assert econ.loc["flashstate", "profit_per_gpu_hour"] == pytest.approx(5.29414)
    # the demo's $2.27 and $2.67, from its rounded inputs: 92.4M x $0.114 + $0.33 - $8.60
    assert econ.loc["vllm", "profit_per_gpu_hour"] == pytest.approx(2.2636)
    assert econ.loc["sglang", "profit_per_gpu_hour"] == pytest.approx(2.68372)
    # No GPU type in the manifest: the catalogue's default, said in a note.
    assert econ.loc["sglang", "gpu"] == "B200"
    assert notes == ["sglang: the manifest names no GPU type; priced at b200"]
    assert set(econ["sheet"]) == {"zai-glm"}


def test_one_gpu_rule_for_every_caller() -> None:
    """A GPU the catalogue lacks is an error naming the GPU, the engine and --gpu (never a
    silent fallback); --gpu prices every engine at its rate; an unknown --gpu names it."""
    m = _metrics()
    m.loc[1, "gpu_type"] = "TPU9"
    with pytest.raises(UnknownGpuError) as caught:
        engine_economics(m)
    message = str(caught.value)
    assert "engine 'vllm' runs on GPU 'TPU9'" in message
    assert "pass --gpu NAME" in message and "gpu_type" in message
    assert isinstance(caught.value, pricing.PricingError)
    h100 = engine_economics(m, gpu="h100").set_index("engine")
    assert set(h100["gpu"]) == {"H100"}
    assert h100.loc["vllm", "gpu_rate_per_hour"] == pytest.approx(6.155)
    with pytest.raises(UnknownGpuError, match="--gpu: unknown GPU 'nope'; choose one of: b200"):
        engine_economics(m, gpu="nope")
    with pytest.raises(pricing.PricingError, match="nope"):
        engine_economics(_metrics(), sheet="nope")


def test_unpriced_engines_are_skipped_with_a_reason() -> None:
    m = _metrics()
    m.loc[2, "hit_rate"] = math.nan
    m.loc[0, "output_tokens_per_min_per_gpu"] = math.nan
    m["unknown"] = [{"output_tokens_per_min_per_gpu": "trace clock"}, {}, {}]
    prices = price_engines(m)
    assert [p.engine for p in prices.engines] == ["vllm"]
    assert prices.skipped == [
        {"engine": "flashstate", "reason": "no output tokens/min/GPU: trace clock"},
        {
            "engine": "sglang",
            "reason": "no prompt tokens with a reported cached count in the window",
        },
    ]
    econ = engine_economics(m).set_index("engine")
    assert math.isnan(econ.loc["sglang", "profit_per_gpu_hour"])
    assert econ.loc["vllm", "profit_per_gpu_hour"] == pytest.approx(2.2636)


def test_comparison_panel_against_best_other() -> None:
    table = _metrics().merge(engine_economics(_metrics()), on="engine")
    panel = comparison_panel(table).set_index(["engine", "metric"])
    row = panel.loc[("flashstate", "profit_per_gpu_hour")]
    assert row["best_other"] == "sglang"  # the better of the other two, as the demo does
    assert row["better_by"] == pytest.approx(5.29414 / row["best_other_value"])
    assert row["ratio_label"] == "1.97× better"
    cost = panel.loc[("flashstate", "user_cost_per_m_input")]
    assert cost["best_other"] == "vllm"
    assert cost["better_by"] == pytest.approx(0.114 / 0.0456)  # 2.5x lower
    assert cost["ratio_label"] == "2.50× better"
    assert panel.loc[("vllm", "user_cost_per_m_input"), "ratio_label"] == "2.50× worse"


@pytest.mark.parametrize(
    ("better", "label", "colour"),
    [
        (50.0, "50.0× better", "green"),  # e.g. a TTFT 50× lower than the best other's
        (1 / 50.0, "50.0× worse", "red"),
        (2.0, "2.00× better", "green"),
        (0.8, "1.25× worse", "red"),
        (250.0, "250× better", "green"),
        (1.0002, "same", "gray"),
        (math.nan, "", "gray"),
        (0.0, "", "gray"),
    ],
)
def test_ratio_label(better: float, label: str, colour: str) -> None:
    assert ratio_label(better) == (label, colour)


def test_ratio_label_both_directions_from_values() -> None:
    """Lower-is-better TTFT: 0.1 s against a rival's 5 s is 50× better (green), and the rival
    is 50× worse (red); higher-is-better throughput the other way round."""
    table = pd.DataFrame(
        {"engine": ["a", "b"], "ttft_p50": [0.1, 5.0], "output_tokens_per_min_per_gpu": [1.0, 50.0]}
    )
    panel = comparison_panel(table).set_index(["engine", "metric"])
    assert panel.loc[("a", "ttft_p50"), "ratio_label"] == "50.0× better"
    assert panel.loc[("b", "ttft_p50"), "ratio_label"] == "50.0× worse"
    assert panel.loc[("a", "output_tokens_per_min_per_gpu"), "ratio_label"] == "50.0× worse"
    assert panel.loc[("b", "output_tokens_per_min_per_gpu"), "ratio_label"] == "50.0× better"
