"""Running the ASGI application under daphne, and starting the daemon once it listens.

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


def _name_every_status() -> None:
    """Twisted's table of reason phrases lacks the newer codes; the webhook's 422 went out
    as "422 Unknown Status Code". The phrases of Python's own table fill the gaps."""
    from http import HTTPStatus

    from twisted.web import http

    for status in HTTPStatus:
        http.RESPONSES.setdefault(status.value, status.phrase.encode())


def lean_server_class():
    """daphne's Server, with its two once-a-second walks over every connection made cheap,
    and Twisted's form parsing of POST bodies and its own access-log line off.

    With 10,000 streams open, daphne's application_checker (every second) and
    timeout_checker (every two) walked all of them: a sixth of the daemon's idle CPU.
    Here the application check looks only at connections that changed since its last
    round (their application finished, or the client went away), with daphne's rules:
    a finished application is reaped (its exception logged), one still running 10 s
    after its client left is cancelled, a connection with neither is forgotten. The
    timeout check skips HTTP connections: without an http_timeout (never set here, it
    would cut open streams) daphne's check of them does nothing.
    """
    from daphne import server as daphne_server  # first: it installs Twisted's reactor
    from daphne.server import Server as DaphneServer

    # isort: split
    import time
    from asyncio import CancelledError

    from daphne.http_protocol import WebRequest
    from daphne.server import logger as daphne_log
    from twisted.internet import reactor, tcp

    WriteSoon = write_soon_transport()
    # daphne's run() builds its HTTP factory from this module name: the guarded one.
    daphne_server.HTTPFactory = guarded_factory_class()

    class Server(DaphneServer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.changed: set = set()  # connections the next application check looks at

        def listen_success(self, port) -> None:
            # Twisted formats a combined-log line for every response and hands it to its
            # own log, which daphne sends nowhere (1.7 % of a send's CPU, py-spy): the
            # access log is log_access's, through daphne's action logger.
            self.http_factory.log = lambda request: None
            super().listen_success(port)

        def listen_error(self, failure) -> None:
            # The caller says it in one line of its own (bind_failure); no second one.
            self.stop()

        def protocol_connected(self, protocol) -> None:
            super().protocol_connected(protocol)
            # Twisted parses every POST's Content-Type with the email package (about a
            # tenth of a send's CPU) to fill request.args for form uploads; daphne hands
            # the raw body to the application and never reads request.args.
            protocol._parsePOSTFormSubmission = False
            if type(protocol.transport) is tcp.Server:
                protocol.transport.__class__ = WriteSoon  # its connection's, for good

        def protocol_disconnected(self, protocol) -> None:
            super().protocol_disconnected(protocol)
            self.changed.add(protocol)

        def create_application(self, protocol, scope):
            queue = super().create_application(protocol, scope)
            if queue is not None:
                instance = self.connections[protocol]["application_instance"]
                instance.add_done_callback(lambda _: self.changed.add(protocol))
            return queue

        def application_checker(self) -> None:
            changed, self.changed = self.changed, set()
            for protocol in changed:
                details = self.connections.get(protocol)
                if details is not None and not self._check_application(protocol, details):
                    self.changed.add(protocol)  # its client left, its application runs on
            reactor.callLater(1, self.application_checker)

        def _check_application(self, protocol, details: dict) -> bool:
            """daphne's rules for one connection; False while it still needs looking at."""
            disconnected = details.get("disconnected")
            instance = details.get("application_instance")
            if instance is not None and not instance.done():
                if disconnected is None:
                    return True  # looked at again when it finishes or its client leaves
                if time.time() - disconnected <= self.application_close_timeout:
                    return False
                daphne_log.warning(
                    "Application instance %r for connection %s took too long to shut down "
                    "and was killed.",
                    instance,
                    repr(protocol),
                )
                instance.cancel()
                return False  # reaped once the cancel lands
            if instance is not None:
                try:
                    exception = instance.exception()
                except CancelledError:
                    exception = None
                if isinstance(exception, KeyboardInterrupt):
                    self.stop()
                elif exception is not None:
                    daphne_log.error(
                        "Exception inside application: %s", exception, exc_info=exception
                    )
                    if not disconnected:
                        protocol.handle_exception(exception)
                del details["application_instance"]
            if disconnected:
                del self.connections[protocol]
            return True

        def timeout_checker(self) -> None:
            for protocol in list(self.connections):
                if self.http_timeout or not isinstance(protocol, WebRequest):
                    protocol.check_timeouts()
            reactor.callLater(2, self.timeout_checker)

    return Server


TOO_MANY = b"too many connections from your address; close some and try again\n"
TOO_SLOW = b"the request did not arrive in time; send it whole and promptly\n"


def _plain_response(status: bytes, text: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(text)
    ) + text


def guarded_factory_class():
    """daphne's HTTP factory, with deadlines for a request's arrival and a cap on the
    connections of one client address (AGENT_SALON_HEADER_TIMEOUT, _BODY_TIMEOUT,
    _CONNECTIONS_PER_ADDRESS), so that slow or idle connections cannot pile up.

    * The head of a request (request line and headers) must be whole within the header
      timeout of the connection's start, or of the end of the previous response on a
      kept-alive connection; its body within the body timeout of the head's end. Once a
      request has arrived nothing times it: a stream stays open as long as it likes. A
      late request gets a 408 (an idle kept-alive connection is just closed).
    * A connection over the cap of its address (in this process) gets a 503 and is
      closed at once. 0 turns the cap off (a benchmark opening 10,000 streams).

    HTTP/1.1 only, like the rest of this server: with no TLS there is no HTTP/2 to
    negotiate, so the channel is built bare (not behind Twisted's negotiating proxy)."""
    from collections import Counter

    from daphne.http_protocol import HTTPFactory
    from twisted.internet.protocol import Protocol
    from twisted.web.http import HTTPChannel

    class Refused(Protocol):
        def connectionMade(self) -> None:
            self.transport.write(_plain_response(b"503 Service Unavailable", TOO_MANY))
            self.transport.loseConnection()

    class GuardedChannel(HTTPChannel):
        address: str | None = None
        _deadline = None
        _heard = False  # bytes of the awaited request arrived

        def connectionMade(self) -> None:
            super().connectionMade()
            self._expect(settings.HEADER_TIMEOUT)

        def dataReceived(self, data: bytes) -> None:
            self._heard = True
            super().dataReceived(data)

        def allHeadersReceived(self) -> None:
            super().allHeadersReceived()
            if self.length != 0:  # a body follows (by Content-Length, or chunked)
                self._expect(settings.BODY_TIMEOUT)

        def allContentReceived(self) -> None:
            self._expect(None)  # arrived: whatever its answer takes is the answer's
            super().allContentReceived()

        def requestDone(self, request) -> None:
            # Before the parent's: it may replay a pipelined request that arrived meanwhile.
            self._heard = False
            self._expect(settings.HEADER_TIMEOUT)
            super().requestDone(request)

        def connectionLost(self, reason) -> None:
            self._expect(None)
            if self.address is not None:
                self.factory.release(self.address)
                self.address = None
            super().connectionLost(reason)

        def _expect(self, seconds: float | None) -> None:
            if self._deadline is not None and self._deadline.active():
                self._deadline.cancel()
            self._deadline = self.callLater(seconds, self._late) if seconds else None

        def _late(self) -> None:
            self._deadline = None
            if self._heard:
                self.transport.write(_plain_response(b"408 Request Timeout", TOO_SLOW))
            self.timeoutConnection()  # closes, and aborts a client that does not read

    class GuardedFactory(HTTPFactory):
        def __init__(self, server) -> None:
            super().__init__(server)
            self.open = Counter()

        def protocol(self) -> HTTPChannel:
            return GuardedChannel()

        def buildProtocol(self, addr):
            address = getattr(addr, "host", None)  # None on a Unix socket: not capped
            cap = settings.CONNECTIONS_PER_ADDRESS
            if address is not None and cap and self.open[address] >= cap:
                return Refused()
            protocol = super().buildProtocol(addr)
            if address is not None:
                self.open[address] += 1
                protocol.address = address
            return protocol

        def release(self, address: str) -> None:
            self.open[address] -= 1
            if self.open[address] <= 0:
                del self.open[address]

    return GuardedFactory


def write_soon_transport():
    """Twisted's TCP connection, writing what is given it at the event loop's next turn
    instead of when the selector says the socket is writable.

    Twisted buffers every write and asks the event loop to watch the socket for writing
    (an epoll change), writes once the selector reports it writable, and stops watching
    (another epoll change): three system calls and a pass through Twisted's logging
    context per write. A connection is almost always writable, so here the first write of
    a loop turn schedules one flush of everything written in that turn (writes stay
    coalesced: a response's head and body leave in one send), and the selector is asked
    only when the kernel's buffer is full or the flush ended the connection: then
    Twisted's own path takes over, as before.

    With 10,000 idle streams, the 15 s keep-alive round is one such write per stream; a
    push and a tool's answer are one each (bench/RESULTS.md)."""
    from daphne.server import twisted_loop
    from twisted.internet import tcp

    class WriteSoon(tcp.Server):
        _flush_due = False

        def startWriting(self) -> None:
            if not self._flush_due:
                self._flush_due = True
                twisted_loop.call_soon(self._flush)

        def _flush(self) -> None:
            self._flush_due = False
            if not self.connected:
                return  # lost meanwhile: Twisted has dropped what was buffered
            ended = self.doWrite()
            if ended is not None or self.dataBuffer or self._tempDataBuffer:
                # A full buffer, an error, or the end after loseConnection: the selector
                # and Twisted's own doWrite take it from here.
                tcp.Server.startWriting(self)

    return WriteSoon


def run(endpoint: str, *, on_listening: Callable[[], None] | None = None) -> bool:
    """Serve until Ctrl-C or SIGTERM; False when the endpoint could not be bound (nothing
    was started then). Daphne's --http-timeout stays unset: it would cut open streams."""
    from salon.asgi import application, daemon

    Server = lean_server_class()

    started: list[asyncio.Task] = []

    def listening() -> None:
        # Daphne calls this only once every endpoint listens, in the reactor's loop.
        started.append(asyncio.ensure_future(daemon.start()))
        if on_listening is not None:
            on_listening()

    _name_every_status()
    gc.set_threshold(*GC_THRESHOLDS)
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
