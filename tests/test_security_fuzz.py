"""Fuzzing a real daemon (security review of 2026-12-01): /mcp, /notify, raw HTTP, and the
`salon hook` processes.

Claims: no request gets a 5xx, no answer and no line of the daemon's log carries a
traceback, the daemon still answers /healthz at the end; a hook always exits 0 and prints
nothing or one JSON object. Generated values are kept shallow on purpose (finding 1, a
meta nested hundreds deep, has tests of its own).

Bounded: SALON_FUZZ_EXAMPLES cases per HTTP test (default 200), a tenth of that (at least
15) for the hook test, which starts a process per case.
"""

from __future__ import annotations

import json
import string
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.security_kit import (
    ACCEPT_BOTH,
    TRACEBACK,
    Mcp,
    fuzz_examples,
    hook_payload,
    private_env,
    raw_request,
    run_hook,
    unique,
)
from tests.support import Daemon, drop_store

EXAMPLES = fuzz_examples()
HOOK_EXAMPLES = max(15, EXAMPLES // 10)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
ROOMS = ["salon", "fuzz"]


@dataclass
class Fuzzed:
    """The module's daemon, its tools (from tools/list) and a pool of live sessions."""

    daemon: Daemon
    client: httpx.Client
    tools: dict[str, dict]
    pool: dict[str, Mcp] = field(default_factory=dict)

    def session(self, key: str) -> Mcp:
        """A live session of the pool (label `key`, or none for "unlabeled"), re-opened
        when a fuzzed DELETE ended it."""
        session = self.pool.get(key)
        if session is None:
            label = None if key == "unlabeled" else key
            session = Mcp(self.daemon.url, label=label, rooms="salon,fuzz").open()
            self.pool[key] = session
        return session


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    env = private_env(base)
    daemon = Daemon(env=env, cwd=base).start()
    try:
        first = Mcp(daemon.url, label="fuzz-a").open()
        first.result("join", {"room": "fuzz", "create": True})
        listing = first.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).json()
        tools = {tool["name"]: tool["inputSchema"] for tool in listing["result"]["tools"]}
        with httpx.Client(timeout=httpx.Timeout(15)) as client:
            yield Fuzzed(daemon=daemon, client=client, tools=tools, pool={"fuzz-a": first})
    finally:
        daemon.stop()
        drop_store(env)


def assert_healthy(fuzzed: Fuzzed) -> None:
    """The daemon still answers, and its log holds no traceback."""
    health = httpx.get(fuzzed.daemon.url + "/healthz", timeout=10)
    assert health.status_code == 200 and health.json()["ok"] is True
    log = fuzzed.daemon.log()
    assert TRACEBACK not in log, log[log.index(TRACEBACK) :][:4000]


def assert_answer(status: int, body: str, what: object) -> None:
    assert status < 500, f"{status} for {what!r}: {body[:2000]}"
    assert TRACEBACK not in body, f"traceback for {what!r}: {body[:2000]}"


# ---------------------------------------------------------------- strategies: values

NAMES = st.sampled_from(
    ["salon", "fuzz", "fuzz-a", "fuzz-b", "nobody", "a@b", "x#y", "..", "", " ", "é", "a" * 65]
)
TEXT = st.one_of(NAMES, st.text(max_size=40))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=10,
)


def typed(schema: dict) -> st.SearchStrategy:
    """A value of the schema's type most of the time, anything JSON otherwise."""
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    options = []
    for kind in kinds:
        if kind == "string":
            options.append(TEXT)
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind in ("integer", "number"):
            options.append(st.one_of(st.integers(-5, 300), st.floats(-1, 1000)))
        elif kind == "array":
            options.append(st.lists(TEXT, max_size=6))
        elif kind == "object":
            options.append(st.dictionaries(st.text(max_size=10), VALUES, max_size=6))
    return st.one_of(*options, VALUES) if options else VALUES


