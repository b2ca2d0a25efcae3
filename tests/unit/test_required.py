"""`tests.required.missing`: a missing optional part skips, unless the run requires it."""

from __future__ import annotations

import pytest

from tests.required import PEERS, VLLM, missing


def test_missing_skips_when_not_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VLLM, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no vLLM here"):
        missing("no vLLM here")


@pytest.mark.parametrize("env", [VLLM, PEERS])
def test_missing_fails_when_required(monkeypatch: pytest.MonkeyPatch, env: str) -> None:
    monkeypatch.setenv(env, "1")
    with pytest.raises(pytest.fail.Exception, match=f"no part here — {env}=1 makes this a failure"):
        missing("no part here", env)
