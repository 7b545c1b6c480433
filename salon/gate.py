"""The door of the daemon's TCP port: on this machine, this user only.

Every user of a machine can connect to 127.0.0.1:9315. Before anything else runs, a
request on a loopback connection is let through only when the connection's socket is
owned by the user the daemon runs as, or by a user AGENT_SALON_PEERS names (salond.peers
reads the owner from the kernel, once per connection). Another user's request is
refused: 401 on /notify (a webhook's "who are you"), 403 on /mcp (a 401 would send
Claude Code into OAuth discovery), on the admin and on every other path; one log line
each. Two paths stay open to anyone: /healthz (says nothing but that a daemon of some
store runs) and the relay's /relay/v1/ (every call there carries a device token).

When the owner cannot be read (another OS, a container that hides the socket tables,
AGENT_SALON_PEER_LOOKUP=off), the request goes on marked TOKENS_REQUIRED: /mcp and
/notify then want a label and its bearer token from every caller, as with
AGENT_SALON_REQUIRE_TOKENS=1 (the admin has its login). A connection from beyond this
machine is not judged here: it is a network's, and the rule there is tokens (`salon
serve` warns loudly while a label can write without one).
"""

from __future__ import annotations

import logging
import os

from django.conf import settings

from bus import strict
from mcpgate import protocol
from patches.daphne import CONNECTION_KEY
from salon.lean import send_json
from salond import peers
from salond.metrics import PEER_LOOKUPS

log = logging.getLogger("salon.gate")

TOKENS_REQUIRED = peers.TOKENS_REQUIRED

OWN_UID = os.geteuid()

OPEN_PATHS = ("/healthz",)
RELAY_PREFIX = "/relay/v1"

# What the door knows of a connection's caller.
ADMITTED, REFUSED, UNKNOWN, REMOTE = "admitted", "refused", "unknown", "remote"


def verdict(scope) -> tuple[str, int]:
    """(what the door says of this request's connection, the owner's uid or -1)."""
    client, server = scope.get("client"), scope.get("server")
    if not client or not server:
        return REMOTE, -1  # not a TCP connection (a test's communicator): nothing to read
    if not peers.is_loopback(str(client[0])):
        return REMOTE, -1
    state = scope.get(CONNECTION_KEY)
    if state is not None and "peer" in state:
        return state["peer"]
    uid = peers.owner(client, server, settings.PEER_LOOKUP)
    if uid == peers.UNKNOWN:
        found = (UNKNOWN, uid)
    elif uid == OWN_UID or uid in settings.PEERS:
        found = (ADMITTED, uid)
    else:
        found = (REFUSED, uid)
    if state is not None:
        state["peer"] = found
    PEER_LOOKUPS.labels(found=found[0]).inc()
    return found


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return "no name"


def refusal_text(uid: int) -> str:
    return (
        f"this agent-salon daemon serves its own user only: the connection is user "
        f"{uid}'s, the daemon runs as user {OWN_UID}. To let other users of this machine "
        "in, name them in AGENT_SALON_PEERS (users, uids or @groups) where the daemon "
        "reads its settings"
    )


async def refuse(scope, send, uid: int) -> None:
    path = scope.get("path", "")
    text = refusal_text(uid)
    log.warning(
        "refused %s %s from local user %d (%s): not this daemon's user; "
        "AGENT_SALON_PEERS names who else may connect",
        strict.loggable(scope.get("method") or "-", 16),
        strict.loggable(path, 128),
        uid,
        strict.loggable(_user_name(uid), 64),
    )
    if path == "/notify":
        extra = [(b"www-authenticate", b'Bearer realm="agent-salon"')]
        await send_json(send, 401, {"error": text}, extra)
    elif path == "/mcp":
        await send_json(send, 403, protocol.error_message(None, protocol.INVALID_REQUEST, text))
    else:
        await send_json(send, 403, {"error": text})


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path == RELAY_PREFIX or path.startswith(RELAY_PREFIX + "/")


# /healthz says whether the owner of this very connection could be read ("read" or
# "unknown"; nothing for a connection from beyond this machine): `salon install --http`
# provisions a token where it could not.
OWNER_HEADER = b"x-salon-caller"


def told(scope, send):
    """`send`, adding OWNER_HEADER to the answer's head."""
    said, _uid = verdict(scope)
    if said == REMOTE:
        return send
    value = b"unknown" if said == UNKNOWN else b"read"

    async def sending(message):
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (OWNER_HEADER, value)]}
        await send(message)

    return sending


def guarded(app):
    """`app` behind the door (salon.asgi.application)."""

    async def gate(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if scope.get("path") == "/healthz":
            return await app(scope, receive, told(scope, send))
        if is_open(scope.get("path", "")):
            return await app(scope, receive, send)
        said, uid = verdict(scope)
        if said == REFUSED:
            return await refuse(scope, send, uid)
        if said == UNKNOWN:
            scope[TOKENS_REQUIRED] = True
        return await app(scope, receive, send)

    return gate
