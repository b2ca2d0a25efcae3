"""`replay plan-host` (issue 34, point 5) through the real command line on the bundled sample
with a tight GPU cache: one row per host size (and KV share, for SGLang), the best marked per
policy, profit net of host memory, a larger host never a lower hit rate where host memory
serves hits; every refusal names its flag before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.commands.plan_host import add_break_even, mark_best
from replay.rundir import read_manifest

# The bundled sample on a 300-block cache: the GPU evicts, so host memory serves hits.
BASE = [
    "plan-host", "--sessions", "8", "--duration-min", "12", "--window", "4-12", "--seed", "1",
    "--capacity-blocks", "300",
]  # fmt: skip
RATE = 0.01  # USD per GiB-hour


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    out = tmp_path_factory.mktemp("plan") / "out"
    res = invoke(
        *BASE, "--policies", "sglang,vllm", "--host-gb", "0,20,60", "--kv-share", "auto,0.5,0.95",
        "--host-usd-per-gb-hour", str(RATE), "--json", "--out", str(out),
    )  # fmt: skip
    assert res.exit_code == 0, said(res)
    rows: list[dict[str, Any]] = json.loads(res.stdout)
    assert rows == json.loads((out / "plan_host.json").read_text())
    return rows, out


def test_one_row_per_point_and_one_best_per_policy(planned) -> None:
    rows, out = planned
    got = [(r["policy"], r["host_gb"], r["kv_share"]) for r in rows]
    # SGLang: host 0 once, then each size at each share; vLLM (one pool): each size once.
    assert got == [
        ("sglang", 0, None),
        *[("sglang", g, s) for g in (20, 60) for s in (None, 0.5, 0.95)],
        ("vllm", 0, None), ("vllm", 20, None), ("vllm", 60, None),
    ]  # fmt: skip
    for policy in ("sglang", "vllm"):
        mine = [r for r in rows if r["policy"] == policy]
        (best,) = [r for r in mine if r["best"]]
        assert best["net_profit_per_gpu_hour"] == max(r["net_profit_per_gpu_hour"] for r in mine)
    for r in rows:  # each row is a run directory, its split in the spec it records
        spec = read_manifest(out / r["run"]).spec
        assert spec is not None
        engine = spec["engines"][0]
        assert engine.get("host_memory_gb", 0) == r["host_gb"]
        assert engine.get("host_kv_share") == r["kv_share"]


def test_host_memory_is_priced_per_gib_hour_over_the_engines_gpus(planned) -> None:
    rows, _ = planned
    for r in rows:  # GLM-5.3-Flash: a 2-GPU engine
        assert r["host_cost_per_gpu_hour"] == pytest.approx(r["host_gb"] * RATE / 2)
        assert r["net_profit_per_gpu_hour"] == pytest.approx(
            r["profit_per_gpu_hour"] - r["host_cost_per_gpu_hour"]
        )


def test_a_larger_host_never_lowers_the_hit_rate(planned) -> None:
    rows, _ = planned
    for policy, share in (("sglang", None), ("sglang", 0.5), ("vllm", None)):
        line = [r for r in rows if r["policy"] == policy and r["kv_share"] in (share, None)]
        line = sorted({r["host_gb"]: r for r in line}.values(), key=lambda r: r["host_gb"])
        hits = [r["hit_rate"] for r in line]
        assert hits == sorted(hits) and hits[-1] > hits[0] + 0.3, (policy, share, hits)
        assert line[0]["host_hit_rate"] == 0 and line[-1]["host_hit_rate"] > 0.2
    sg = {(r["host_gb"], r["kv_share"]): r for r in rows if r["policy"] == "sglang"}
    # The split matters: 95% to the KV pool leaves the host few state slots, so few hits.
    assert sg[60, 0.95]["hit_rate"] < sg[60, None]["hit_rate"] - 0.3
    assert sg[20, None]["engine_kv_share"] == pytest.approx(160 / 295)  # 27 states of 5 blocks


def test_the_table_marks_the_best_and_says_the_criterion(tmp_path: Path) -> None:
    res = invoke(
        *BASE, "--policies", "flashstate", "--host-gb", "0,60", "--best", "hit",
        "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert res.exit_code == 0, said(res)
    text = said(res)
    assert "Host memory plan" in text and "◀ best (--best hit)" in text
    assert "the highest hit rate" in text
    # unless given, host memory is priced at gpus.yaml's rate, which the output names
    assert "host memory at $0.00072 per GiB-hour (gpus.yaml host_memory, reported" in text
    assert "flashstate keeps one host pool" in text
    rows = json.loads((tmp_path / "o" / "plan_host.json").read_text())
    assert [r["best"] for r in rows] == [False, True]
    assert rows[1]["host_cost_per_gpu_hour"] == pytest.approx(60 * 0.00072 / 2)
    res = invoke(*BASE, "--policies", "vllm", "--host-gb", "0", "--host-usd-per-gb-hour", "0",
                 "--out", str(tmp_path / "z"))  # fmt: skip
    assert res.exit_code == 0, said(res)
    assert "host memory is unpriced (--host-usd-per-gb-hour): net = profit" in said(res)


def test_mark_best_breaks_ties_to_the_cent_by_ttft_then_host() -> None:
    def row(gb: float, net: float | None, ttft: float) -> dict[str, Any]:
        return {"policy": "p", "host_gb": gb, "net_profit_per_gpu_hour": net,
                "ttft_p50_s": ttft, "hit_rate": 0.5, "best": False}  # fmt: skip

    rows = [row(0, 3.001, 2.0), row(64, 3.004, 1.0), row(128, 3.004, 1.0), row(256, None, 0.1)]
    mark_best(rows)
    assert [r["best"] for r in rows] == [False, True, False, False]
    mark_best(rows := [row(0, 3.0, 2.0), row(64, 3.02, 9.0)])
    assert [r["best"] for r in rows] == [False, True]


def test_the_break_even_rate_is_the_profit_host_memory_adds_per_gib_hour() -> None:
    def row(policy: str, gb: float, profit: float | None) -> dict[str, Any]:
        return {"policy": policy, "host_gb": gb, "profit_per_gpu_hour": profit, "gpus": 2,
                "break_even_usd_per_gb_hour": None}  # fmt: skip

    rows = [row("a", 0, 2.8), row("a", 512, 3.93), row("a", 64, 2.7), row("b", 512, 4.0)]
    add_break_even(rows)
    got = [r["break_even_usd_per_gb_hour"] for r in rows]
    assert got[0] is None and got[3] is None  # no host memory; no row without it
    assert got[1] == pytest.approx((3.93 - 2.8) * 2 / 512)  # $0.0044 per GiB-hour
    assert got[2] == pytest.approx(-0.1 * 2 / 64)  # host memory that lowers the profit


def test_the_planner_says_what_the_best_host_memory_may_cost(planned) -> None:
    rows, _ = planned
    for r in rows:
        if r["host_gb"]:
            p0 = next(x for x in rows if x["policy"] == r["policy"] and not x["host_gb"])
            gain = r["profit_per_gpu_hour"] - p0["profit_per_gpu_hour"]
            assert r["break_even_usd_per_gb_hour"] == pytest.approx(gain * 2 / r["host_gb"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "vllm", "--kv-share", "0.5"],
         "--kv-share 0.5: policy 'vllm' keeps one host pool"),
        (["--policies", "flashstate", "--kv-share", "auto,0.7"],
         "--kv-share 0.7: policy 'flashstate' keeps one host pool"),
        (["--policies", "sglang", "--host-gb", "0", "--kv-share", "0.5"],
         "--kv-share 0.5: there is no host memory to split (--host-gb 0)"),
        (["--kv-share", "1.5"], "--kv-share: 1.5 is not a fraction in [0, 1]"),
        (["--kv-share", "most"], "--kv-share: 'most' is not a fraction in [0, 1] or 'auto'"),
        (["--host-gb", "0,-64"], "--host-gb: -64 is not a size in [0, 1048576] GiB"),
        (["--host-gb", "lots"], "--host-gb: 'lots' is not a number of GiB"),
        (["--host-usd-per-gb-hour", "-1"], "--host-usd-per-gb-hour: -1 is not a rate"),
        (["--best", "cheapest"], "--best: 'cheapest' is not one of profit, ttft-p50"),
        (["--policies", "ideal", "--host-gb", "64"],
         "--host-gb 64: policy 'ideal' holds everything on the GPU already"),
        # plan-host's own flag, not simulate's --host-memory-gb (the messages are the tiers')
        (["--policies", "vllm", "--host-gb", "0.001"], "--host-gb 0.001: less than one cache block"),
        (["--policies", "nope"], "--policies: unknown policy nope"),
    ],
)  # fmt: skip
def test_bad_inputs_name_the_flag(tmp_path: Path, args: list[str], message: str) -> None:
    res = invoke(*BASE, "--out", str(tmp_path / "o"), *args)
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), said(res)
    assert message in said(res)
    assert "--host-memory-gb" not in said(res)  # simulate's flag: plan-host has none
    assert not (tmp_path / "o").exists()  # refused before anything is written
