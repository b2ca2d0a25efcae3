"""Secrets in URLs and server error bodies are masked before anything is stored or shown."""

from __future__ import annotations

import pytest

from replay.redact import MAX_ERROR_CHARS, Scrubber, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pa55word@host:8000/v1", "http://***@host:8000/v1"),
        ("https://token@api.example.com", "https://***@api.example.com"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        (None, None),
    ],
)
def test_redact_url_masks_userinfo_only(url: str | None, shown: str | None) -> None:
    assert redact_url(url) == shown


def test_scrubber_masks_keys_tokens_and_userinfo_and_truncates() -> None:
    s = Scrubber.for_engines(["http://alice:pa55word-x@h"], [])
    body = (
        "denied for key sk-abcdefghijklmnop, header Authorization: Bearer abc.def-123, "
        "url http://bob:hunter22@h/v1?api_key=zzz9&x=1, user pa55word-x" + "!" * 2000
    )
    out = s.error(body)
    assert out is not None
    for secret in ("sk-abcdefghijklmnop", "abc.def-123", "hunter22", "zzz9", "pa55word-x"):
        assert secret not in out
    assert "Bearer ***" in out and "http://***@h/v1?api_key=***&x=1" in out
    assert len(out) < MAX_ERROR_CHARS + 60 and "more characters cut" in out


def test_configured_key_is_masked_wherever_it_appears(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "plain-key-without-prefix")
    s = Scrubber.for_engines([], ["MY_KEY"])
    assert s.obj({"a": ["x plain-key-without-prefix y"]}) == {"a": ["x *** y"]}
