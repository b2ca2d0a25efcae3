"""Price sheets and GPU rates: the shipped data loads, and every bad file names itself."""

from __future__ import annotations

import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from pricing import (
    PricingConfigError,
    UnknownNameError,
    default_pricing_dir,
    get_gpu_rate,
    get_sheet,
    load_gpu_rates,
    load_sheets,
)

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "configs" / "pricing"


@pytest.fixture
def pricing_dir(tmp_path: Path) -> Path:
    """A writable copy of the shipped pricing folder."""
    target = tmp_path / "pricing"
    shutil.copytree(SHIPPED, target)
    return target


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"fixture drifted: {old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1))


def test_shipped_sheets_hold_the_reference_list_and_a_write_premium_sheet() -> None:
    sheets = load_sheets(SHIPPED)
    assert sheets.default == "zai-glm"
    zai = sheets.entries["zai-glm"]
    assert (zai.input, zai.cached, zai.output) == (Decimal("0.15"), Decimal("0.03"), Decimal("0.5"))
    assert zai.cache_write is None and zai.write_price == zai.input
    assert zai.cached_discount == Decimal("0.8")
    premium = [s for s in sheets.entries.values() if s.cache_write is not None]
    assert premium, "one sheet must bill cache writes above input"
    anthropic = sheets.entries["anthropic-style-5m"]
    assert anthropic.write_multiplier == Decimal("1.25")
    assert anthropic.cached / anthropic.input == Decimal("0.1")
    for sheet in sheets.entries.values():
        assert (
            sheet.source
            and sheet.date
            and sheet.status
            in {
                "published",
                "reported",
                "illustrative",
            }
        )


def test_shipped_gpu_rates_cover_b200_h100_h200_gb300() -> None:
    gpus = load_gpu_rates(SHIPPED)
    assert gpus.default == "b200"
    assert {g.gpu for g in gpus.entries.values()} >= {"B200", "H100", "H200", "GB300"}
    b200 = gpus.entries["b200"]
    assert b200.rate_per_gpu_hour == Decimal("8.60") and b200.provider == "CoreWeave"


def test_default_dir_is_beside_the_package_and_follows_replay_config_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("REPLAY_CONFIG_DIR", raising=False)
    assert default_pricing_dir() == SHIPPED
    shutil.copytree(SHIPPED, tmp_path / "pricing")
    _edit(tmp_path / "pricing" / "gpus.yaml", "rate_per_gpu_hour: 8.60", "rate_per_gpu_hour: 7.25")
    monkeypatch.setenv("REPLAY_CONFIG_DIR", str(tmp_path))
    assert default_pricing_dir() == tmp_path / "pricing"
    assert get_gpu_rate().rate_per_gpu_hour == Decimal("7.25")


def test_lookup_by_name_and_by_gpu_model_case_insensitively() -> None:
    assert get_gpu_rate("B200", SHIPPED).name == "b200"
    assert get_gpu_rate("h100", SHIPPED).gpu == "H100"
    assert get_sheet(None, SHIPPED).name == "zai-glm"


@pytest.mark.parametrize(("getter", "kind"), [(get_sheet, "price sheet"), (get_gpu_rate, "GPU")])
def test_unknown_names_list_the_choices(getter: object, kind: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        getter("nope", SHIPPED)  # type: ignore[operator]
    assert info.value.kind == kind and info.value.name == "nope"
    assert "zai-glm" in str(info.value) or "b200" in str(info.value)
    assert info.value.choices


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        (
            "sheets.yaml",
            "    cached: 0.03\n",
            "    cahced: 0.03\n",
            "field 'sheets.zai-glm.cahced': unknown key (did you mean 'cached'?)",
        ),
        (
            "sheets.yaml",
            "    cached: 0.03\n",
            "    cached: -0.03\n",
            "field 'sheets.zai-glm.cached'",
        ),
        (
            "sheets.yaml",
            "    output: 0.50\n",
            "    output: .nan\n",
            "field 'sheets.zai-glm.output'",
        ),
        (
            "sheets.yaml",
            "    output: 0.50\n",
            "",
            "field 'sheets.zai-glm.output': required key is missing",
        ),
        (
            "sheets.yaml",
            "    status: reported\n",
            "    status: guessed\n",
            "field 'sheets.zai-glm.status'",
        ),
        ("sheets.yaml", "default: zai-glm\n", "default: missing-sheet\n", "field 'default'"),
        (
            "sheets.yaml",
            "default: zai-glm\n",
            "default: zai-glm\ncurrency: EUR\n",
            "field 'currency': unknown key",
        ),
        (
            "gpus.yaml",
            "rate_per_gpu_hour: 8.60",
            "rate_per_gpu_hour: -1",
            "field 'gpus.b200.rate_per_gpu_hour'",
        ),
        (
            "gpus.yaml",
            "    provider: CoreWeave\n",
            "    vendor: CoreWeave\n",
            "field 'gpus.b200.vendor': unknown key",
        ),
        (
            "gpus.yaml",
            "  b200:\n",
            "  b200:\n    name: other\n",
            "field 'gpus.b200.name': unknown key",
        ),
    ],
)
def test_bad_files_name_the_file_and_the_field(
    pricing_dir: Path, file: str, old: str, new: str, expected: str
) -> None:
    _edit(pricing_dir / file, old, new)
    loader = load_sheets if file == "sheets.yaml" else load_gpu_rates
    with pytest.raises(PricingConfigError) as info:
        loader(pricing_dir)
    message = str(info.value)
    assert message.startswith(f"{pricing_dir / file}: ")
    assert expected in message


def test_negative_price_message_says_what_was_wrong(pricing_dir: Path) -> None:
    _edit(pricing_dir / "sheets.yaml", "    input: 0.15\n", "    input: -0.15\n")
    with pytest.raises(PricingConfigError, match=r"greater than or equal to 0 \(got -0\.15\)"):
        load_sheets(pricing_dir)


def test_missing_file_and_broken_yaml_are_named(pricing_dir: Path) -> None:
    (pricing_dir / "gpus.yaml").unlink()
    with pytest.raises(PricingConfigError, match=r"gpus\.yaml: missing; .*REPLAY_CONFIG_DIR"):
        load_gpu_rates(pricing_dir)
    (pricing_dir / "sheets.yaml").write_text("sheets: [unclosed\n")
    with pytest.raises(PricingConfigError, match=r"sheets\.yaml: not valid YAML"):
        load_sheets(pricing_dir)
    (pricing_dir / "sheets.yaml").write_text("- a list\n")
    with pytest.raises(PricingConfigError, match=r"sheets\.yaml: expected a mapping"):
        load_sheets(pricing_dir)


def test_prices_are_exact_decimals_not_binary_floats() -> None:
    sheet = get_sheet("deepseek-style", SHIPPED)
    assert sheet.cached == Decimal("0.028")  # not 0.0280000000000000006...
    assert get_gpu_rate("h100", SHIPPED).rate_per_gpu_hour == Decimal("6.155")


def test_pricing_imports_nothing_else_of_ours() -> None:
    code = (
        "import sys, pricing, pricing.bills, pricing.whatif\n"
        "ours = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('replay', 'analysis', 'dashboards'))\n"
        "assert not ours, ours\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
