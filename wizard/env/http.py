"""The one HTTP client for Ray dashboard calls (`check --mode cluster`, the wizard's probe, doctor).

Standard library only; its callers import it inside the functions that need it (`verl-init --help`
stays fast). Every request is bounded and keeps credentials where they belong:

- a wall-clock deadline for the whole request (connect, headers and body together, not per read): a
  watchdog shuts the socket down when it passes, so a server that drips a byte a second cannot hold
  it; a `Deadline` shared by the requests of one command bounds the command as well;
- a cap on the response body (`MAX_BODY_BYTES`, read in chunks): past it the request fails, so an
  endless body cannot grow memory;
- redirects followed only within the same origin (scheme, host and port), at most `MAX_REDIRECTS`;
  a redirect to another origin is refused, so the Authorization header (Ray's token) is never sent
  anywhere but the dashboard it was meant for;
- credentials written into a URL (`http://user:password@host:8265`) are sent as HTTP Basic auth to
  that origin only (when no Ray token is given), and are redacted (`http://***@host:8265`) in every
  message and exception text (`redact`).

Name resolution (getaddrinfo) cannot be interrupted, and an https dashboard's TLS handshake is bounded per
read (by the time left) rather than by the watchdog; everything after it is bounded by the wall clock.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_REDIRECTS = 3
CHUNK = 64 * 1024
REDIRECTS = (301, 302, 303, 307, 308)

# scheme://userinfo@ (userinfo up to the last '@' of the word: a password may hold '/' or ':'), and a bare
# user:password@ at the start of a word (a GCS address written with credentials).
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s@]*@")
_BARE_USERINFO = re.compile(r"(^|[\s'\"=(,\[])[^\s@/'\"=(,\[]+:(?!//)[^\s@'\"]*@")


def redact(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by `***` (`http://***@host:8265`)."""
    text = _URL_USERINFO.sub(r"\1***@", str(text))
    return _BARE_USERINFO.sub(r"\1***@", text)


