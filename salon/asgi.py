"""ASGI entry point: /mcp goes to the MCP consumer, everything else to Django."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")

from django.core.asgi import get_asgi_application

django_application = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from bus import doorbell, hookline  # noqa: E402
from mcpgate.consumers import McpConsumer  # noqa: E402

# This process hosts the streams: entries sent here ring the in-process layer.
doorbell.IN_DAEMON = True
# And it does the writes of the Claude Code hooks of its store (bus/hookline.py).
hookline.start()

application = ProtocolTypeRouter(
    {
        "http": URLRouter(
            [
                path("mcp", McpConsumer.as_asgi()),
                re_path(r"", django_application),
            ]
        ),
    }
)
