"""The http_check tool: requests an HTTP(S) URL and reports status, timing, key headers and a body preview."""

from __future__ import annotations

import asyncio
import codecs
import socket
import ssl
import time
from collections.abc import Mapping
from typing import Any

import httpx

from ..model import Annotations, Example, Parameter
from .base import Tool, ToolContext, ToolRaisedFailure
from .egress import EgressPolicy, current_policy
from .net import describe_os_error, elapsed_ms, format_seconds, resolve, time_budget

MAX_TIMEOUT_SECONDS = 60
MAX_REDIRECTS = 5
# Enough for any preview and for a charset to decode; a health page or an error body fits in it too. More is
# never read, so a huge or endless body costs nothing.
BODY_READ_LIMIT = 4096
PREVIEW_CHARS = 512
REPORTED_HEADERS = ("content-type", "location", "server")
USER_AGENT = "toolhost-http-check/1.0"

# http or https (any case), a host part without spaces or a user:password@ (the tool never sends
# credentials, and a URL is no place for them), then an optional path, query or fragment.
_URL_PATTERN = r"^[Hh][Tt][Tt][Pp][Ss]?://[^\s/?#@]+([/?#]\S*)?$"
_TEXT_TYPES = ("text/", "json", "xml", "javascript", "x-www-form-urlencoded")

_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "body_preview": {"type": ["string", "null"],
                         "description": f"The first {PREVIEW_CHARS} characters of a text body, else null."},
        "body_truncated": {"type": "boolean", "description": "Whether the body goes on past the preview."},
        "final_url": {"type": "string", "description": "The URL that answered, after any redirects."},
        "headers": {"type": "object",
                    "properties": {h: {"type": ["string", "null"]} for h in REPORTED_HEADERS}},
        "http_version": {"type": "string"},
        "latency_ms": {"type": "number", "description": "Time until the response headers arrived."},
        "method": {"type": "string"},
        "ok": {"type": "boolean", "description": "status_code == expected_status, or below 400 without one."},
        "reason": {"type": "string"},
        "redirects": {"type": "integer", "description": "How many redirects were followed."},
        "status_code": {"type": "integer"},
        "tls": {"type": "boolean", "description": "Whether the response came over HTTPS."},
        "url": {"type": "string"},
    },
    "required": ["body_preview", "body_truncated", "final_url", "headers", "http_version", "latency_ms",
                 "method", "ok", "reason", "redirects", "status_code", "tls", "url"],
}


