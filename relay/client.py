"""Speaking to a relay over HTTP (relay.api is the other end): the handshake commands
use the blocking calls, the bridge the async ones. A refusal by the relay is a
RelayError carrying its status and message; a relay that cannot be reached is a
RelayError with status 0."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import httpx

CONNECT_SECONDS = 10.0
LONG_POLL_SECONDS = 25  # the relay holds a pull this long at most when nothing arrives


class RelayError(Exception):
    def __init__(self, status: int, message: str, extra: dict | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra or {}

    @property
    def unreachable(self) -> bool:
        return self.status == 0


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


def read(response: httpx.Response) -> dict:
    """The JSON answer, or a RelayError with the relay's own message."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code >= 400 or not isinstance(data, dict):
        message = (data or {}).get("error") if isinstance(data, dict) else None
        if not message:
            message = f"the relay answered HTTP {response.status_code} without a reason"
            if response.status_code == 404:
                message = "no agent-salon relay answers at this URL (HTTP 404)"
        extra = {k: v for k, v in (data or {}).items() if k != "error"} if data else {}
        raise RelayError(response.status_code or 1, str(message), extra)
    return data


def _unreachable(url: str, exc: Exception) -> RelayError:
    return RelayError(0, f"the relay at {url} cannot be reached ({type(exc).__name__}: {exc})")


# ---------------------------------------------------------------- blocking


def call(method: str, url: str, path: str, *, token: str | None = None, body=None) -> dict:
    try:
        with httpx.Client(timeout=CONNECT_SECONDS) as client:
            response = client.request(method, url + path, json=body, headers=_headers(token))
    except httpx.HTTPError as exc:
        raise _unreachable(url, exc) from None
    return read(response)


def hello(url: str) -> dict:
    return call("GET", url, "/relay/v1/")


def redeem(url: str, invite: str) -> dict:
    return call("POST", url, "/relay/v1/join", body={"invite": invite})


def relay_status(url: str, status_pass: str) -> dict:
    return call("POST", url, "/relay/v1/status", body={"pass": status_pass})


def room_view(url: str, room: str, token: str) -> dict:
    return call("GET", url, _room_path(room), token=token)


# ---------------------------------------------------------------- async (the bridge)


def async_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(CONNECT_SECONDS, read=LONG_POLL_SECONDS + 20),
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
    )


async def push(
    client: httpx.AsyncClient, url: str, room: str, token: str, envelopes: list[dict]
) -> dict:
    try:
        response = await client.post(
            url + _room_path(room) + "/entries",
            json={"entries": envelopes},
            headers=_headers(token),
        )
    except httpx.HTTPError as exc:
        raise _unreachable(url, exc) from None
    return read(response)


async def pull(
    client: httpx.AsyncClient, url: str, room: str, token: str, after: int, wait: int
) -> dict:
    try:
        response = await client.get(
            url + _room_path(room) + "/entries",
            params={"after": str(after), "wait": str(wait)},
            headers=_headers(token),
        )
    except httpx.HTTPError as exc:
        raise _unreachable(url, exc) from None
    return read(response)
