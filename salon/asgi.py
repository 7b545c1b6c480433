"""The ASGI entry point: one server process's daemon and its application.

`daemon` (salond.host.Daemon, extended with MCP's push path by
mcpgate.streamhost.StreamHost) owns what the process runs beside its requests: the push
path, the doorbell, the local line and the companions other apps registered (the relay's
bridge). `application` routes /mcp to the MCP endpoint (mcpgate.consumers: a POST
answered directly, a stream by its consumer), the staff's live flow
(/admin/live/stream, salon.live) to its consumer behind Django's session and user, and
everything else to Django; it refuses every WebSocket upgrade (403: nothing here speaks
WebSocket). `relay_application` is `salon relay serve`'s: the relay's API and /healthz,
nothing else (no MCP, webhook, admin or live view on a relay's address), and no daemon
(a relay keeps no sessions). `application` is behind salon.gate: a loopback connection
of another local user is refused before any of that. Building them starts nothing;
`salon serve` starts the daemon as soon as daphne listens, and any first request starts
it otherwise (`runserver`, tests).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")

from django.core.asgi import get_asgi_application

django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from mcpgate.consumers import mcp_application  # noqa: E402
from mcpgate.streamhost import StreamHost  # noqa: E402
from salon.gate import guarded  # noqa: E402
from salon.health import asgi_healthz  # noqa: E402
from salon.lean import asgi_notify, send_json  # noqa: E402
from salon.live import LiveStream  # noqa: E402

daemon = StreamHost(run_companions=True)


mcp = mcp_application(daemon)

router = ProtocolTypeRouter(
    {
        "http": URLRouter(
            [
                path("admin/live/stream", AuthMiddlewareStack(LiveStream.as_asgi(host=daemon))),
                re_path(r"", django_application),
            ]
        ),
    }
)


async def refuse_websocket(scope, receive, send) -> None:
    """No path here speaks WebSocket; any page can ask for one (`new WebSocket(...)`).
    Closing before accepting is the handshake's 403, before anything else runs."""
    await receive()  # websocket.connect
    await send({"type": "websocket.close", "code": 1008})


async def served(scope, receive, send):
    if scope["type"] == "websocket":
        return await refuse_websocket(scope, receive, send)
    if scope["type"] != "lifespan":
        await daemon.start()
        if scope["type"] == "http":
            # The paths agents, scripts and health checks hit, routed before the router.
            if scope["path"] == "/mcp":
                return await mcp(scope, receive, send)
            if scope["path"] == "/healthz":
                return await asgi_healthz(scope, receive, send)  # not through Django
            if scope["path"] == "/notify":
                return await asgi_notify(scope, receive, send)  # nor this (salon.lean)
    return await router(scope, receive, send)


# On this machine, this user only (and AGENT_SALON_PEERS): salon.gate, before anything.
application = guarded(served)


# What a relay serves (`salon relay serve`): every other path is a 404 there.
RELAY_PREFIX = "/relay/v1/"
RELAY_ONLY = (
    "this is an agent-salon relay: it serves /relay/v1/ and /healthz only (no MCP, webhook "
    "or admin here; those are a machine's own daemon's, `salon serve`)"
)


async def relay_application(scope, receive, send):
    if scope["type"] == "websocket":
        return await refuse_websocket(scope, receive, send)
    if scope["type"] != "http":
        return await router(scope, receive, send)
    path = scope["path"]
    if path == "/healthz":
        return await asgi_healthz(scope, receive, send)
    if path.startswith(RELAY_PREFIX) or path == RELAY_PREFIX.rstrip("/"):
        return await django_application(scope, receive, send)
    await send_json(send, 404, {"error": RELAY_ONLY})