class Deadline:
    """A wall-clock budget shared by several requests (one command)."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.end = time.monotonic() + self.seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()


class HttpError(Exception):
    """A dashboard request that failed. `kind`: connect, timeout, too_large, redirect or invalid; `str()` is one
    line naming the URL (redacted), the limit and what to do."""

    def __init__(self, kind: str, url: str, message: str, hint: str = "", status: int | None = None):
        self.kind = kind
        self.url = redact(url)
        self.message = redact(message)
        self.hint = redact(hint)
        self.status = status
        super().__init__(self.message + (f" — {self.hint}" if self.hint else ""))


@dataclass
class Response:
    status: int
    url: str  # the final URL (after same-origin redirects), redacted
    body: bytes = field(repr=False)
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return json.loads(self.body.decode("utf-8"))


def _origin(parts: urllib.parse.SplitResult) -> tuple[str, str, int]:
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def _split(url: str) -> urllib.parse.SplitResult:
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise HttpError("invalid", url, f"not a valid URL ({redact(url)}: {exc})",
                        "pass the dashboard URL, e.g. http://HEAD:8265") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise HttpError("invalid", url, f"not an http(s) URL ({redact(url)})",
                        "pass the dashboard URL, e.g. http://HEAD:8265")
    return parts


def _without_userinfo(parts: urllib.parse.SplitResult) -> str:
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def get(url: str, *, timeout: float, deadline: Deadline | None = None, token: str | None = None,
        headers: Mapping[str, str] | None = None, max_bytes: int = MAX_BODY_BYTES) -> Response:
    """GET `url` within `timeout` seconds of wall clock (and within `deadline`, when given), with a body of at most
    `max_bytes`; `token` goes in `Authorization: Bearer`, to this origin only. Any status is returned (the caller
    judges 4xx/5xx); connection failures, the deadline, the cap and cross-origin redirects raise HttpError."""
    end = time.monotonic() + max(0.0, timeout)
    limit = max(0.0, timeout)
    if deadline is not None and deadline.end < end:
        end, limit = deadline.end, deadline.seconds
    parts = _split(url)
    origin = _origin(parts)
    sent = {"User-Agent": "verl-init", "Accept": "application/json", **(headers or {})}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    elif parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        sent["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    current = parts
    for _hop in range(MAX_REDIRECTS + 1):
        response, location = _once(current, sent, end, limit, max_bytes)
        if location is None:
            return response
        shown = redact(_without_userinfo(current))
        try:
            target = urllib.parse.urlsplit(urllib.parse.urljoin(_without_userinfo(current), location))
            target_origin = _origin(target)
        except ValueError:
            raise HttpError("redirect", url, f"{shown} redirects to an invalid URL ({redact(location)!r})",
                            "pass the Ray dashboard's own URL") from None
        if target_origin != origin or target.username is not None:
            raise HttpError(
                "redirect", url,
                f"{shown} redirects (HTTP {response.status}) to another origin, {redact(target.geturl())}; not followed, "
                "so neither a request nor Ray's token goes there",
                "pass the Ray dashboard's own URL as the address (the redirect target, if you trust it)")
        current = target
    raise HttpError("redirect", url, f"{redact(url)} redirects more than {MAX_REDIRECTS} times",
                    "pass the Ray dashboard's own URL")


def _once(parts: urllib.parse.SplitResult, headers: Mapping[str, str], end: float, limit: float,
          max_bytes: int) -> tuple[Response, str | None]:
    """One GET: (the response, its Location header when it is a redirect)."""
    shown = redact(_without_userinfo(parts))
    timeout_error = HttpError(
        "timeout", shown, f"{shown} did not answer completely within {limit:g} s (wall-clock deadline)",
        "check that the address is the Ray dashboard and that the head is up (a stalled head or proxy can hold a "
        "connection open)")
    remaining = end - time.monotonic()
    if remaining <= 0:
        raise timeout_error
    cls = http.client.HTTPSConnection if parts.scheme.lower() == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname or "", parts.port, timeout=remaining)
    box: dict[str, Any] = {}
    expired = threading.Event()

    def expire() -> None:  # the watchdog: a blocked read returns once its socket is shut down
        expired.set()
        sock = box.get("sock")
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(remaining, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.connect()
        box["sock"] = sock = conn.sock
        if expired.is_set():
            raise timeout_error
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        conn.request("GET", path, headers=dict(headers))
        resp = conn.getresponse()
        if resp.status in REDIRECTS and resp.getheader("Location"):
            location = resp.getheader("Location") or ""
            return Response(resp.status, shown, b""), location
        declared = resp.getheader("Content-Length") or ""
        if declared.strip().isdigit() and int(declared) > max_bytes:
            raise _too_large(shown, max_bytes, f"it announces {int(declared)} bytes")
        chunks: list[bytes] = []
        total = 0
        while True:
            left = end - time.monotonic()
            if left <= 0 or expired.is_set():
                raise timeout_error
            sock.settimeout(left)
            chunk = resp.read1(CHUNK)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(shown, max_bytes, "its body does not end there")
            chunks.append(chunk)
        if expired.is_set():
            raise timeout_error
        heads = {k.lower(): v for k, v in resp.getheaders()}
        return Response(resp.status, shown, b"".join(chunks), heads), None
    except HttpError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if expired.is_set() or time.monotonic() >= end or isinstance(exc, (socket.timeout, TimeoutError)):
            raise timeout_error from None
        reason = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
        raise HttpError("connect", shown, f"no Ray cluster answers at {shown} ({redact(reason)})",
                        "start it (ray start --head ...) or pass the dashboard URL, e.g. http://HEAD:8265") from None
    finally:
        watchdog.cancel()
        conn.close()


def _too_large(shown: str, max_bytes: int, why: str) -> HttpError:
    return HttpError("too_large", shown,
                     f"the answer from {shown} is larger than {max_bytes // (1024 * 1024)} MiB ({why}); not read further",
                     "check that the address is the Ray dashboard (a Ray dashboard's answers are far smaller)")
