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


def test_base64_of_userinfo_and_key_is_masked_bare(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24: a server echoing the bare base64 of `user:password` (no `Basic` before it)
    or of a configured key, in any alphabet, padded or not, or percent-encoded."""
    import base64
    from urllib.parse import quote

    monkeypatch.setenv("MY_KEY", "key/with+odd=chars")
    s = Scrubber.for_engines(["http://probe:s3cret-pass@h"], ["MY_KEY"])
    pair = base64.b64encode(b"probe:s3cret-pass").decode()
    key64 = base64.urlsafe_b64encode(b"key/with+odd=chars").decode().rstrip("=")
    body = f"seen {pair} and {key64} and {quote('key/with+odd=chars', safe='')} end"
    out = s.text(body)
    for leaked in (pair, pair.rstrip("="), key64, quote("key/with+odd=chars", safe="")):
        assert leaked not in out
    assert out.startswith("seen *** and *** and *** end")


def test_written_url_keeps_an_environment_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    from replay.redact import UrlEnvError, expand_url_env, url_with_env_ref

    ref, changed = url_with_env_ref("http://u:SEKRIT@host:8000/v1", "REPLAY_AUTH_VLLM")
    assert changed and ref == "http://${REPLAY_AUTH_VLLM}@host:8000/v1" and "SEKRIT" not in ref
    assert url_with_env_ref("http://host:8000", "X") == ("http://host:8000", False)
    monkeypatch.delenv("REPLAY_AUTH_VLLM", raising=False)
    with pytest.raises(UrlEnvError, match=r"--config rc.yaml: .*\$\{REPLAY_AUTH_VLLM\}, which is"):
        expand_url_env(ref, "--config rc.yaml")
    monkeypatch.setenv("REPLAY_AUTH_VLLM", "u:SEKRIT")
    assert expand_url_env(ref, "x") == "http://u:SEKRIT@host:8000/v1"


def test_every_encoding_a_server_plausibly_echoes_is_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 36's probes: a password echoed hex-encoded, or base64-encoded at another byte
    alignment (one or two characters before `user:password`); an API key's hex and
    upper-case forms, and the second half of a key split in two."""
    import base64

    key = "sk-live-4f9a8b7c6d5e4f3a2b1c"
    monkeypatch.setenv("MY_KEY", key)
    s = Scrubber.for_engines(["http://probe:s3cret-pass-77@h"], ["MY_KEY"])
    pair = b"probe:s3cret-pass-77"
    echoes = {
        "hex password": b"s3cret-pass-77".hex(),
        "HEX password": b"s3cret-pass-77".hex().upper(),
        "base64, 1 byte before": base64.b64encode(b"x" + pair).decode(),
        "base64, 2 bytes before": base64.b64encode(b"xy" + pair).decode(),
        "url-safe base64, 1 byte before and after": base64.urlsafe_b64encode(
            b"\xfb" + pair + b"\xff"
        ).decode(),
        "hex key": key.encode().hex(),
        "HEX key": key.encode().hex().upper(),
        "upper-case key": key.upper(),
        "second half of a split key": key[len(key) // 2 :],
    }
    for what, echoed in echoes.items():
        out = s.text(f"server said <{echoed}> ok")
        assert out.startswith("server said <") and out.endswith("> ok"), (what, out)
        inner = out[len("server said <") : -len("> ok")]
        assert "***" in inner, (what, out)
        # What is left around the mask is at most the characters shared with the unknown
        # neighbours (3 before, a partial group and its padding after: under 2 bytes).
        assert len(inner.replace("***", "")) <= 7, (what, out)
    # Text that merely shares a few characters with a secret is left alone.
    assert s.text("sk-live is our prefix; pass-77 too") == "sk-live is our prefix; pass-77 too"