class HttpCheck(Tool):
    name = "http_check"
    display_name = "HTTP Check"
    description = (
        "Requests an http:// or https:// URL from the toolhost server and reports the status code, whether "
        "it is the expected one (`ok`), the response time, the Content-Type, Server and Location headers, "
        "and a preview of the body (first 512 characters; at most 4 KB is read). Use it to check that a "
        "website, API or health endpoint is up, see where a URL redirects, or confirm a certificate works. "
        "Any HTTP response, including 404 or 500, is a successful check; the call fails when there is no "
        "response: unknown host, connection refused, TLS error or timeout, or an address (of the URL or of a "
        "redirect) that the server's egress policy does not allow: a cloud metadata address, or the "
        "server's own or a private address an operator did not open. "
        "Redirects are reported, not followed, unless follow_redirects is true. No credentials or cookies "
        "are sent."
    )
    category = "network"
    tags = ("network", "http", "web", "diagnostics")
    parameters = (
        Parameter("url", "string", "The http:// or https:// URL to request, for example 'https://example.com/health'.",
                  required=True, schema={"pattern": _URL_PATTERN, "maxLength": 2048}),
        Parameter("method", "string", "GET fetches the body too; HEAD only the status and headers.",
                  default="GET", enum=("GET", "HEAD")),
        Parameter("timeout_seconds", "number",
                  f"How long the whole check may take, in seconds (at most {MAX_TIMEOUT_SECONDS}).",
                  default=10, schema={"exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_SECONDS}),
        Parameter("follow_redirects", "boolean",
                  f"Follow up to {MAX_REDIRECTS} redirects and report the final response.", default=False),
        Parameter("expected_status", "integer",
                  "The status code that counts as ok; without it, any status below 400 does.",
                  schema={"minimum": 100, "maximum": 599}),
    )
    output_schema = _OUTPUT_SCHEMA
    # Room above the largest timeout_seconds argument, so the tool's own TIMEOUT (which says what it was
    # waiting for) comes before the pipeline's.
    timeout_seconds = MAX_TIMEOUT_SECONDS + 10
    examples = (
        Example("Is the site up?", {"url": "https://example.com"}),
        Example("Health endpoint that must answer 204",
                {"url": "https://api.example.com/healthz", "expected_status": 204}),
        Example("Where does this URL end up?", {"url": "http://example.com", "follow_redirects": True}),
        Example("Headers only, quickly",
                {"url": "https://example.com/big.iso", "method": "HEAD", "timeout_seconds": 5}),
    )
    annotations = Annotations(read_only=True, idempotent=True, open_world=True)
    intents = (r"http check (?P<url>https?://\S+?)\??",)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        url = str(arguments["url"])
        method = str(arguments["method"])
        follow = bool(arguments["follow_redirects"])
        expected = arguments.get("expected_status")
        budget = time_budget(arguments["timeout_seconds"], context)
        deadline = asyncio.get_running_loop().time() + budget
        policy = current_policy()
        try:
            target = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ToolRaisedFailure(f"{url!r} is not a usable URL: {exc}", "INVALID_TARGET") from None
        client = httpx.AsyncClient(
            # Redirects are followed below, so that each hop is resolved and checked like the first.
            follow_redirects=False,
            timeout=httpx.Timeout(budget),
            # No proxies, .netrc credentials or certificate overrides from the server's environment.
            trust_env=False,
            headers={"User-Agent": USER_AGENT},
            # No connection outlives its response: one made for a name at a checked address must not carry a
            # request for another name at that address, whose certificate it never verified.
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        redirects = 0
        async with client:
            started = time.perf_counter()
            try:
                async with asyncio.timeout_at(deadline):
                    while True:
                        response = await _send_pinned(client, method, target, policy, deadline, budget)
                        if not (follow and response.is_redirect):
                            break
                        await response.aclose()
                        if redirects == MAX_REDIRECTS:
                            raise ToolRaisedFailure(
                                f"{method} {url} failed: more than {MAX_REDIRECTS} redirects", "TOO_MANY_REDIRECTS")
                        target = _redirect_target(target, response)
                        redirects += 1
            except TimeoutError:
                raise ToolRaisedFailure(
                    f"{method} {url} got no response within {format_seconds(budget)}", "TIMEOUT") from None
            except ToolRaisedFailure as exc:
                if exc.code == "TOO_MANY_REDIRECTS":
                    raise
                raise ToolRaisedFailure(f"{_attempt(method, url, target, redirects)}: {exc.message}",
                                        exc.code) from None
            except httpx.HTTPError as exc:
                code, reason = _failure_of(exc)
                raise ToolRaisedFailure(f"{_attempt(method, url, target, redirects)}: {reason}", code) from None
            latency_ms = elapsed_ms(started)
            try:
                body, more = await _read_some(response, deadline)
            finally:
                await response.aclose()

        status = response.status_code
        preview, cut = _preview(body, response)
        return {
            "body_preview": preview,
            "body_truncated": more or cut,
            "final_url": str(target),
            "headers": {h: response.headers.get(h) for h in REPORTED_HEADERS},
            "http_version": response.http_version,
            "latency_ms": latency_ms,
            "method": method,
            "ok": status == expected if expected is not None else status < 400,
            "reason": response.reason_phrase,
            "redirects": redirects,
            "status_code": status,
            "tls": target.scheme == "https",
            "url": url,
        }


def _attempt(method: str, url: str, target: httpx.URL, redirects: int) -> str:
    """What was being done when a call failed, for the start of its message."""
    if redirects:
        return f"{method} {url} failed at redirect {redirects} to {target}"
    return f"{method} {url} failed"


async def _send_pinned(client: httpx.AsyncClient, method: str, target: httpx.URL, policy: EgressPolicy,
                       deadline: float, budget: float) -> httpx.Response:
    """Send one request for `target` to an address its host resolved to and the policy allowed.

    The URL sent holds the checked IP address, so httpx cannot resolve the name again (DNS rebinding); the
    Host header and the TLS server name (SNI, and the name the certificate must match) stay the URL's own.
    Addresses are tried in the resolver's order until one accepts the connection.
    """
    host = target.raw_host.decode("ascii")
    tls = target.scheme == "https"
    addresses = await resolve(host, target.port or (443 if tls else 80), deadline, budget)
    ips = [str(sockaddr[0]) for _family, sockaddr in addresses]
    policy.check_all(ips, host)
    headers = {"Host": target.netloc.decode("ascii")}
    extensions = {"sni_hostname": host} if tls else {}
    failure: httpx.ConnectError | None = None
    for ip in ips:
        # No user:password@ either: the tool sends no credentials, even when a redirect carries some.
        pinned = target.copy_with(host=ip, userinfo=b"")
        try:
            return await client.send(client.build_request(method, pinned, headers=headers, extensions=extensions),
                                     stream=True)
        except httpx.ConnectError as exc:
            failure = exc
    assert failure is not None  # resolve() returns at least one address or raises
    raise failure


def _redirect_target(current: httpx.URL, response: httpx.Response) -> httpx.URL:
    """Where a redirect response points, resolved against the URL that gave it (as httpx would)."""
    try:
        location = httpx.URL(response.headers["location"])
        if location.scheme and not location.host:
            location = location.copy_with(host=current.host)
        if location.is_relative_url:
            location = current.join(location)
    except httpx.InvalidURL as exc:
        raise ToolRaisedFailure(f"the redirect location is not a valid URL: {exc}", "PROTOCOL_ERROR") from None
    if location.scheme not in ("http", "https"):
        raise ToolRaisedFailure(f"the redirect to {location} is not http or https", "INVALID_TARGET")
    return location


async def _read_some(response: httpx.Response, deadline: float) -> tuple[bytes, bool]:
    """Up to BODY_READ_LIMIT bytes of the body, and whether there may be more.

    Once the headers are in, the check has its answer: a body that stalls or breaks off (a stream, a
    download) ends the read, not the check.
    """
    received = bytearray()
    try:
        async with asyncio.timeout_at(deadline):
            async for chunk in response.aiter_bytes():
                received += chunk
                if len(received) > BODY_READ_LIMIT:
                    return bytes(received[:BODY_READ_LIMIT]), True
    except (TimeoutError, httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError):
        return bytes(received), True
    return bytes(received), False


def _preview(body: bytes, response: httpx.Response) -> tuple[str | None, bool]:
    """The body's first PREVIEW_CHARS characters (None when it is not text), and whether more were cut off."""
    content_type = (response.headers.get("content-type") or "").lower()
    if content_type and not any(kind in content_type for kind in _TEXT_TYPES):
        return None, False
    encoding = response.charset_encoding or "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "utf-8"
    text = body.decode(encoding, errors="replace")
    return text[:PREVIEW_CHARS], len(text) > PREVIEW_CHARS


# (httpx exception, failure code, what it means), most specific first.
_FAILURES: tuple[tuple[type[httpx.HTTPError], str, str], ...] = (
    (httpx.TimeoutException, "TIMEOUT", "timed out"),
    (httpx.TooManyRedirects, "TOO_MANY_REDIRECTS", f"more than {MAX_REDIRECTS} redirects"),
    (httpx.UnsupportedProtocol, "INVALID_TARGET", "the URL (or a redirect) is not http or https"),
    (httpx.ProtocolError, "PROTOCOL_ERROR", "the server's reply is not valid HTTP"),
    (httpx.DecodingError, "PROTOCOL_ERROR", "the body cannot be decoded as its Content-Encoding says"),
    (httpx.ConnectError, "CONNECTION_FAILED", "cannot connect"),
    (httpx.TransportError, "CONNECTION_FAILED", "the connection failed"),
)


def _failure_of(exc: httpx.HTTPError) -> tuple[str, str]:
    """The failure code and reason for an httpx error, looking through to the socket error behind it."""
    if isinstance(exc, httpx.ConnectError):
        # httpx wraps httpcore's error, which wraps the socket's: the socket's says what really happened.
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, socket.gaierror):
                return "HOST_NOT_FOUND", f"the host name cannot be resolved ({cause.strerror})"
            if isinstance(cause, ssl.SSLError):
                return "TLS_ERROR", f"TLS handshake failed ({getattr(cause, 'reason', None) or cause})"
            if isinstance(cause, OSError) and cause.errno is not None:
                return "CONNECTION_FAILED", f"cannot connect: {describe_os_error(cause)}"
            cause = cause.__cause__ or cause.__context__
    detail = str(exc) or type(exc).__name__
    for kind, code, meaning in _FAILURES:
        if isinstance(exc, kind):
            return code, f"{meaning}: {detail}"
    return "CONNECTION_FAILED", detail
