"""daphne (and the Twisted under it): the daemon's HTTP server made lean, guarded and quick
to write.

* lean_server_class: daphne's Server, with its once-a-second walks over every
  connection made cheap. With 10,000 streams open, daphne's application_checker was
  41.8 % of the idle daemon's samples and its timeout_checker more; this and one
  keep-alive round per process together took idle CPU (py-spy, 10,000 streams) from
  13.4 % to 5.0 % of a core (bench/RESULTS.md).
  Twisted's form parsing of POST bodies off: 11 % of a send's samples. Twisted's own
  access-log line off: 1.7 % of a send's CPU (py-spy).
* write_soon_transport: a TCP connection's writes flushed at the event loop's next
  turn. Idle, 2,000 streams: 3.3 -> 2.4 % of a core.
* guarded_factory_class: daphne's HTTP factory with deadlines and a per-address cap
  (not a speed-up: slow or idle connections cannot pile up), installed by replacing
  daphne.server.HTTPFactory, the name daphne's run() builds its factory from.
* lean_server_class also hands each request's scope its connection's own dict (under
  CONNECTION_KEY), for what is worked out once per connection.
* name_every_status: Twisted's table of reason phrases, completed (a 422 went out as
  "422 Unknown Status Code").

Reached into: daphne.server.Server's checkers, connections and hooks; Twisted's
tcp.Server write path (startWriting, doWrite, dataBuffer, _tempDataBuffer), a
protocol's _parsePOSTFormSubmission, HTTPChannel's request hooks, http.RESPONSES.
"""

from __future__ import annotations

from django.conf import settings

# The scope key of a connection's own dict (lean_server_class).
CONNECTION_KEY = "salon.connection"

WRITTEN_FOR = {"daphne": ("4.1", "4.3"), "twisted": ("22.4", "27")}


def name_every_status() -> None:
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
            # One dict per connection, the same in each of its requests' scopes: what is
            # true of the connection is worked out once (salon.gate: who is calling).
            channel = getattr(protocol, "channel", None)
            if channel is not None:
                state = channel.__dict__.setdefault("salon_connection", {})
                scope[CONNECTION_KEY] = state
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
