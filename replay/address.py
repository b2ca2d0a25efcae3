"""Where an engine server listens: a TCP port in range, and a base URL the client can reach.

One check for every place a port or an engine URL enters: `replay serve-sim --port` (and the
emulator's config however it arrives), `replay engines launch|show --port`, an engine
config's `serve.port`, and the URL of `replay engines preflight URL` and `run-config
NAME=URL`. A value out of range used to pass to the server, which died with its own
traceback (`OverflowError: bind(): port must be 0-65535`), or into a rendered command or a
run config that failed later. Functions return the problem as text (None: fine); the caller
names its flag or argument in front of it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import AfterValidator

MAX_PORT = 65535
_RANGE = f"must be between 1 and {MAX_PORT}"
_FREE = " (or 0 for a free one)"
EXAMPLE_URL = "http://127.0.0.1:8000"
# A scheme as URLs spell it (RFC 3986), then a slash: what tells a URL, or an attempt at one
# (`http:/x`, a slash lost), from a config name or a file path. One
# slash is enough: `http:/x` was looked up as a config file and refused as "file not found".
# Two letters at least, so a drive letter (`C:/`) is never read as a scheme.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")
_SHOWN_DIGITS = 24  # a longer port is cut when shown


def port_problem(port: int, *, zero_picks_free: bool = False) -> str | None:
    """`70000: must be between 1 and 65535` where `port` is no port a server can listen on
    (0 too, unless `zero_picks_free`: where 0 asks the system for a free port); None: fine."""
    if 1 <= port <= MAX_PORT or (zero_picks_free and port == 0):
        return None
    return f"{_shown(str(port))}: {_RANGE}{_FREE if zero_picks_free else ''}"


def port_check(*, zero_picks_free: bool = False, named: str = "") -> AfterValidator:
    """`port_problem` as a pydantic field's check (an engine config's `serve.port`, the
    emulator's `port`), its message led by `named` (e.g. "--port ")."""

    def check(port: int) -> int:
        if (problem := port_problem(port, zero_picks_free=zero_picks_free)) is not None:
            raise ValueError(f"{named}{problem}")
        return port

    return AfterValidator(check)


def is_url(text: str) -> bool:
    """Whether `text` is spelled as a URL (`scheme:/…`, the slashes miscounted or not), not a
    config name or a path: `url_problem` then says what is wrong with it."""
    return _SCHEME.match(text) is not None


def url_problem(url: str) -> str | None:
    """Why `url` is no engine base URL (None: it is one): only http:// or https://, with a
    host, and a port (if given) in 1..65535."""
    try:
        parts = urlsplit(url)
    except ValueError as e:  # an unclosed IPv6 bracket
        return f"not a URL ({e}); give the engine's base URL, e.g. {EXAMPLE_URL}"
    if parts.scheme.lower() not in ("http", "https"):
        return f"only http:// or https:// URLs reach an engine, e.g. {EXAMPLE_URL}"
    if not parts.hostname:
        return f"the URL has no host; give the engine's host and port, e.g. {EXAMPLE_URL}"
    return _url_port_problem(parts.netloc)


def _url_port_problem(netloc: str) -> str | None:
    """The port of a URL's `netloc` out of range or no number (None: fine, or none given)."""
    text = _port_text(netloc)
    if not text:  # none given (or `host:`): the scheme's own
        return None
    if not re.fullmatch(r"-?[0-9]+", text):
        return f"port {_shown(text)!r} is not a number; e.g. {EXAMPLE_URL}"
    # A port of more digits than any in range is out of it (and int() of 5,000 digits fails).
    if len(text) <= _SHOWN_DIGITS and port_problem(int(text)) is None:
        return None
    return f"port {_shown(text)}: {_RANGE}"


def _port_text(netloc: str) -> str | None:
    """What follows the host's last colon in `netloc` (None: no port; an IPv6 address's
    colons are inside its brackets)."""
    host = netloc.rpartition("@")[2]
    if host.endswith("]") or ":" not in host:
        return None
    return host.rpartition(":")[2]


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_DIGITS else f"{text[:_SHOWN_DIGITS]}…"