# Values a real client would send, by argument name: most calls get past validation.
PLAUSIBLE = {
    "text": st.text(min_size=1, max_size=60),
    "content": st.text(min_size=1, max_size=60),
    "room": st.sampled_from(ROOMS),
    "type": st.sampled_from(["QUESTION", "answer", "Fact", "REQUEST"]),
    "to": st.lists(st.sampled_from(["fuzz-a", "fuzz-b", "ci"]), max_size=3, unique=True),
    "target": st.sampled_from(["fuzz-a", "fuzz-b"]),
    "meta": st.dictionaries(st.sampled_from(["kind", "k", "build"]), TEXT, max_size=3),
    "limit": st.integers(1, 100),
    "advance": st.booleans(),
    "from": st.sampled_from(["fuzz-a", "fuzz-b", "ci"]),
    "create": st.booleans(),
    "files": st.lists(st.sampled_from(["src/a.py", "README.md"]), max_size=3),
    "phase": st.sampled_from(["explore", "plan", "apply", "verify", "blocked"]),
    "for": st.sampled_from(["90m", "2h", "1d"]),
    "off": st.booleans(),
    "session_id": st.uuids().map(str),
    "cwd": st.sampled_from(["/tmp/web-app", "/tmp"]),
}


@st.composite
def tool_arguments(draw, name: str, schema: dict) -> object:
    """Arguments for tool `name`: plausible ones most of the time (so the tool runs),
    else its properties typed or not, some missing, some extra."""
    properties = schema.get("properties", {})
    if draw(st.integers(0, 3)) > 0:
        required = set(schema.get("required", []))
        arguments = {
            prop: draw(PLAUSIBLE.get(prop, typed(prop_schema)))
            for prop, prop_schema in properties.items()
            if prop in required or draw(st.booleans())
        }
    elif name != "wait" and draw(st.integers(0, 4)) == 0:
        return draw(VALUES)  # not even an object (an empty one makes `wait` block)
    else:
        arguments = {prop: draw(typed(s)) for prop, s in properties.items() if draw(st.booleans())}
        if draw(st.integers(0, 4)) == 0:
            arguments[draw(st.text(max_size=10))] = draw(VALUES)
    if name == "wait":
        # A valid timeout blocks that long: keep it short, or invalid (refused at once).
        arguments["timeout"] = draw(st.sampled_from([0, 0.01, -1, 301, "1", None, True, []]))
    return arguments


@st.composite
def tool_calls(draw, tools: dict[str, dict]) -> dict:
    known = st.sampled_from(sorted(tools))
    name = draw(known if draw(st.integers(0, 9)) > 0 else st.one_of(known, TEXT))
    schema = tools.get(name, {"properties": {}})
    params: dict = {"name": name, "arguments": draw(tool_arguments(name, schema))}
    if draw(st.integers(0, 9)) == 0:
        params["_meta"] = {"progressToken": draw(st.one_of(st.integers(), TEXT))}
    message_id = draw(st.integers(0, 10**6))
    return {"jsonrpc": "2.0", "id": message_id, "method": "tools/call", "params": params}


def initialize_messages() -> st.SearchStrategy:
    params = st.fixed_dictionaries(
        {},
        optional={
            "protocolVersion": st.sampled_from(
                ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2026-07-28", "1", ""]
            ),
            "capabilities": VALUES,
            "clientInfo": VALUES,
        },
    )
    return st.builds(
        lambda p, i: {"jsonrpc": "2.0", "id": i, "method": "initialize", "params": p},
        params,
        st.one_of(st.integers(), TEXT),
    )


METHODS = st.sampled_from(
    [
        "ping",
        "tools/list",
        "initialize",
        "tools/call",
        "notifications/initialized",
        "notifications/cancelled",
        "resources/list",
        "prompts/list",
        "server/discover",
        "logging/setLevel",
        "",
    ]
)


