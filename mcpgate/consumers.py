"""/mcp: the MCP Streamable HTTP endpoint as a Channels consumer (docs/MCP.md).

POST carries one JSON-RPC message; GET opens the session's event stream, on which
waking entries are pushed as notifications/claude/channel; DELETE ends the session.
The database is the mailbox: a stream subscribes to its seat's doorbell first (its
host's Bells), then pushes from the ledger, and re-reads the ledger on every ring. The claims, the
writes of pushes, the keep-alive round and the liveness refreshes of all streams of this
process are done by the process's StreamHost (mcpgate.streamhost, handed to the consumer by
salon.asgi): a stream hears its seat's doorbell and rings the host's claimer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection

from bus import rules, services, strict
from bus.rules import RuleError
from mcpgate import delivery, metrics, protocol, sessions, tools
from mcpgate.arguments import validate_arguments
from mcpgate.protocol import ProtocolError
from mcpgate.streamhost import StreamHost, seat_group
from salond.metrics import REQUEST_SECONDS
from salond.peers import TOKENS_REQUIRED
from salond.streaming import RequestBody, StreamingHttpConsumer

log = logging.getLogger("salon.mcp")

INITIAL_PUSH_LIMIT = 20
KEEPALIVE_COMMENT = protocol.sse_comment("keep-alive")
JSON = (b"content-type", b"application/json")
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def _load_and_check(session_id: str, token: str | None, required: bool = False):
    """The session and its token check, on the database thread (every request on a
    session makes both): the session, or the ProtocolError to answer with. `required`:
    this caller needs a token whatever its label (TOKENS_REQUIRED)."""
    session = sessions.load_session(session_id)
    if session is None:
        raise protocol.http_error(
            404, "unknown or ended session: send initialize again for a new one"
        )
    problem = services.tokens.token_problem(
        label=session.label or None, token=token, required=required
    )
    if problem:
        raise protocol.http_error(403, problem)  # as check_token
    return session


def session_group(session_id: str) -> str:
    return f"mcpsession.{session_id}"


class WaitNeedsStream(Exception):
    """A POST turned out to be a `wait` call, which needs a stream consumer (McpPost)."""


class McpExchange:
    """One request to /mcp, whichever object serves it: its headers, the Host/Origin and
    token checks, and the answer to a POST. A POST is served by McpPost, a GET (the
    session's stream) and DELETE by McpConsumer; both are this and a way to respond
    (`send_response`) and to wait (`start_wait`)."""

    host: StreamHost
    scope: dict
    session = None

    async def respond_to(self, body: bytes, too_large: bool) -> None:
        """Answer the request; every refusal is a JSON-RPC error with its HTTP status."""
        await self.host.start()
        started = time.perf_counter()
        self.headers = strict.asgi_headers(self.scope)
        self.query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        method = self.scope["method"]
        try:
            self.check_host_and_origin()
            if method == "POST":
                await self.post(body, too_large)
            elif method == "GET":
                await self.get()
            elif method == "DELETE":
                await self.delete()
            else:
                await self.send_response(405, b"", headers=[(b"allow", b"GET, POST, DELETE")])
        except ProtocolError as exc:
            await self.reply(exc.status, exc.body())
        except RuleError as exc:
            await self.reply(400, protocol.error_message(None, protocol.INVALID_PARAMS, str(exc)))
        finally:
            REQUEST_SECONDS.labels(path="/mcp").observe(time.perf_counter() - started)

    def check_host_and_origin(self) -> None:
        """The one Host/Origin rule (bus.strict), which /notify and the admin share."""
        problem = strict.host_origin_problem(
            self.headers.get("host"), self.headers.get("origin"), settings.MCP_ALLOWED_HOSTS
        )
        if problem:
            raise protocol.http_error(403, problem)

    async def reply(self, status: int, message: dict | None, headers=()) -> None:
        body = protocol.encode_message(message) if message is not None else b""
        extra = [JSON] if message is not None else []
        await self.send_response(status, body, headers=[*extra, *headers])

    def base_url(self) -> str:
        host = self.headers.get("host") or f"{settings.BIND}:{settings.PORT}"
        return f"http://{host}"

    def _token(self) -> str | None:
        return strict.bearer_token(self.headers.get("authorization"))

    def _tokens_required(self) -> bool:
        """The door could not tell who is calling (salon.gate): a token, whatever the
        label."""
        return bool(self.scope.get(TOKENS_REQUIRED))

    def _session_id(self) -> str:
        session_id = self.headers.get(protocol.SESSION_HEADER)
        if not session_id:
            raise protocol.http_error(
                400, "missing Mcp-Session-Id header: send initialize first to get a session"
            )
        return session_id

    async def check_token(self, label: str | None) -> None:
        problem = await database_sync_to_async(services.tokens.token_problem)(
            label=label, token=self._token(), required=self._tokens_required()
        )
        if problem:
            # 403, not 401: a 401 sends Claude Code into OAuth discovery.
            raise protocol.http_error(403, problem)

    async def load_session(self):
        self.session = await database_sync_to_async(_load_and_check)(
            self._session_id(), self._token(), self._tokens_required()
        )
        return self.session

    # ------------------------------------------------------------------ POST

    async def post(self, body: bytes, too_large: bool) -> None:
        if too_large:
            raise protocol.http_error(413, "the request body is over 4 MiB; send less")
        if protocol.is_stateless_probe(self.headers, None):
            raise protocol.stateless_probe_refusal()
        protocol.check_post_headers(self.headers)
        message = protocol.parse_body(body)
        if protocol.is_stateless_probe(self.headers, message) and not self.headers.get(
            protocol.SESSION_HEADER
        ):
            raise protocol.stateless_probe_refusal(getattr(message, "id", None))
        if isinstance(message, protocol.Request) and message.method == "initialize":
            await self.initialize(message)
            return
        session_id, token = self._session_id(), self._token()
        # The session, its checks and the answer in one hop to the database thread; a
        # send there shares its transaction with the sends waiting beside it.
        if _joins_a_batch(message):
            answer = self._answer_on_session
            answered = await self.host.sends.run(answer, session_id, token, message)
        else:
            answered = await database_sync_to_async(self._answer_on_session)(
                session_id, token, message
            )
        if answered is None:
            await self.send_response(202, b"")
        elif isinstance(answered, Waiting):
            await self.start_wait(answered.binding, message, answered.arguments)
        else:
            reply, rebound = answered
            await self.reply(200, reply)
            if rebound:
                # The session has a seat now, or another one (checkin): its stream, on
                # whichever worker, follows.
                await self.host.layer.group_send(
                    session_group(session_id), {"type": "session.rebind"}
                )

    def _answer_on_session(self, session_id: str, token: str | None, message):
        """On the database thread: a notification's None, a `wait` to start (Waiting),
        else (the answer, whether the call moved the session to another seat)."""
        session = self.session = _load_and_check(session_id, token, self._tokens_required())
        protocol.check_protocol_version_header(self.headers.get(protocol.VERSION_HEADER))
        if not isinstance(message, protocol.Request):
            return None
        plain = tools.answer_plain(message, sessions.HttpBinding(session, ""))
        if plain is not None:
            return plain, False
        # tools/call (initialize was answered above, session or not)
        binding = sessions.HttpBinding(session, self.base_url())
        try:
            tool, arguments = tools.prepare_call(binding, message.params)
        except tools.CallRefused as exc:
            return protocol.error_message(message.id, exc.code, exc.message), False
        if tool.name == "wait" and not validate_arguments(tool.schema, arguments):
            return Waiting(binding, arguments)
        seat_before = session.seat_id
        result = tools.run_tool(binding, tool, arguments)
        rebound = binding.session.seat_id != seat_before
        return protocol.result_message(message.id, result), rebound

    async def initialize(self, message: protocol.Request) -> None:
        label = (self.query.get("label") or [""])[0].strip()
        if label:
            try:
                label = rules.validate_name(label, "label")
            except RuleError as exc:
                raise protocol.http_error(
                    400, str(exc), protocol.INVALID_PARAMS, message.id
                ) from None
        await self.check_token(label or None)
        requested = [
            r.strip() for v in self.query.get("room", []) for r in v.split(",") if r.strip()
        ]
        try:
            rooms = await database_sync_to_async(sessions.validate_rooms)(requested)
        except RuleError as exc:
            raise protocol.http_error(400, str(exc), protocol.INVALID_PARAMS, message.id) from None
        version, answer = tools.initialize_answer(message)
        try:
            session = await database_sync_to_async(sessions.create_session)(
                label=label,
                rooms=rooms,
                version=version,
                client_info=message.params.get("clientInfo") or {},
                claude_session=self.headers.get(sessions.CLAUDE_SESSION_HEADER, ""),
                address=(self.scope.get("client") or [None])[0],
            )
        except sessions.TooManySessions as exc:
            raise protocol.http_error(429, str(exc), protocol.INVALID_REQUEST, message.id) from None
        except RuleError as exc:
            message_text = f"{sessions.CLAUDE_SESSION_HEADER}: {exc}"
            raise protocol.http_error(
                400, message_text, protocol.INVALID_PARAMS, message.id
            ) from None
        await self.reply(200, answer, headers=[(b"mcp-session-id", session.id.encode())])

    async def send_response(self, status: int, body: bytes, *, headers=()) -> None:
        raise NotImplementedError

    async def start_wait(self, binding, message, arguments) -> None:
        raise NotImplementedError


# The tools that only write one entry: their calls may be stored in one transaction.
SEND_TOOLS = frozenset({"send", "send_message"})


def _joins_a_batch(message) -> bool:
    """Whether this POST is a send that may share a transaction (bus.groupcommit): on
    SQLite only (PostgreSQL's workers write at once, as relay.views.answer says), and
    not a cross-project request, whose outcome is read after its own commit."""
    if connection.vendor != "sqlite" or not isinstance(message, protocol.Request):
        return False
    if message.method != "tools/call" or not isinstance(message.params, dict):
        return False
    name = message.params.get("name")
    if not isinstance(name, str) or name not in SEND_TOOLS:  # any JSON value may stand here
        return False
    arguments = message.params.get("arguments")
    meta = arguments.get("meta") if isinstance(arguments, dict) else None
    return not (isinstance(meta, dict) and "ask" in meta)


@dataclass
class Waiting:
    """A `wait` tool call checked on the database thread, to be started on the stream."""

    binding: sessions.HttpBinding
    arguments: dict


class McpPost(McpExchange):
    """A POST to /mcp answered without a Channels consumer.

    A Channels consumer per POST cost a channel on the layer, two receiving tasks and a
    dispatch loop, for a request that hears nothing from the layer (bench/RESULTS.md).
    Here the body is read from the ASGI receive, answered, and the response sent. A
    `wait` call, which must keep hearing its seat's doorbell, is handed to McpConsumer
    with the body read so far."""

    def __init__(self, scope, receive, send, host: StreamHost, stream_app) -> None:
        self.scope, self.receive, self.send, self.host = scope, receive, send, host
        self.stream_app = stream_app
        self.responded = False

    async def run(self) -> None:
        body = RequestBody(protocol.MAX_BODY_BYTES)
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                return
            if message["type"] == "http.request" and body.add(message):
                break
        try:
            await self.respond_to(body.value(), body.too_large)
        except WaitNeedsStream:
            await self.stream_app(self.scope, _replay(body.value(), self.receive), self.send)
        except Exception:
            log.exception("unhandled error in a POST to /mcp")
            if not self.responded:
                await self.send_response(
                    500,
                    b'{"error": "internal error; see the daemon log"}',
                    headers=[(b"content-type", b"application/json")],
                )

    async def send_response(self, status: int, body: bytes, *, headers=()) -> None:
        self.responded = True
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})

    async def start_wait(self, binding, message, arguments) -> None:
        raise WaitNeedsStream


def _replay(body: bytes, receive):
    """An ASGI receive that gives the body read already, then the client's own messages."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def mcp_application(host: StreamHost):
    """/mcp: POST by McpPost, the rest (GET streams, DELETE) by McpConsumer."""
    stream_app = McpConsumer.as_asgi(host=host)

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            await McpPost(scope, receive, send, host, stream_app).run()
        else:
            await stream_app(scope, receive, send)

    return app


class McpConsumer(McpExchange, StreamingHttpConsumer):
    max_body = protocol.MAX_BODY_BYTES

    def __init__(self, *args, host: StreamHost, **kwargs):
        super().__init__(*args, **kwargs)
        self.host = host
        self.session = None
        self.seat = None
        self.stream_token = ""
        self.live_until = None
        self.streaming = False
        # False until the stream's Last-Event-ID replay is written: pushes claimed before
        # would overtake it (the first claim comes after the replay and covers any ring).
        self.ready = False
        self.waiter: asyncio.Event | None = None

    async def handle(self, body: bytes, *, too_large: bool) -> None:
        await self.respond_to(body, too_large)

    send_response = StreamingHttpConsumer.send_response

    # -- the wait tool: an SSE response that keeps hearing the seat's doorbell ----

    async def start_wait(self, binding, message, arguments) -> None:
        seat = await database_sync_to_async(binding.seat)()
        self.seat = seat
        self.waiter = asyncio.Event()
        await self.join_seat(seat.pk)
        await self.start_response(200, SSE_HEADERS)
        self.spawn(self.run_wait(binding, message, arguments))

    async def run_wait(self, binding, message, arguments) -> None:
        async def progress(note: dict) -> None:
            await self.send_chunk(protocol.sse_event(note))

        result = await tools.wait_for_wakes(binding, message, arguments, self.waiter, progress)
        await self.send_chunk(protocol.sse_event(protocol.result_message(message.id, result)))
        await self.end_response()

    # ------------------------------------------------------------------ GET

    async def get(self) -> None:
        if not protocol.accepts_event_stream(self.headers.get("accept")):
            raise protocol.http_error(406, "GET needs 'Accept: text/event-stream'")
        session = await self.load_session()
        self.streaming = True
        await self.join_group(session_group(session.id))
        if session.label:
            # A stream makes no seat (a health check opens one too): it takes the seat a
            # hook or a tool call made, or waits until one does (session.rebind).
            self.seat = await database_sync_to_async(sessions.existing_seat)(session)
        if self.seat is not None:
            await self.join_seat(self.seat.pk)
        self.stream_token = await database_sync_to_async(sessions.claim_stream)(session)
        # Whoever held this session's stream, or this seat's, lets go now.
        await self.channel_layer.group_send(
            session_group(session.id), {"type": "stream.replace", "token": self.stream_token}
        )
        if self.seat is not None:
            await self.channel_layer.group_send(
                seat_group(self.seat.pk),
                {"type": "seat.takeover", "session": session.id, "token": self.stream_token},
            )
        await self.start_response(200, SSE_HEADERS)
        await self.send_chunk(protocol.sse_comment("agent-salon stream open"))
        metrics.LIVE_STREAMS.inc()
        if self.seat is not None:
            self.live_until = await database_sync_to_async(services.seats.keep_live)(seat=self.seat)
        self.host.ticker.add(self)  # from now on its seat and session are kept alive
        # Our event ids are a per-seat counter: anything but a short run of ASCII digits
        # (`\xb2` is a digit to str.isdigit, 4,301 digits are too many for int()) is not
        # one of ours, and is ignored — the stream opens as without the header.
        last_event = strict.event_id(self.headers.get(protocol.LAST_EVENT_ID_HEADER))
        self.spawn(self.open_stream(last_event))

    async def open_stream(self, last_event: int | None) -> None:
        if self.seat is not None and last_event is not None:
            replay = await database_sync_to_async(delivery.replay_messages)(
                seat=self.seat, after=last_event
            )
            await delivery.write_pushes(self, replay, self.host.records, recorded=False)
        self.ready = True
        self.host.claimer.ring(self, limit=INITIAL_PUSH_LIMIT, tell_more=True)
        self.take_direct_pushes()

    async def keep_open(self, *, renew_groups: bool) -> None:
        """The ticker's keep-alive round (mcpgate.delivery.KeepAliveTicker)."""
        await self.send_chunk(KEEPALIVE_COMMENT)
        if renew_groups:
            for group in list(self.groups_joined):
                await self.channel_layer.group_add(group, self.channel_name)

    # -- the seat's doorbell -------------------------------------------------------

    async def join_seat(self, seat_id: int) -> None:
        """Hear the seat's doorbell (this process's bells: salond.host.Bells) and its
        group on the layer (another worker's stream of the seat announces a takeover)."""
        await self.join_group(seat_group(seat_id))
        self.host.bells.add(seat_id, self)

    async def leave_seat(self, seat_id: int) -> None:
        self.drop_direct_pushes()
        self.host.bells.discard(seat_id, self)
        await self.leave_group(seat_group(seat_id))

    async def finish(self):
        if self.seat is not None:
            self.drop_direct_pushes()
            self.host.bells.discard(self.seat.pk, self)
        await super().finish()

    def take_direct_pushes(self) -> None:
        """From now on a send in this process claims and writes this seat's pushes itself
        (mcpgate.streamhost.StreamHost.pushable); the last stream of a seat to be ready wins."""
        if self.streaming and self.seat is not None:
            self.host.direct[self.seat.pk] = self

    def drop_direct_pushes(self) -> None:
        if self.seat is not None and self.host.direct.get(self.seat.pk) is self:
            del self.host.direct[self.seat.pk]

    def hear_bell(self, *, pushed: bool = False) -> None:
        """A doorbell for this seat; `pushed`: this process wrote the entry's push to this
        stream already (only a wait still needs to hear of it)."""
        if self.waiter is not None:
            self.waiter.set()
        if self.streaming and self.ready and not pushed:
            self.host.claimer.ring(self)

    # -- channel-layer messages ---------------------------------------------------

    async def stream_replace(self, message) -> None:
        if self.streaming and message.get("token") != self.stream_token:
            await self.end_stream()

    async def seat_takeover(self, message) -> None:
        if self.streaming and message.get("token") != self.stream_token:
            await self.end_stream()

    async def session_rebind(self, message) -> None:
        if not self.streaming or self.session is None:
            return
        session = await database_sync_to_async(sessions.load_session)(self.session.id)
        if session is None or session.seat_id is None:
            await self.end_stream()
            return
        if self.seat is not None:
            await self.leave_seat(self.seat.pk)
        self.session, self.seat = session, session.seat
        await self.join_seat(self.seat.pk)
        self.live_until = await database_sync_to_async(services.seats.keep_live)(seat=self.seat)
        if self.ready:
            self.host.claimer.ring(self)
            self.take_direct_pushes()

    async def session_end(self, message) -> None:
        if self.streaming:
            await self.end_stream()

    async def send_event(self, message: dict, event_id: str | None = None) -> None:
        """One pushed message on the stream (mcpgate.delivery.Stream)."""
        await self.send_chunk(protocol.sse_event(message, event_id))

    async def end_stream(self) -> None:
        if self.response_started and not self.response_finished:
            await self.send_chunk(b"", more=False)
        await self.finish()

    async def closed(self) -> None:
        if not self.streaming:
            return
        self.drop_direct_pushes()
        self.streaming = False
        metrics.LIVE_STREAMS.dec()
        # First out of the ticker, so no refresh lands after end_live below.
        await self.host.ticker.remove(self)
        if self.session is not None and self.stream_token:
            await database_sync_to_async(sessions.release_stream)(self.session, self.stream_token)
        if self.seat is not None and self.live_until is not None:
            await database_sync_to_async(services.seats.end_live)(
                seat=self.seat, only_if_until=self.live_until
            )

    # ------------------------------------------------------------------ DELETE

    async def delete(self) -> None:
        session = await self.load_session()
        await database_sync_to_async(sessions.end_session)(session)
        await self.channel_layer.group_send(session_group(session.id), {"type": "session.end"})
        await self.send_response(200, b"")
