"""Speaking to a relay over HTTP (relay.api is the other end): the handshake commands
use the blocking calls, the bridge the async ones. A refusal by the relay is a
RelayError carrying its status and message; a relay that cannot be reached is a
RelayError with status 0.

A relay is another machine, and this one trusts nothing it answers: every answer is read
as it streams in, never beyond MAX_ANSWER_BYTES (one byte over ends the read), and parsed
by the strict parser (bus.strict), so a hostile relay can neither fill this machine's
memory nor make the bridge fail on deep nesting. A pull asks for at most PULL_ENTRIES
entries, which fit well within the cap (an entry is at most 64 KiB of content and 16 KiB
of meta); a relay that lets bigger entries through answers AnswerTooLarge, and the
bridge asks for fewer."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import httpx

from bus import strict

CONNECT_SECONDS = 10.0
LONG_POLL_SECONDS = 25  # the relay holds a pull this long at most when nothing arrives
MAX_ANSWER_BYTES = 16 * 1024 * 1024  # as much as the relay itself takes in one body
PULL_ENTRIES = 100


class RelayError(Exception):
    def __init__(self, status: int, message: str, extra: dict | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra or {}

    @property
    def unreachable(self) -> bool:
        return self.status == 0


class AnswerTooLarge(RelayError):
    """The relay's answer is over MAX_ANSWER_BYTES (it was not read further)."""


def normalize_url(url: str) -> str:
    """`https://relay.example.org/` → `https://relay.example.org`; refuses anything but
    an http(s) URL with a host."""
    url = (url or "").strip().rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a malformed port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise RelayError(0, f"{url[:100]!r} is not a relay URL: use e.g. https://relay.example.org")
    if parts.query or parts.fragment:
        raise RelayError(0, "a relay URL has no ?query or #fragment")
    return url


def _room_path(room: str) -> str:
    return f"/relay/v1/rooms/{quote(room, safe='')}"


def _headers(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


def _too_large(url: str, size: int | None = None) -> AnswerTooLarge:
    said = f"{size} bytes, " if size else ""
    return AnswerTooLarge(
        1, f"the relay at {url} answered {said}over the limit of {MAX_ANSWER_BYTES} bytes"
    )


def _declared_too_large(response: httpx.Response) -> bool:
    declared = response.headers.get("content-length", "")
    return declared.isdigit() and int(declared) > MAX_ANSWER_BYTES


def read(response: httpx.Response, body: bytes) -> dict:
    """The JSON answer, or a RelayError with the relay's own message."""
    try:
        data = strict.decode_json(body)
    except strict.NotJson as exc:
        data, problem = None, str(exc)
    else:
        problem = "it is not a JSON object"
    if response.status_code >= 400 or not isinstance(data, dict):
        message = (data or {}).get("error") if isinstance(data, dict) else None
        if not isinstance(message, str) or not message:
            message = f"the relay answered HTTP {response.status_code} without a reason"
            if response.status_code == 404:
                message = "no agent-salon relay answers at this URL (HTTP 404)"
            elif response.status_code < 400:
                message = f"the relay's answer cannot be read: {problem}"
        extra = {k: v for k, v in (data or {}).items() if k != "error"} if data else {}
        raise RelayError(response.status_code or 1, strict.loggable(message, 500), extra)
    return data


def _unreachable(url: str, exc: Exception) -> RelayError:
    return RelayError(0, f"the relay at {url} cannot be reached ({type(exc).__name__}: {exc})")


# ---------------------------------------------------------------- blocking


def call(method: str, url: str, path: str, *, token: str | None = None, body=None) -> dict:
    try:
        with (
            httpx.Client(timeout=CONNECT_SECONDS) as client,
            client.stream(method, url + path, json=body, headers=_headers(token)) as response,
        ):
            if _declared_too_large(response):
                raise _too_large(url, int(response.headers["content-length"]))
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise _too_large(url)
                chunks.append(chunk)
    except httpx.HTTPError as exc:
        raise _unreachable(url, exc) from None
    return read(response, b"".join(chunks))


def hello(url: str) -> dict:
    return call("GET", url, "/relay/v1/")


def redeem(url: str, invite: str) -> dict:
    return call("POST", url, "/relay/v1/join", body={"invite": invite})


def relay_status(url: str, status_pass: str) -> dict:
    return call("POST", url, "/relay/v1/status", body={"pass": status_pass})


def revoke(url: str, revoke_pass: str) -> dict:
    return call("POST", url, "/relay/v1/revoke", body={"pass": revoke_pass})


def room_view(url: str, room: str, token: str) -> dict:
    return call("GET", url, _room_path(room), token=token)


# ---------------------------------------------------------------- async (the bridge)


def async_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(CONNECT_SECONDS, read=LONG_POLL_SECONDS + 20),
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
    )


async def _request(client: httpx.AsyncClient, method: str, url: str, path: str, **kwargs) -> dict:
    try:
        async with client.stream(method, url + path, **kwargs) as response:
            if _declared_too_large(response):
                raise _too_large(url, int(response.headers["content-length"]))
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise _too_large(url)  # leaving the block hangs up: nothing more is read
                chunks.append(chunk)
    except httpx.HTTPError as exc:
        raise _unreachable(url, exc) from None
    return read(response, b"".join(chunks))


async def push(
    client: httpx.AsyncClient, url: str, room: str, token: str, envelopes: list[dict]
) -> dict:
    return await _request(
        client,
        "POST",
        url,
        _room_path(room) + "/entries",
        json={"entries": envelopes},
        headers=_headers(token),
    )


async def pull(
    client: httpx.AsyncClient,
    url: str,
    room: str,
    token: str,
    after: int,
    wait: int,
    limit: int = PULL_ENTRIES,
) -> dict:
    """{"entries": [{…, "seq": int}, …], "cursor": int, "gap": int}, checked for that
    shape: the bridge moves its cursor by these numbers."""
    answer = await _request(
        client,
        "GET",
        url,
        _room_path(room) + "/entries",
        params={"after": str(after), "wait": str(wait), "limit": str(limit)},
        headers=_headers(token),
    )
    entries = answer.get("entries", [])
    numbers = [answer.get("cursor", after), answer.get("gap", 0)]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise RelayError(1, f"the relay at {url} answered a pull without a list of entries")
    numbers += [entry.get("seq", 0) for entry in entries]
    if not all(type(n) is int and n >= 0 for n in numbers):
        raise RelayError(1, f"the relay at {url} answered a pull with a bad cursor or seq")
    return answer
