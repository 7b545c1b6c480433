"""Running the ASGI application under daphne, and starting the daemon once it listens.
daphne's server as it runs here (its walks, writes and guards) is patches.daphne's.

`salon serve` runs one process this way; `salon serve --workers N` starts N of these
(`python -m salon.serving --fd N`) on one shared listening socket. `salon runserver`
(salon/management/commands/runserver.py) shares the access log and the warning below.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Callable

from django.conf import settings

from bus import strict
from patches import daphne

# The garbage collector's thresholds in a server process. An open stream is a few hundred
# long-lived objects; with CPython's default (700, 10, 10), objects that live across a
# keep-alive round or a claim were promoted to the oldest generation fast enough that
# it was walked whole about every minute: 1.0-1.3 s of CPU a walk with 10,000 streams
# open, and 22 s of CPU while they were being opened (bench/RESULTS.md). A young
# generation of 50,000 lets such objects die young: no full walk in either phase.
GC_THRESHOLDS = (50_000, 20, 20)

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


# How many open labels the warning names; the rest are counted.
OPEN_LABELS_SHOWN = 10


def open_bind_warning(bind: str) -> str | None:
    """The loud warning for a server reachable beyond this machine while a label can write
    without a token, else None. Unless AGENT_SALON_REQUIRE_TOKENS=1, that is always so
    (any label nobody holds a token for is open, a new one too): the warning names the
    agents of the store with no active token (a revoked one protects nobody). `salon
    serve` and `salon runserver` both print it. Needs the database."""
    if loopback(bind) or settings.REQUIRE_TOKENS:
        return None
    from bus.models import Agent, Token

    tokened = set(Token.objects.filter(revoked_at__isnull=True).values_list("label", flat=True))
    if not tokened:
        return (
            f"WARNING: listening on {bind}, beyond this machine, and no active token has been "
            "issued: anyone who can reach it can write in any name. Issue tokens with `salon "
            "token issue LABEL` (and set AGENT_SALON_REQUIRE_TOKENS=1), or bind to 127.0.0.1."
        )
    # Labels cannot hold "@": agents of other machines are written by the relay only.
    names = (
        Agent.objects.exclude(name__contains="@").order_by("name").values_list("name", flat=True)
    )
    open_names = [name for name in names if name not in tokened]
    shown = ", ".join(strict.loggable(name, 64) for name in open_names[:OPEN_LABELS_SHOWN])
    more = len(open_names) - OPEN_LABELS_SHOWN
    which = shown + (f" (and {more} more)" if more > 0 else "") + " and " if shown else ""
    return (
        f"WARNING: listening on {bind}, beyond this machine, and labels without a token can "
        f"write: {which}any new label (only {len(tokened)} label(s) have a token). Set "
        "AGENT_SALON_REQUIRE_TOKENS=1 (issue each label's token with `salon token issue "
        "LABEL`), or bind to 127.0.0.1."
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


def port_free(bind: str, port: int) -> bool:
    """Whether nothing listens on bind:port yet (so no daemon of this store serves there)."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind.strip("[]"), port))
        except OSError:
            return False
    return True


def bind_failure(bind: str, port: int) -> str:
    return (
        f"cannot listen on {bind}:{port}: the address is in use or not available here; "
        "stop what listens there or choose another (--port, AGENT_SALON_PORT)"
    )


def run(
    endpoint: str, *, on_listening: Callable[[], None] | None = None, relay: bool = False
) -> bool:
    """Serve until Ctrl-C or SIGTERM; False when the endpoint could not be bound (nothing
    was started then). Daphne's --http-timeout stays unset: it would cut open streams.
    `relay`: the relay's application only, and no daemon (`salon relay serve`)."""
    from salon.asgi import application, daemon, relay_application

    Server = daphne.lean_server_class()

    started: list[asyncio.Task] = []

    def listening() -> None:
        # Daphne calls this only once every endpoint listens, in the reactor's loop.
        if not relay:
            started.append(asyncio.ensure_future(daemon.start()))
        if on_listening is not None:
            on_listening()

    daphne.name_every_status()
    gc.set_threshold(*GC_THRESHOLDS)
    server = Server(
        application=relay_application if relay else application,
        endpoints=[endpoint],
        ready_callable=listening,
        action_logger=log_access,
    )
    server.run()
    return not server.abort_start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m salon.serving")
    parser.add_argument("--fd", type=int, required=True, help="an inherited listening socket")
    parser.add_argument("--relay", action="store_true", help="serve the relay only")
    options = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
    try:
        import django

        django.setup()
        # No domain= here: the fd endpoint hands its text on as the address family,
        # which Twisted refuses; its default (IPv4) is the family Twisted's port object
        # needs for an IPv6 socket too, since it only formats addresses with it.
        return 0 if run(f"fd:fileno={options.fd}", relay=options.relay) else 1
    except KeyboardInterrupt:
        # Stopped (by `salon serve --workers`, or Ctrl-C) while still starting: it served
        # nothing, so there is nothing to say.
        return 0


if __name__ == "__main__":
    sys.exit(main())