@st.composite
def rpc_messages(draw, tools: dict[str, dict]) -> object:
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return draw(initialize_messages())
    if kind in (1, 2, 3):
        return draw(tool_calls(tools))
    if kind == 4:  # a random method, a notification, or a client response
        message: dict = {"jsonrpc": draw(st.sampled_from(["2.0", "1.0", None]))}
        if draw(st.booleans()):
            message["method"] = draw(st.one_of(METHODS, TEXT))
        if draw(st.booleans()):
            message["id"] = draw(SCALARS)
        if draw(st.booleans()):
            message["params"] = draw(VALUES)
        if draw(st.integers(0, 3)) == 0:
            message[draw(st.sampled_from(["result", "error"]))] = draw(VALUES)
        return message
    if kind == 5:
        return draw(st.lists(tool_calls(tools), max_size=3))  # a batch
    return draw(VALUES)


BODIES_NOT_JSON = st.one_of(
    st.binary(max_size=200),
    st.sampled_from(
        [
            b"",
            b"{",
            b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
            b"[" * 5000 + b"]" * 5000,
            b'{"a": ' + b"9" * 5000 + b"}",
            b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "\\ud800"}',
            b"\xef\xbb\xbf{}",
            b"\xff\xfe{}",
        ]
    ),
)

HEADER_TEXT = st.text(
    st.sampled_from(string.ascii_letters + string.digits + " -_.,;:=/*\"'()"), max_size=60
).map(str.strip)


@dataclass
class McpRequest:
    method: str
    session: str  # a pool key, "random", or "none"
    query: str
    headers: dict[str, str]
    body: bytes


@st.composite
def mcp_requests(draw, tools: dict[str, dict]) -> McpRequest:
    method = draw(st.sampled_from(["POST"] * 10 + ["GET", "GET", "DELETE", "PUT", "OPTIONS"]))
    headers: dict[str, str] = {}
    accept = draw(
        st.sampled_from(
            [ACCEPT_BOTH] * 6
            + ["application/json", "text/event-stream", "*/*", "", "text/html;q=0", None]
        )
    )
    if accept is not None:
        headers["accept"] = accept
    content_type = draw(
        st.sampled_from(
            ["application/json"] * 6
            + ["application/json; charset=utf-8", "application/json; charset=latin-1"]
            + ["text/plain", "", "application/x-www-form-urlencoded", None]
        )
    )
    if content_type is not None:
        headers["content-type"] = content_type
    version = draw(st.one_of(st.none(), st.sampled_from(["2025-11-25", "2026-07-28", "x", ""])))
    if version is not None:
        headers["mcp-protocol-version"] = version
    if draw(st.integers(0, 5)) == 0:
        headers["last-event-id"] = draw(
            st.one_of(st.sampled_from(["0", "1", "-1", "x"]), HEADER_TEXT)
        )
    if draw(st.integers(0, 5)) == 0:
        headers["origin"] = draw(
            st.sampled_from(["http://127.0.0.1", "http://localhost:1", "null", "http://evil", "x"])
        )
    if draw(st.integers(0, 5)) == 0:
        headers[draw(st.sampled_from(["authorization", "x-fuzz", "cookie", "range"]))] = draw(
            HEADER_TEXT
        )
    label = draw(st.one_of(st.none(), NAMES, st.text(max_size=20)))
    query = ""
    if label is not None:
        query = str(httpx.QueryParams({"label": label}))
    if draw(st.integers(0, 4)) == 0:
        query += "&" + str(httpx.QueryParams({"room": draw(st.one_of(NAMES, TEXT))}))
    if draw(st.integers(0, 3)) == 0:
        body = draw(BODIES_NOT_JSON)
    else:
        body = json.dumps(draw(rpc_messages(tools))).encode()
    return McpRequest(
        method=method,
        session=draw(st.sampled_from(["fuzz-a", "fuzz-b", "unlabeled", "random", "none"])),
        query=query.lstrip("&"),
        headers=headers,
        body=body,
    )


