"""Running the ASGI application under daphne, and starting the daemon once it listens.

`salon serve` runs one process this way; `salon serve --workers N` starts N of these
(`python -m salon.serving --fd N`) on one shared listening socket. `salon runserver`
(salon/management/commands/runserver.py) shares the access log and the warning below.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import sys
from collections.abc import Callable

from django.conf import settings

from bus import strict

# A request line in the access log is clipped here: the path and query string come from
# the client, and a log is read by people (and grepped), not replayed.
ACCESS_PATH_CHARS = 512

access_log = logging.getLogger("salon.access")


def log_access(protocol: str, action: str, details: dict) -> None:
    """daphne's action logger: one line per HTTP response,
    `<client> <METHOD> <path?query> <status> <bytes> <ms>`, every value from the client
    escaped and clipped (strict.loggable), so that no request can forge or flood a line.
    Never raises (daphne would log a traceback instead of the line)."""
    try:
        if protocol != "http" or action != "complete":
            return
        access_log.info(
            "%s %s %s %s %s %.0fms",
            strict.loggable(details.get("client") or "-", 64),
            strict.loggable(details.get("method") or "-", 16),
            strict.loggable(details.get("path") or "", ACCESS_PATH_CHARS),
            details.get("status"),
            details.get("size"),
            (details.get("time_taken") or 0) * 1000,
        )
    except Exception:  # a lost log line is better than a broken response path
        pass


def loopback(bind: str) -> bool:
    if bind.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:  # a host name, or "0" (every interface)
        return False


def open_bind_warning(bind: str) -> str | None:
    """The loud warning of SPEC §2 for a server reachable beyond this machine while no
    active token exists (a revoked one protects nobody), else None. `salon serve` and
    `salon runserver` both print it. Needs the database."""
    if loopback(bind):
        return None
    from django.conf import settings

    from bus.models import Token

    if settings.REQUIRE_TOKENS or Token.objects.filter(revoked_at__isnull=True).exists():
        return None
    return (
        f"WARNING: listening on {bind}, beyond this machine, and no active token has been "
        "issued: anyone who can reach it can write in any name. Issue tokens with `salon "
        "token issue LABEL` (and set AGENT_SALON_REQUIRE_TOKENS=1), or bind to 127.0.0.1."
    )


def allow_bound_host(bind: str) -> None:
    """A daemon listening on one address of its own answers requests that name it: the
    address joins AGENT_SALON_ALLOWED_HOSTS, here and in the workers it starts. A
    wildcard (0.0.0.0, ::) names no host, so it adds nothing: name yours in the list."""
    host = bind.strip("[]")
    if host in ("0.0.0.0", "::", "") or host in settings.MCP_ALLOWED_HOSTS:
        return
    settings.MCP_ALLOWED_HOSTS = [*settings.MCP_ALLOWED_HOSTS, host]
    os.environ["AGENT_SALON_ALLOWED_HOSTS"] = ",".join(settings.MCP_ALLOWED_HOSTS)


def tcp_endpoint(bind: str, port: int) -> str:
    host = bind.replace(":", r"\:")
    return f"tcp:port={port}:interface={host}"


def bind_failure(bind: str, port: int) -> str:
    return (
        f"cannot listen on {bind}:{port}: the address is in use or not available here; "
        "stop what listens there or choose another (--port, AGENT_SALON_PORT)"
    )


def _name_every_status() -> None:
    """Twisted's table of reason phrases lacks the newer codes; the webhook's 422 went out
    as "422 Unknown Status Code". The phrases of Python's own table fill the gaps."""
    from http import HTTPStatus

    from twisted.web import http

    for status in HTTPStatus:
        http.RESPONSES.setdefault(status.value, status.phrase.encode())


def run(endpoint: str, *, on_listening: Callable[[], None] | None = None) -> bool:
    """Serve until Ctrl-C or SIGTERM; False when the endpoint could not be bound (nothing
    was started then). Daphne's --http-timeout stays unset: it would cut open streams."""
    from daphne.server import Server as DaphneServer

    from salon.asgi import application, daemon

    class Server(DaphneServer):
        def listen_error(self, failure) -> None:
            # The caller says it in one line of its own (bind_failure); no second one.
            self.stop()

    started: list[asyncio.Task] = []

    def listening() -> None:
        # Daphne calls this only once every endpoint listens, in the reactor's loop.
        started.append(asyncio.ensure_future(daemon.start()))
        if on_listening is not None:
            on_listening()

    _name_every_status()
    server = Server(
        application=application,
        endpoints=[endpoint],
        ready_callable=listening,
        action_logger=log_access,
    )
    server.run()
    return not server.abort_start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m salon.serving")
    parser.add_argument("--fd", type=int, required=True, help="an inherited listening socket")
    options = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
    try:
        import django

        django.setup()
        # No domain= here: the fd endpoint hands its text on as the address family,
        # which Twisted refuses; its default (IPv4) is the family Twisted's port object
        # needs for an IPv6 socket too, since it only formats addresses with it.
        return 0 if run(f"fd:fileno={options.fd}") else 1
    except KeyboardInterrupt:
        # Stopped (by `salon serve --workers`, or Ctrl-C) while still starting: it served
        # nothing, so there is nothing to say.
        return 0


if __name__ == "__main__":
    sys.exit(main())
