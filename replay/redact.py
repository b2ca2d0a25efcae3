"""Secrets never reach disk or console: URL userinfo, API keys and bearer tokens are masked.

`redact_url` masks the `user:password@` part of a URL (kept: scheme, host, port, path), for
every URL that is stored (manifest.json) or printed (preflight, the run's banner).
`Scrubber` masks free text a server sent back (error bodies, which may echo a request's
headers or URL): the configured keys in every encoding a server may echo them in (verbatim,
base64 standard and URL-safe with or without padding, percent-encoded; for URL userinfo also
the base64 of `user:password`, as an HTTP Basic header carries it, bare or not), `Bearer
<token>`, `key=`/`token=` query values and URL userinfo, and truncates it to `MAX_ERROR_CHARS`.

`url_with_env_ref` and `expand_url_env` keep credentials out of written config files: the
file holds `http://${VAR}@host` and the variable holds `user:password`.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

MASK = "***"
MAX_ERROR_CHARS = 500  # an error body longer than this is cut (with a note of its length)
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s\"']+@")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")
_QUERY_SECRET = re.compile(r"(?i)\b(api[_-]?key|access[_-]?token|token|key)=[^&\s\"']+")
_OPENAI_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def redact_url(url: str | None) -> str | None:
    """`url` with any `user:password@` replaced by `***@`, and the value of a secret-named
    query parameter (`?key=`, `api_key=`, `token=`, `access_token=`) by `***`; other parts
    unchanged."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return _QUERY_SECRET.sub(
            _masked_query, _USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", url)
        )
    masked = parts
    if parts.query:
        masked = masked._replace(query=_QUERY_SECRET.sub(_masked_query, parts.query))
    if "@" in parts.netloc:
        host = parts.netloc.rsplit("@", 1)[1]
        masked = masked._replace(netloc=f"{MASK}@{host}")
    # Unchanged: the URL as given (`urlunsplit` respells some, e.g. `http:/x` as `http:///x`).
    return url if masked == parts else urlunsplit(masked)


def _masked_query(m: re.Match[str]) -> str:
    return f"{m.group(1)}={MASK}"


def redact_urls_in(text: str) -> str:
    """`text` with the `user:password@` of every URL in it masked: a flag's value that holds
    URLs without being one (`--endpoint NAME=URL1,URL2`), which `redact_url` leaves whole."""
    return _USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)


def url_secrets(url: str | None) -> list[str]:
    """The user name and password embedded in `url` (to scrub wherever they are echoed)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [s for s in (parts.username, parts.password) if s and len(s) >= 4]
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    if ":" in userinfo:
        found.append(unquote(userinfo))  # `user:password`, whose base64 a Basic header carries
    return found


def encodings(secret: str) -> set[str]:
    """`secret` as a server may echo it: verbatim, hex, base64 (standard and URL-safe, with
    and without padding, and at each byte alignment: the secret inside a longer encoded
    string, e.g. `Basic base64(x + user:password)`) and percent-encoded. Matching ignores
    case (`Scrubber`), so upper- and lower-case forms are one."""
    raw = secret.encode()
    out = {secret, quote(secret, safe=""), quote(secret), raw.hex()}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        text = encode(raw).decode()
        out |= {text, text.rstrip("=")}
        out |= {_aligned(encode, raw, k) for k in (1, 2)}
    return {o for o in out if len(o) >= 4}


def _aligned(encode: Any, raw: bytes, k: int) -> str:
    """The base64 characters that encode `raw` alone when `k` unknown bytes precede it and
    unknown bytes may follow: whole 3-byte groups only, less the characters the `k` bytes
    share (2 for k=1, 3 for k=2)."""
    text: str = encode(b"\0" * k + raw).decode()
    whole = (k + len(raw)) // 3 * 4
    return text[{1: 2, 2: 3}[k] : whole]


# A fragment of a secret this long is masked wherever it stands (a key split across lines, its
# second half echoed alone); shorter secrets are masked whole only.
FRAGMENT_CHARS = 12


class UrlEnvError(ValueError):
    """A `${VAR}` in a URL names a variable that is not set."""


def url_with_env_ref(url: str, var: str) -> tuple[str, bool]:
    """`url` with its `user:password@` replaced by `${var}@` (True), or unchanged (False)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, False
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"${{{var}}}@{host}")), True