def send_mcp(fuzzed: Fuzzed, request: McpRequest) -> tuple[int, str]:
    headers = dict(request.headers)
    if request.session in ("fuzz-a", "fuzz-b", "unlabeled"):
        headers["mcp-session-id"] = fuzzed.session(request.session).session_id
    elif request.session == "random":
        headers["mcp-session-id"] = uuid.uuid4().hex
    url = fuzzed.daemon.url + "/mcp" + (f"?{request.query}" if request.query else "")
    content = request.body if request.method in ("POST", "PUT") else None
    with fuzzed.client.stream(request.method, url, headers=headers, content=content) as response:
        stream = response.headers.get("content-type", "").startswith("text/event-stream")
        if stream and request.method == "GET":  # a stream stays open: its status answers
            return response.status_code, ""
        body = response.read().decode("utf-8", "replace")
        status = response.status_code
    if request.method == "DELETE" and status == 200 and request.session in fuzzed.pool:
        fuzzed.pool.pop(request.session)
    return status, body


# ---------------------------------------------------------------- /mcp


def test_fuzzed_mcp_requests_never_get_a_5xx(fuzzed):
    """Random JSON-RPC bodies (initialize, tools/call of every tool in tools/list with
    random arguments, random methods, notifications, responses, batches, malformed JSON)
    with random headers, sessions and URLs: no 5xx, no traceback."""

    @FUZZ
    @given(request=mcp_requests(fuzzed.tools))
    def check(request):
        status, body = send_mcp(fuzzed, request)
        assert_answer(status, body, request)

    check()
    assert_healthy(fuzzed)


def test_every_tool_answers_fuzzed_arguments_without_a_5xx(fuzzed):
    """A well-formed session and request; only the tool and its arguments are random."""

    @FUZZ
    @given(message=tool_calls(fuzzed.tools), who=st.sampled_from(["fuzz-a", "fuzz-b", "unlabeled"]))
    def check(message, who):
        session = fuzzed.session(who)
        response = fuzzed.client.post(
            session.url, content=json.dumps(message).encode(), headers=session.headers()
        )
        assert_answer(response.status_code, response.text, message)
        answer = (
            response.json()
            if response.status_code == 200 and "json" in response.headers.get("content-type", "")
            else {}
        )
        outcome = "error" if "error" in answer or answer.get("result", {}).get("isError") else "ok"
        event(f"{message['params']['name']!s:.20}: HTTP {response.status_code} {outcome}")

    check()
    assert_healthy(fuzzed)


# ---------------------------------------------------------------- /notify

NOTIFY_FIELDS = {
    "content": TEXT,
    "target": TEXT,
    "to": st.one_of(TEXT, st.lists(TEXT, max_size=5)),
    "room": st.sampled_from([*ROOMS, "nowhere", ""]),
    "type": st.sampled_from(["QUESTION", "answer", "Fact", "REQUEST", "NOTE", ""]),
    "re": st.one_of(TEXT, st.uuids().map(str)),
    "meta": st.dictionaries(st.text(max_size=10), VALUES, max_size=6),
    "source": TEXT,
    "from": TEXT,
    "ts": TEXT,
}


