"""The run's SLO: the config file's `slo` over analysis.slo's defaults, then --slo over that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.runspec.resolve import SpecError


def run_slo(flag: str | None, below: Any, config: Path | None) -> dict[str, float | None]:
    """`below`: the config file's `slo` (text or mapping), or a resumed run's stored SLO."""
    from analysis.slo import Slo, SloError, parse_slo, slo_from_dict

    try:
        base = Slo()
        if isinstance(below, str):
            base = parse_slo(below, where=f"--config {config}: field 'slo'")
        elif isinstance(below, dict):
            where = f"--config {config}: slo" if config is not None else "manifest.json: slo"
            base = slo_from_dict({**base.model_dump(), **below}, where)
        return parse_slo(flag or "", base).model_dump()
    except SloError as e:
        raise SpecError(str(e)) from None


__all__ = ["run_slo"]
