"""`replay price`: a point, the list, a run directory, and every bad flag's message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.records import RequestRecord
from replay.rundir import RunWriter
from replay.rundir_models import Manifest

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "pricing"
DEMO_POINT = [
    "--hit-rate",
    "0.87",
    "--prompt-tokens-per-min-per-gpu",
    "4.74e6",
    "--output-tokens-per-min-per-gpu",
    "30850",
]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["price", *args])


def test_point_json_carries_the_contract_fields() -> None:
    result = invoke(*DEMO_POINT, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["user_cost_per_m_input"] == 0.0456
    assert data["revenue_per_gpu_hour"] == 13.89414
    assert data["profit_per_gpu_hour"] == 5.29414
    assert data["break_even_gpu_rate"] == 13.89414
    assert data["break_even_hit_rate_status"] == "profit_everywhere"
    assert (data["sheet"], data["gpu"]) == ("zai-glm", "b200")


def test_point_table_shows_rounded_dollars_and_names_illustrative_figures() -> None:
    result = invoke(*DEMO_POINT)
    assert result.exit_code == 0, result.output
    assert "$0.0456" in result.stdout and "$5.29" in result.stdout and "$13.89" in result.stdout
    assert "illustrative" not in result.stderr  # Z.ai and B200 are the demo's own figures
    other = invoke(*DEMO_POINT, "--sheet", "anthropic-style-5m", "--gpu", "H100")
    assert other.exit_code == 0, other.output
    assert "'anthropic-style-5m' figures are illustrative" in other.stderr
    assert "'h100' figures are illustrative" in other.stderr


def test_list_shows_sheets_and_gpus_as_table_and_json() -> None:
    table = invoke("--list")
    assert table.exit_code == 0, table.output
    for name in ("zai-glm", "anthropic-style-5m", "b200", "gb300", "$3.75", "$8.60"):
        assert name in table.stdout
    data = json.loads(invoke("--list", "--json").stdout)
    assert data["default_sheet"] == "zai-glm" and data["default_gpu"] == "b200"
    assert {s["name"] for s in data["sheets"]} >= {"zai-glm", "anthropic-style-5m"}
    assert next(g for g in data["gpus"] if g["name"] == "b200")["rate_per_gpu_hour"] == 8.6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sheet", "nope", *DEMO_POINT], "--sheet: unknown price sheet 'nope'; choose one of: "),
        (["--gpu", "a100", *DEMO_POINT], "--gpu: unknown GPU 'a100'; choose one of: b200, h100"),
        (
            ["--hit-rate", "87", *DEMO_POINT[2:]],
            "--hit-rate: must be a fraction within [0, 1] (0.87 for 87%), got 87",
        ),
        (["--hit-rate", "-0.1", *DEMO_POINT[2:]], "--hit-rate: must be a fraction within [0, 1]"),
        (
            [*DEMO_POINT[:2], "--prompt-tokens-per-min-per-gpu", "-5", *DEMO_POINT[4:]],
            "--prompt-tokens-per-min-per-gpu: must be a token rate ≥ 0",
        ),
        (
            [*DEMO_POINT[:4], "--output-tokens-per-min-per-gpu", "nan"],
            "--output-tokens-per-min-per-gpu: must be a token rate ≥ 0",
        ),
        ([*DEMO_POINT, "--write-fraction", "1.5"], "--write-fraction: must be a fraction"),
        (["--hit-rate", "0.5"], "missing --prompt-tokens-per-min-per-gpu, --output-tokens"),
        ([*DEMO_POINT, "--window", "0-60"], "--window: only used with RUN_DIR"),
    ],
)
def test_bad_flags_name_the_flag_and_the_choices(args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split()), result.stderr
    assert "choose one of: zai-glm" in result.stderr or "--sheet" not in message


def test_a_broken_pricing_dir_is_named(tmp_path: Path) -> None:
    shutil.copytree(SHIPPED, tmp_path / "p")
    sheets = tmp_path / "p" / "sheets.yaml"
    sheets.write_text(sheets.read_text().replace("    output: 0.50\n", "    output: -1\n"))
    result = invoke(*DEMO_POINT, "--pricing-dir", str(tmp_path / "p"))
    assert result.exit_code == 2
    assert "sheets.yaml: field 'sheets.zai-glm.output'" in " ".join(result.stderr.split())


# -- RUN_DIR ---------------------------------------------------------------------------------


def record(
    engine: str, first: float, prompt: int, cached: int | None, output: int
) -> RequestRecord:
    # Output is generated between first token and done, both inside the 60 s window.
    return RequestRecord(
        engine=engine,
        session=0,
        trajectory="t0",
        agent="main",
        turn=int(first),
        scheduled_s=first - 1,
        sent_s=first - 1,
        first_token_s=first,
        done_s=first + 5,
        prompt_tokens=prompt,
        cached_tokens=cached,
        output_tokens=output,
        expected_output_tokens=output,
    )


def write_run(root: Path, engines: list[dict[str, Any]], records: list[RequestRecord]) -> Path:
    run_dir = root / "run-1"
    with RunWriter(
        run_dir, Manifest.model_validate({"engines": engines, "config": {"window": [0, 60]}})
    ) as w:
        for r in records:
            w.add(r)
    return run_dir


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    # One-minute window, 2 GPUs per engine: per-GPU rates are half the engine's totals.
    return write_run(
        tmp_path,
        [
            {"name": "flashstate", "gpus": 2, "gpu_type": "B200"},
            {"name": "vllm", "gpus": 2, "gpu_type": "B200"},
            {"name": "sglang", "gpus": 2, "gpu_type": "B200"},
        ],
        [
            record("flashstate", 10, 100_000, 87_000, 600),
            record("flashstate", 20, 100_000, 87_000, 600),
            record("vllm", 10, 100_000, 30_000, 400),
            record("sglang", 10, 100_000, None, 400),  # reported no cached count
        ],
    )


def test_run_dir_prices_each_engine_from_its_window_metrics(run_dir: Path) -> None:
    result = invoke(str(run_dir), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["window_s"] == [0.0, 60.0] and data["sheet"] == "zai-glm"
    by_engine = {e["engine"]: e for e in data["engines"]}
    fs = by_engine["flashstate"]
    assert fs["prompt_tokens_per_min_per_gpu"] == 100_000  # 200K prompt tokens, 1 min, 2 GPUs
    assert fs["output_tokens_per_min_per_gpu"] == 600
    assert fs["hit_rate"] == 0.87 and fs["user_cost_per_m_input"] == 0.0456
    # 100K·60·$0.0456/1M + 600·60·$0.50/1M − $8.60
    assert fs["profit_per_gpu_hour"] == pytest.approx(0.2736 + 0.018 - 8.6, abs=1e-12)
    assert fs["gpu"] == "b200" and fs["gpus"] == 2
    assert by_engine["vllm"]["hit_rate"] == pytest.approx(0.30)
    assert [s["engine"] for s in data["skipped"]] == ["sglang"]


def test_run_dir_says_what_the_run_is_and_that_saturated_prices_are_ceilings(
    run_dir: Path,
) -> None:
    from types import SimpleNamespace

    import replay.commands.price_run as pr
    from analysis.provenance import EXECUTOR_WORDS

    data = json.loads(invoke(str(run_dir), "--json").stdout)
    assert data["provenance"]["executor"] in EXECUTOR_WORDS.values()
    assert data["ceilings"] is None  # nothing saturated: no note
    text = " ".join(invoke(str(run_dir)).stdout.split())
    assert "load against the demo's not measured" in text
    assert "ceiling" not in text
    one = SimpleNamespace(engine="vllm", saturated=True)
    note = pr.ceiling_note([one])  # type: ignore[list-item]
    assert note is not None and "saturated (vllm)" in note and "compare ceilings" in note


def test_run_dir_table_and_gpu_override(run_dir: Path) -> None:
    result = invoke(str(run_dir), "--gpu", "h100", "--sheet", "openai-style")
    assert result.exit_code == 0, result.output
    assert "flashstate" in result.stdout and "$6.16" in result.stdout
    assert "sglang: not priced" in " ".join(result.stderr.split())


def test_run_dir_window_flag(run_dir: Path) -> None:
    # --window is in minutes, as on every command: 0-0.25 min is the first 15 s.
    data = json.loads(invoke(str(run_dir), "--window", "0-0.25", "--json").stdout)
    fs = next(e for e in data["engines"] if e["engine"] == "flashstate")
    assert data["window_s"] == [0.0, 15.0]
    assert fs["prompt_tokens_per_min_per_gpu"] == 100_000 / 0.25 / 2  # one request in 15 s


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hit-rate", "0.5"], "--hit-rate: not used with RUN_DIR"),
        (["--window", "60-10"], "--window 60-10: need 0 ≤ A < B (minutes)"),
        (["--gpu", "tpu"], "--gpu: unknown GPU 'tpu'; choose one of: b200"),
        (["--sheet", "x"], "--sheet: unknown price sheet 'x'"),
    ],
)
def test_run_dir_bad_flags(run_dir: Path, args: list[str], message: str) -> None:
    result = invoke(str(run_dir), *args)
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split()), result.stderr


def test_run_dir_unknown_gpu_type_and_missing_run_are_named(tmp_path: Path) -> None:
    run = write_run(
        tmp_path, [{"name": "vllm", "gpus": 1, "gpu_type": "A100"}], [record("vllm", 5, 10, 1, 1)]
    )
    result = invoke(str(run))
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "engine 'vllm' runs on GPU 'A100'" in message and "pass --gpu" in message
    assert invoke(str(run), "--gpu", "b200").exit_code == 0
    missing = invoke(str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and "no such directory" in missing.stderr


def test_run_dir_where_nothing_can_be_priced_fails(tmp_path: Path) -> None:
    run = write_run(tmp_path, [{"name": "x", "gpus": 1}], [record("x", 5, 10, None, 1)])
    result = invoke(str(run), "--json")
    assert result.exit_code == 2
    assert "no engine could be priced" in " ".join(result.stderr.split())
    assert "the manifest names no GPU type" not in result.stderr  # skipped before GPU lookup


def test_a_run_at_the_demo_operating_point_prices_like_the_demo(tmp_path: Path) -> None:
    # One minute of each engine at the demo's per-engine rates (2 GPUs): the RUN_DIR path
    # must give the same exact figures as the point path.
    run = write_run(
        tmp_path,
        [{"name": n, "gpus": 2, "gpu_type": "B200"} for n in ("flashstate", "vllm", "sglang")],
        [
            record("flashstate", 10, 9_480_000, 8_247_600, 61_700),
            record("vllm", 10, 3_080_000, 924_000, 22_000),
            record("sglang", 10, 2_580_000, 154_800, 15_400),
        ],
    )
    data = json.loads(invoke(str(run), "--json").stdout)
    profit = {e["engine"]: e["profit_per_gpu_hour"] for e in data["engines"]}
    assert profit == pytest.approx({"flashstate": 5.29414, "vllm": 2.2636, "sglang": 2.68372})
    table = invoke(str(run)).stdout
    for shown in ("$0.0456", "$0.1140", "$0.1428", "$5.29", "$2.26", "$2.68", "50.41%"):
        assert shown in table


def _rates(tmp_path: Path, file: str, key: str, value: str) -> Path:
    """The shipped pricing folder with every `key:` of `file` set to `value`."""
    import re

    folder = tmp_path / "pricing"
    shutil.copytree(SHIPPED, folder)
    path = folder / file
    path.write_text(re.sub(rf"(?m)^(\s*{key}:\s*).*$", rf"\g<1>{value}", path.read_text()))
    return folder


@pytest.mark.parametrize(
    ("file", "key", "field"),
    [
        ("sheets.yaml", "input", "sheets.zai-glm.input"),
        ("sheets.yaml", "output", "sheets.zai-glm.output"),
        ("gpus.yaml", "rate_per_gpu_hour", "gpus.b200.rate_per_gpu_hour"),
    ],
)
def test_an_absurd_rate_in_a_pricing_file_names_its_field(
    tmp_path: Path, file: str, key: str, field: str
) -> None:
    """Issue 36: rates of 1e308 ended in a `decimal.InvalidOperation` traceback."""
    folder = _rates(tmp_path, file, key, "1.0e+308")
    result = invoke(*DEMO_POINT, "--pricing-dir", str(folder))
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"{file}: field '{field}': must be at most 1,000,000 US dollars per" in text
    assert "Traceback" not in text


def test_an_absurd_token_rate_names_its_flag_and_the_largest_still_prices() -> None:
    for flag in ("--prompt-tokens-per-min-per-gpu", "--output-tokens-per-min-per-gpu"):
        args = list(DEMO_POINT)
        args[args.index(flag) + 1] = "1e308"
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert f"{flag}: must be at most 1,000,000,000,000 tokens per minute" in result.output
    big = ["--hit-rate", "0.5", "--prompt-tokens-per-min-per-gpu", "1e12",
           "--output-tokens-per-min-per-gpu", "1e12"]  # fmt: skip
    assert invoke(*big).exit_code == 0


def test_the_largest_rates_of_a_file_still_price(tmp_path: Path) -> None:
    folder = _rates(tmp_path, "sheets.yaml", "(?:input|cached|output)", "1000000")
    result = invoke("--hit-rate", "0.5", "--prompt-tokens-per-min-per-gpu", "1e12",
                    "--output-tokens-per-min-per-gpu", "1e12", "--pricing-dir", str(folder))  # fmt: skip
    assert result.exit_code == 0, result.output
