"""Security review of 2026-12-01, finding 1: no stored entry can make a read path fail.

Rows are written straight into the SQLite file (`bus_entry`), as anyone with the file
can: arbitrary meta (deep nesting, numbers Python cannot hold, lone surrogates, not an
object), arbitrary `to`, odd text, text that is not UTF-8, an `re` that is no UUID, bad
signatures. Then every read path must answer — CLI
inbox/peek/history --json, the MCP inbox/history tools over HTTP, the admin's entry list
and entry page as a superuser — with no 5xx and no traceback, each such row shown as
tampered. A row is a copy of a real entry with the fuzzed columns replaced, so columns
added later keep their real values.

SALON_FUZZ_EXAMPLES scales the number of cases (a tenth of it here, at least 10);
SALON_FUZZ_SHRINK=1 lets hypothesis shrink a failure (slow: each case runs processes).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import pytest
from hypothesis import HealthCheck, Phase, example, given, reject, settings
from hypothesis import strategies as st

from tests.security_kit import (
    TRACEBACK,
    Mcp,
    admin_client,
    claude_session_id,
    cli,
    fuzz_examples,
    notify,
    private_env,
    unique,
)
from tests.support import Daemon, drop_store, make_staff, salon_cmd

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL")), reason="rows are written into the SQLite file"
)

PASSWORD = "correct horse battery staple"
EXAMPLES = max(10, fuzz_examples() // 10)
PHASES = [Phase.explicit, Phase.generate] + (
    [Phase.shrink] if os.environ.get("SALON_FUZZ_SHRINK") else []
)


def deep_text(depth: int, kind: str = "list") -> str:
    """`{"a": [[[…]]]}` nested `depth` deep, as JSON text."""
    opening, closing = ("[", "]") if kind == "list" else ('{"a":', "}")
    return '{"a": ' + opening * depth + closing * depth + "}"


# ---------------------------------------------------------------- the store, from outside


@dataclass
class Reader:
    """The module's daemon and the readers every read path is tried with."""

    daemon: Daemon
    admin: httpx.Client
    mcp: Mcp
    identity: dict = field(default_factory=dict)

    @property
    def db(self) -> str:
        return self.daemon.env["AGENT_SALON_DB"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    base = tmp_path_factory.mktemp("store")
    env = private_env(base)
    make_staff(env, PASSWORD, username="boss")
    daemon = Daemon(env=env, cwd=base).start()
    try:
        reader = Reader(
            daemon=daemon,
            admin=admin_client(daemon.url, "boss", PASSWORD),
            mcp=Mcp(daemon.url, label="reader").open(),
            identity={"agent": "cli-reader", "session": claude_session_id()},
        )
        yield reader
        reader.admin.close()
    finally:
        daemon.stop()
        drop_store(env)


def open_room(reader: Reader, name: str) -> dict:
    """A room both readers are in, with one real entry: the template of forged rows."""
    reader.mcp.result("join", {"room": name, "create": True})
    done = cli("join", name, env=reader.daemon.env, **reader.identity)
    assert done.returncode == 0, done.stderr
    content = unique("template")
    assert notify(reader.daemon.url, {"content": content, "room": name}).status_code == 202
    with contextlib.closing(sqlite3.connect(reader.db)) as connection:
        connection.row_factory = sqlite3.Row
        row = connection.execute("SELECT * FROM bus_entry WHERE content = ?", (content,)).fetchone()
        return dict(row)


@pytest.fixture(scope="module")
def rows_room(store):
    name = unique("rows")
    return name, open_room(store, name)


@dataclass
class Row:
    """The columns a forged row replaces; everything else is the template's."""

    meta: str = "{}"
    to: str = "[]"
    content: str | bytes = "forged"
    sender: str = "writer"
    type: str = "FACT"
    via: str = "notify"
    sender_addr: str = ""
    sender_session: str = ""
    delivered_to: str = "[]"
    delivery_errors: str = "[]"
    signature: str = ""
    re: str | None = None


def insert_rows(reader: Reader, template: dict, rows: list[Row]) -> list[str]:
    """Write `rows` into the template's room; their ids (UUID text with dashes)."""
    dashed = "-" in str(template["id"])
    ts = template["ts"]
    if isinstance(ts, str) and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", ts):
        ts = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")  # newest: the admin's page 1
    ids = []
    with contextlib.closing(sqlite3.connect(reader.db, timeout=30)) as connection, connection:
        (last,) = connection.execute(
            "SELECT MAX(seq) FROM bus_entry WHERE room_id = ?", (template["room_id"],)
        ).fetchone()
        for offset, row in enumerate(rows, start=1):
            new = uuid.uuid4()
            values = dict(template, id=str(new) if dashed else new.hex, seq=last + offset, ts=ts)
            for name, value in vars(row).items():
                if name in values:
                    values[name] = value
            if row.re is not None and "re" in values:
                try:
                    values["re"] = str(uuid.UUID(row.re)) if dashed else uuid.UUID(row.re).hex
                except ValueError:
                    values["re"] = row.re  # what the schema would refuse, as it is
            columns = ", ".join(f'"{name}"' for name in values)
            # Bytes go in as TEXT as they are: not UTF-8, as `CAST(X'…' AS TEXT)` writes.
            marks = ", ".join(
                "CAST(? AS TEXT)" if isinstance(value, bytes) else "?" for value in values.values()
            )
            try:
                connection.execute(
                    f"INSERT INTO bus_entry ({columns}) VALUES ({marks})", list(values.values())
                )
            except sqlite3.IntegrityError:
                reject()  # SQLite's own JSON check refused it: nobody can store it either
            ids.append(str(new))
        room_columns = {r[1] for r in connection.execute("PRAGMA table_info(bus_room)")}
        if "last_seq" in room_columns:
            connection.execute(
                "UPDATE bus_room SET last_seq = ? WHERE id = ?",
                (last + len(rows), template["room_id"]),
            )
    return ids


# ---------------------------------------------------------------- every read path


def _same_id(a: str, b: str) -> bool:
    return a.replace("-", "") == b.replace("-", "")


def every_read_path_answers(
    reader: Reader, room: str, ids: list[str], *, tampered: bool = True
) -> None:
    """The CLI, MCP and admin readings of `room` all answer; with `tampered`, the rows
    `ids` read as tampered on every path."""

    def _tampered_shown(entries: list[dict], ids: list[str]) -> None:
        for entry in entries:
            if tampered and any(_same_id(str(entry.get("id")), i) for i in ids):
                assert entry.get("tampered") is True, entry

    env = {**reader.daemon.env}
    if reader.identity:
        env["AGENT_SALON_NAME"] = reader.identity["agent"]
        env["CLAUDE_CODE_SESSION_ID"] = reader.identity["session"]
    commands = {
        "peek": ("peek", room, "--limit", "100", "--json"),
        "history": ("history", room, str(max(len(ids), 1)), "--json"),
        "inbox": ("inbox", room, "--limit", "100", "--json"),
    }
    processes = {
        name: subprocess.Popen(
            salon_cmd(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for name, args in commands.items()
    }
    try:
        for tool, arguments in (
            ("history", {"room": room, "limit": max(len(ids), 1)}),
            ("inbox", {"room": room, "limit": 100}),
        ):
            message = reader.mcp.call(tool, arguments)  # asserts HTTP 200, no traceback
            assert "result" in message, (tool, message)
            _tampered_shown(message["result"].get("structuredContent", {}).get("entries", []), ids)

        index = reader.admin.get("/admin/")
        assert index.status_code == 200, index.status_code
        (listing,) = sorted(set(re.findall(r'href="(/admin/[^"]*/entry/)"', index.text)))
        page = reader.admin.get(listing)
        assert page.status_code == 200, f"{listing}: {page.status_code}"
        assert TRACEBACK not in page.text
        for entry_id in ids:
            detail = reader.admin.get(f"{listing}{entry_id}/change/")
            assert detail.status_code == 200, f"entry {entry_id}: {detail.status_code}"
            assert TRACEBACK not in detail.text
            if tampered:
                assert "tamper" in detail.text.lower(), f"entry {entry_id} not shown as tampered"
    finally:
        outputs = {name: process.communicate(timeout=120) for name, process in processes.items()}
    for name, (stdout, stderr) in outputs.items():
        code = processes[name].returncode
        assert code == 0, f"salon {name}: exit {code}: {stderr[-2000:]}"
        assert TRACEBACK not in stderr, stderr[-2000:]
        _tampered_shown(json.loads(stdout).get("entries", []), ids)


# ---------------------------------------------------------------- the regression


def test_a_deeply_nested_meta_cannot_break_the_room_for_readers(store):
    """REGRESSION: 2026-12-01 — one POST /notify with meta nested 326 deep
    (`{"content":"x","meta":{"a":[[[…]]]}}`) was stored (202); afterwards the MCP inbox and
    peek answered 500, `salon inbox/peek/history` died with RecursionError, and the
    admin's entry list and entry page answered 500: the room was broken for good (the
    signature's canonical JSON recursed without bound). Wanted: whether or not /notify
    now refuses it, such a row read back answers on every path (shown as tampered)."""
    name = unique("deep")
    template = open_room(store, name)
    body = f'{{"content": "x", "room": "{name}", "meta": {deep_text(326)}}}'
    response = notify(store.daemon.url, None, raw=body.encode())
    if response.status_code == 202:  # stored by the bus itself, and signed
        every_read_path_answers(store, name, [response.json()["id"]], tampered=False)
    else:  # refused now: the row can still be written by anyone with the file
        ids = insert_rows(store, template, [Row(meta=deep_text(326))])
        every_read_path_answers(store, name, ids)


# ---------------------------------------------------------------- the property

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# JSON texts Python's json module never writes, or reads into what JSON cannot hold.
ODD_JSON = st.sampled_from(
    [
        "1e400",
        "-1e400",
        "1" + "0" * 5000,
        '{"a": 1e400}',
        '{"n": ' + "9" * 4301 + "}",
        '{"a": 1.5e-400}',
        '{"a": "\\ud800"}',
        '"\\udfff"',
        '{"\\u0000": "\\u0000"}',
        '{"\\u202e": "\\u202e\\u0301"}',
        "[]",
        "null",
        '"a string"',
        "123",
        '{"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {}}}}}}}}}}',
    ]
)
DEEP_JSON = st.builds(deep_text, st.integers(1, 900), st.sampled_from(["list", "object"]))
META = st.one_of(
    st.dictionaries(st.text(max_size=8), VALUES, max_size=6).map(json.dumps),
    VALUES.map(json.dumps),
    ODD_JSON,
    DEEP_JSON,
)
TO = st.one_of(
    st.lists(st.text(max_size=70), max_size=6).map(json.dumps),
    st.lists(VALUES, max_size=4).map(json.dumps),
    ODD_JSON,
    DEEP_JSON,
)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)
# Text SQLite keeps as TEXT that is not UTF-8 (a lone continuation byte, a cut sequence)
# or holds a NUL.
NOT_UTF8 = st.one_of(
    st.just(b"\xff\xfeA\xc3("),
    st.binary(max_size=40).filter(lambda b: not _utf8(b)),
)
# An `re` the schema would refuse: not a UUID at all.
BAD_RE = st.one_of(st.just("zzzz"), st.text(max_size=40).filter(lambda t: not _uuid(t)))


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data


def _uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


ROWS = st.lists(
    st.builds(
        Row,
        meta=META,
        to=TO,
        content=st.one_of(TEXT, NOT_UTF8),
        sender=st.one_of(st.just("writer"), TEXT),
        type=st.sampled_from(["QUESTION", "ANSWER", "FACT", "REQUEST"]),
        via=st.sampled_from(["tool", "cli", "notify", "relay", "", "x" * 20]),
        sender_addr=TEXT,
        sender_session=TEXT,
        delivered_to=TO,
        delivery_errors=TO,
        signature=st.one_of(st.just(""), st.text("0123456789abcdef", min_size=64, max_size=64)),
        re=st.one_of(st.none(), st.uuids().map(str), BAD_RE),
    ),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=PHASES,
    suppress_health_check=list(HealthCheck),
)
@example(rows=[Row(meta=deep_text(326))])
@example(rows=[Row(content=b"\xff\xfeA\xc3("), Row(re="zzzz")])
@given(rows=ROWS)
def test_no_stored_row_can_make_a_read_path_fail(store, rows_room, rows):
    """REGRESSION: 2026-12-01 — rows written into bus_entry directly (the 326-deep meta of
    finding 1 first) made the CLI, MCP and admin readings of their room fail. Wanted: no
    stored entry, however it was written, can make a read path fail; altered rows read
    as tampered."""
    name, template = rows_room
    ids = insert_rows(store, template, rows)
    every_read_path_answers(store, name, ids)


# ---------------------------------------------------------------- rows the schema refuses


def set_columns(reader: Reader, entry_id: str, assignments: str) -> None:
    """Change one stored row with SQL as it is written (`content = CAST(X'…' AS TEXT)`)."""
    with contextlib.closing(sqlite3.connect(reader.db, timeout=30)) as connection, connection:
        changed = connection.execute(
            f"UPDATE bus_entry SET {assignments} WHERE id = ? OR id = ?",
            (entry_id, entry_id.replace("-", "")),
        )
        assert changed.rowcount == 1


def sse_lines(response: httpx.Response):
    """The lines of an event stream as EventSource splits them: at CR, LF or CRLF only
    (httpx's iter_lines also splits at U+2028, U+0085 and the like, which an entry's
    JSON may carry unescaped)."""
    pending = ""
    for text in response.iter_text():
        pending += text
        *lines, pending = re.split(r"\r\n|\n|\r", pending)
        yield from lines
    if pending:
        yield pending


def live_flow(reader: Reader, room: str) -> list[dict]:
    """The entries /admin/live/stream sends a page first, up to its `ready` event."""
    entries = []
    with reader.admin.stream(
        "GET", f"/admin/live/stream?room={room}", timeout=httpx.Timeout(30)
    ) as response:
        assert response.status_code == 200, response.status_code
        event = None
        for line in sse_lines(response):
            if line.startswith("event: "):
                event = line[7:]
                if event == "ready":
                    break
            elif line.startswith("data: ") and event == "entry":
                entries.append(json.loads(line[6:]))
    return entries


def test_text_that_is_not_utf8_and_a_malformed_re_cannot_break_a_room(store):
    """REGRESSION: 2026-12-03 — a row whose content was `CAST(X'fffe41c328' AS TEXT)`
    made `salon peek/inbox/history` fail ("Could not decode to UTF-8"), the MCP inbox and
    history answer 500, the admin's entry list 500 and its live stream an empty 200; a
    row with `re = 'zzzz'` broke `salon history` ("badly formed hexadecimal UUID
    string") and the MCP inbox. Wanted: every path answers, each such row flagged, every
    other row read."""
    name = unique("schema")
    template = open_room(store, name)
    bad_text, bad_re, plain = insert_rows(store, template, [Row(), Row(), Row()])
    set_columns(store, bad_text, "content = CAST(X'fffe41c328' AS TEXT)")
    set_columns(store, bad_re, "re = 'zzzz'")
    hostile = [bad_text, bad_re]
    every_read_path_answers(store, name, hostile)

    flow = live_flow(store, name)
    shown = {e["id"].replace("-", ""): e for e in flow}
    for entry_id in [*hostile, plain]:
        assert entry_id.replace("-", "") in shown, (entry_id, flow)
    assert all(shown[i.replace("-", "")]["tampered"] for i in hostile)
    assert shown[bad_re.replace("-", "")]["re"] == "zzzz"
    assert "\ufffd" in shown[bad_text.replace("-", "")]["content"]
    assert TRACEBACK not in store.daemon.log()

    env = {
        **store.daemon.env,
        "AGENT_SALON_NAME": store.identity["agent"],
        "CLAUDE_CODE_SESSION_ID": store.identity["session"],
    }
    for command in (("history", name, "10"), ("peek", name), ("inbox", name)):
        done = subprocess.run(salon_cmd(*command), env=env, capture_output=True, text=True)
        assert done.returncode == 0, (command, done.stderr)
        assert TRACEBACK not in done.stderr
        if command[0] == "history":
            # the three forged rows (the third unsigned), not the bus's own entry
            assert done.stdout.count("TAMPERED: this entry") == 3, done.stdout
            assert "(re: zzzz)" in done.stdout
