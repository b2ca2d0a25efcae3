from __future__ import annotations

from replay.client.orchestrate import token_scale
from replay.engines.preflight import PreflightReport


def _report(**info: object) -> PreflightReport:
    return PreflightReport(
        url="http://127.0.0.1:1", kind="vllm", model=None, server_info=dict(info)
    )


def test_token_scale_from_emulators_that_agree() -> None:
    assert token_scale([_report(token_scale=16), _report(token_scale=16.0)]) == 16.0


def test_token_scale_is_one_for_real_engines_or_disagreement() -> None:
    assert token_scale([_report(), _report()]) == 1.0
    assert token_scale([_report(token_scale=16), _report(token_scale=8)]) == 1.0
    assert token_scale([_report(token_scale=True)]) == 1.0