@st.composite
def notify_bodies(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(BODIES_NOT_JSON)
    if kind == 1:
        return json.dumps(draw(VALUES)).encode()
    body = {}
    for name, values in NOTIFY_FIELDS.items():
        if draw(st.booleans()):
            body[name] = draw(st.one_of(values, VALUES) if draw(st.booleans()) else values)
    if draw(st.integers(0, 5)) == 0:
        body[draw(st.text(max_size=10))] = draw(VALUES)
    return json.dumps(body).encode()


def test_fuzzed_notify_posts_never_get_a_5xx(fuzzed):
    """Random /notify bodies (typed and untyped fields, unknown fields, not JSON), labels,
    content types and methods: no 5xx, no traceback."""

    @FUZZ
    @given(
        body=notify_bodies(),
        label=st.one_of(st.none(), NAMES, st.text(max_size=20)),
        room=st.one_of(st.none(), NAMES),
        method=st.sampled_from(["POST"] * 8 + ["GET", "PUT"]),
        content_type=st.sampled_from(
            ["application/json"] * 5
            + ["application/json; charset=latin-1", "text/plain", "application/ld+json", ""]
        ),
        authorization=st.one_of(st.none(), HEADER_TEXT),
    )
    def check(body, label, room, method, content_type, authorization):
        params = {}
        if label is not None:
            params["label"] = label
        if room is not None:
            params["room"] = room
        headers = {"content-type": content_type}
        if authorization:
            headers["authorization"] = authorization
        response = fuzzed.client.request(
            method,
            fuzzed.daemon.url + "/notify",
            params=params,
            headers=headers,
            content=body if method != "GET" else None,
        )
        assert_answer(response.status_code, response.text, (label, body[:300]))

    check()
    assert_healthy(fuzzed)


# ---------------------------------------------------------------- raw HTTP

RAW_HEADER_BYTES = st.binary(max_size=80).map(
    lambda b: b.replace(b"\r", b"").replace(b"\n", b"").replace(b"\0", b"")
)


def test_fuzzed_raw_requests_never_get_a_5xx(fuzzed):
    """Bytes no HTTP client would send (odd header bytes, Last-Event-ID values, request
    targets, content lengths) to /mcp and /notify: no 5xx, no traceback."""
    port = fuzzed.daemon.port

    @settings(FUZZ, max_examples=max(20, EXAMPLES // 4))
    @given(
        path=st.sampled_from(
            [b"/mcp", b"/mcp?label=fuzz-a", b"/notify?label=raw", b"/mcp?label=\xff"]
        ),
        method=st.sampled_from([b"GET", b"POST", b"DELETE"]),
        header=st.sampled_from(
            [
                b"Last-Event-ID",
                b"Mcp-Session-Id",
                b"Mcp-Protocol-Version",
                b"Origin",
                b"Accept",
                b"Host",
            ]
        ),
        value=RAW_HEADER_BYTES,
        session=st.booleans(),
        body=st.one_of(st.just(b""), BODIES_NOT_JSON, st.just(b'{"content": "raw"}')),
    )
    def check(path, method, header, value, session, body):
        lines = [method + b" " + path + b" HTTP/1.1"]
        if header != b"Host":  # a fuzzed Host replaces the right one
            lines.append(b"Host: 127.0.0.1:%d" % port)
        lines += [b"Accept: " + ACCEPT_BOTH.encode(), b"Content-Type: application/json"]
        if session:
            lines.append(b"Mcp-Session-Id: " + fuzzed.session("fuzz-b").session_id.encode())
        lines.append(header + b": " + value)
        lines += [b"Content-Length: %d" % len(body), b"Connection: close"]
        answer = raw_request(port, b"\r\n".join(lines) + b"\r\n\r\n", body, timeout=3)
        status_line = answer.split(b"\r\n", 1)[0]
        parts = status_line.split(b" ")
        if len(parts) > 1 and parts[1].isdigit():
            assert_answer(int(parts[1]), answer.decode("latin-1"), (method, path, header, value))

    check()
    assert_healthy(fuzzed)


# ---------------------------------------------------------------- WebSocket upgrades


WEBSOCKET_PATHS = [
    b"/", b"/mcp", b"/mcp?label=fuzz-a", b"/admin/", b"/admin/live/stream", b"/notify",
    b"/healthz", b"/relay/v1/",
]  # fmt: skip


def test_fuzzed_websocket_upgrades_are_refused_never_a_5xx(fuzzed):
    """Any page can ask for a WebSocket (`new WebSocket(...)`) on any path, with any
    Origin: nothing here speaks it, so every upgrade is refused (403, or 400 for a
    handshake that is not one), never a 5xx, never a traceback in the log."""
    port = fuzzed.daemon.port

    @settings(FUZZ, max_examples=max(20, EXAMPLES // 4))
    @given(
        path=st.one_of(
            st.sampled_from(WEBSOCKET_PATHS),
            RAW_HEADER_BYTES.map(lambda b: b"/" + b.replace(b" ", b"")),
        ),
        origin=st.one_of(
            st.sampled_from([b"http://evil.example", b"http://127.0.0.1:%d" % port, b"null"]),
            RAW_HEADER_BYTES,
        ),
        version=st.sampled_from([b"13", b"8", b"", b"x"]),
        key=st.sampled_from([b"dGhlIHNhbXBsZSBub25jZQ==", b"", b"not base64"]),
    )
    def check(path, origin, version, key):
        head = b"\r\n".join(
            [
                b"GET " + path + b" HTTP/1.1",
                b"Host: 127.0.0.1:%d" % port,
                b"Upgrade: websocket",
                b"Connection: Upgrade",
                b"Sec-WebSocket-Key: " + key,
                b"Sec-WebSocket-Version: " + version,
                b"Origin: " + origin,
            ]
        )
        answer = raw_request(port, head + b"\r\n\r\n", timeout=5)
        parts = answer.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) > 1 and parts[1].isdigit():
            status = int(parts[1])
            assert_answer(status, answer.decode("latin-1"), (path, origin, version, key))
            assert status != 101, (path, origin, version, key)

    check()
    assert_healthy(fuzzed)


# ---------------------------------------------------------------- hooks

HOOK_FIELDS = {
    "session_id": st.one_of(st.uuids().map(str), TEXT),
    "cwd": st.one_of(st.sampled_from(["/tmp/web-app", "/", "", "relative/dir"]), TEXT),
    "hook_event_name": st.sampled_from(["SessionStart", "Stop", "PostToolUse", "x"]),
    "stop_hook_active": st.one_of(st.booleans(), VALUES),
    "source": st.sampled_from(["startup", "resume", "clear", "compact", "x"]),
    "transcript_path": TEXT,
    "tool_name": TEXT,
    "tool_input": VALUES,
}


@st.composite
def hook_stdins(draw) -> bytes:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(BODIES_NOT_JSON)
    if kind == 1:
        return hook_payload(
            draw(st.sampled_from(["session-start", "stop", "heartbeat"])),
            str(uuid.uuid4()),
            draw(st.sampled_from(["/tmp/web-app", "/tmp/api-service"])),
        ).encode()
    payload = {}
    for name, values in HOOK_FIELDS.items():
        if draw(st.booleans()):
            payload[name] = draw(st.one_of(values, VALUES) if draw(st.booleans()) else values)
    return json.dumps(payload).encode()


def test_fuzzed_hook_input_always_exits_0_with_nothing_or_json(fuzzed):
    """`salon hook KIND` as real processes with random stdin: exit status 0, stdout empty
    or one JSON object, no traceback anywhere."""
    env = fuzzed.daemon.env

    @settings(FUZZ, max_examples=HOOK_EXAMPLES)
    @given(
        kind=st.sampled_from(["session-start", "stop", "heartbeat", "pre-tool-use", ""]),
        stdin=hook_stdins(),
        headless=st.sampled_from(["0", "1", ""]),
        room=st.sampled_from(["fuzz", "", "nowhere"]),
    )
    def check(kind, stdin, headless, room):
        done = run_hook(env, kind, stdin, AGENT_SALON_HEADLESS=headless, AGENT_SALON_ROOM=room)
        out = done.stdout.decode("utf-8", "replace")
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 0, err
        assert TRACEBACK not in out + err, out + err
        if out.strip():
            assert isinstance(json.loads(out), dict), out

    check()
    assert_healthy(fuzzed)


def test_the_fuzzed_daemon_stores_entries_under_a_label_of_its_own(fuzzed):
    """After all that, the bus still works: a plain post is stored and read back."""
    marker = unique("after-fuzz")
    response = httpx.post(
        fuzzed.daemon.url + "/notify?label=ci",
        json={"content": marker, "room": "fuzz"},
        timeout=30,
    )
    assert response.status_code == 202, response.text
    reader = Mcp(fuzzed.daemon.url, label=unique("reader")).open()
    reader.result("join", {"room": "fuzz"})
    history = reader.result("history", {"room": "fuzz", "limit": 5})
    assert marker in [entry["content"] for entry in history["entries"]]


# ------------------------------------------------- the bench's fuzzer, and what it found


def test_the_bench_fuzzer_in_a_few_hundred_cases_finds_no_5xx_no_traceback_and_loses_nothing(
    tmp_path,
):
    """bench/fuzz.py (20,000 cases in the bench) over /mcp, /notify and every hook's
    stdin, here in 400 cases of another seed: every claim of its table holds."""
    import subprocess
    import sys

    from bench.common import read_json
    from tests.support import REPO

    out = tmp_path / "fuzz.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.fuzz", "--cases", "400", "--seed", "51", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    found = {figure.name: figure for figure in read_json(out)}
    assert found["fuzz: cases run"].value == 400
    for name in (
        "fuzz: 5xx answers",
        "fuzz: tracebacks (answers, daemon log)",
        "fuzz: hook failures (exit, output, log)",
        "fuzz: acknowledged /notify entries lost",
    ):
        assert found[name].value == 0, (name, found[name].detail)


def test_a_tool_call_naming_its_tool_with_an_object_is_refused_not_a_500(fuzzed):
    """REGRESSION: found by bench/fuzz.py — `"name": {...}` in a tools/call reached the
    send-batching check as a dict (unhashable): a 500 and a traceback."""
    mcp = fuzzed.session("fuzz-name")
    for name in ({"room": "x"}, ["send"], 5, None):
        mcp.next_id += 1
        message = {"jsonrpc": "2.0", "id": mcp.next_id, "method": "tools/call",
                   "params": {"name": name, "arguments": {}}}  # fmt: skip
        answer = mcp.post(message)
        assert answer.status_code < 500, (name, answer.text)
        assert TRACEBACK not in answer.text
    assert_healthy(fuzzed)


@pytest.mark.parametrize(
    "kind,fields",
    [
        ("session-start", {"cwd": "/tmp/a\u0000b"}),  # found by bench/fuzz.py: a traceback
        ("heartbeat", {"tool_name": {"Edit": 1}, "tool_input": {"file_path": "x"}}),
        ("heartbeat", {"tool_name": ["Write"]}),
    ],
)
def test_a_hook_input_with_a_nul_cwd_or_a_tool_name_of_the_wrong_type_is_refused_in_one_line(
    fuzzed, tmp_path, kind, fields
):
    """REGRESSION: found by bench/fuzz.py — a cwd holding a NUL reached the repository
    lookup (ValueError, a traceback in the daemon's log), a tool_name that was an object
    the claim table (TypeError). Both are now the hook's refusal or nothing at all."""
    session = str(uuid.uuid4())
    payload = json.loads(hook_payload("heartbeat" if kind == "heartbeat" else kind, session,
                                      str(tmp_path)))  # fmt: skip
    payload.update(fields)
    done = run_hook(fuzzed.daemon.env, kind, json.dumps(payload), cwd=tmp_path)
    assert done.returncode == 0 and TRACEBACK.encode() not in done.stdout + done.stderr
    assert done.stdout.strip() == b"" or isinstance(json.loads(done.stdout), dict)
    log = Path(fuzzed.daemon.env["AGENT_SALON_DB"]).parent / "agent-salon-hooks.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    assert "TypeError" not in text and "ValueError" not in text, text[-2000:]
    assert_healthy(fuzzed)