def query_with_env_ref(url: str, var: str) -> tuple[str, str | None]:
    """`url` with the value of its secret-named query parameter (`?key=…`, as
    `redact_url` masks) replaced by `${var}`, and the value replaced (None: none there).
    One such parameter per URL; a second one is masked by `redact_url` where shown."""
    parts = urlsplit(url)
    m = _QUERY_SECRET.search(parts.query)
    if m is None:
        return url, None
    value = m.group(0).split("=", 1)[1]
    query = parts.query[: m.start()] + f"{m.group(1)}=${{{var}}}" + parts.query[m.end() :]
    return urlunsplit(parts._replace(query=query)), value


def expand_url_env(url: str, where: str) -> str:
    """`url` with every `${VAR}` replaced by the variable's value; UrlEnvError naming
    `where` and the variable when one is unset."""

    def value(m: re.Match[str]) -> str:
        got = os.environ.get(m.group(1))
        if got is None:
            raise UrlEnvError(
                f"{where}: the URL refers to ${{{m.group(1)}}}, which is not set; export "
                f"{m.group(1)}='user:password' (the credentials kept out of the file)"
            )
        return got

    return _ENV_REF.sub(value, url)


class Scrubber:
    """Masks known secrets and secret-shaped text in strings (and in nested JSON values)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = [s for s in secrets if s and len(s) >= 4]
        # Longest first, so a key containing another is masked whole; matched ignoring case.
        forms = sorted({e.lower() for s in kept for e in encodings(s)}, key=len, reverse=True)
        self.secrets = forms
        self._pattern = (
            re.compile("|".join(re.escape(f) for f in forms), re.IGNORECASE) if forms else None
        )
        # Every FRAGMENT_CHARS-long piece of a long secret (verbatim and hex), lower-cased.
        self._pieces = {
            form[i : i + FRAGMENT_CHARS]
            for s in kept
            for form in (s.lower(), s.encode().hex())
            if len(form) > FRAGMENT_CHARS
            for i in range(len(form) - FRAGMENT_CHARS + 1)
        }

    def _fragments(self, text: str) -> str:
        """`text` with every run that holds a FRAGMENT_CHARS-long piece of a secret masked."""
        if not self._pieces or len(text) < FRAGMENT_CHARS:
            return text
        low = text.lower()
        spans: list[list[int]] = []
        for i in range(len(low) - FRAGMENT_CHARS + 1):
            if low[i : i + FRAGMENT_CHARS] in self._pieces:
                if spans and i <= spans[-1][1]:
                    spans[-1][1] = i + FRAGMENT_CHARS
                else:
                    spans.append([i, i + FRAGMENT_CHARS])
        for start, end in reversed(spans):
            text = text[:start] + MASK + text[end:]
        return text

    @classmethod
    def for_engines(cls, urls: Iterable[str | None], key_envs: Iterable[str]) -> Scrubber:
        """The secrets of a run: URL userinfo and the values of the API-key variables."""
        found: list[str] = []
        for url in urls:
            found += url_secrets(url)
        for env in key_envs:
            value = os.environ.get(env)
            if value:
                found.append(value)
        return cls(found)

    def text(self, value: str, limit: int | None = None) -> str:
        out = self._pattern.sub(MASK, value) if self._pattern is not None else value
        out = self._fragments(out)
        out = _USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", out)
        out = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", out)
        out = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}={MASK}", out)
        out = _OPENAI_KEY.sub(MASK, out)
        if limit is not None and len(out) > limit:
            out = out[:limit] + f"… ({len(out) - limit} more characters cut)"
        return out

    def error(self, value: str | None) -> str | None:
        """An error message or body for a record: scrubbed and at most MAX_ERROR_CHARS."""
        return None if value is None else self.text(value, MAX_ERROR_CHARS)

    def obj(self, value: Any) -> Any:
        """Every string inside a JSON-like value scrubbed (for manifests)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.obj(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value


__all__ = [
    "MASK",
    "MAX_ERROR_CHARS",
    "Scrubber",
    "UrlEnvError",
    "encodings",
    "expand_url_env",
    "query_with_env_ref",
    "redact_url",
    "redact_urls_in",
    "url_secrets",
    "url_with_env_ref",
]
