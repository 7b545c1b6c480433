"""The operator's live view (/admin/live/) and its event stream (/admin/live/stream):
what the stream sends, to whom, how it resumes, and that nothing in it writes.

The claims about processes run real ones: a `salon serve` daemon, `salon send` from the
command line, `salon watch`. The position arithmetic of bus.live runs in-process.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
from urllib.parse import urljoin

import httpx
import pytest

from bus import live
from bus.bell import SqliteWatch
from salond.host import Board
from tests.claude_kit import API_SEAT, WEB_SEAT, api, ok, salon, send, web
from tests.live_kit import (
    DOCS_SEAT,
    OLD_SEAT,
    PASSWORD,
    Event,
    events,
    read_until,
    seed,
    seed_rows,
    staff_client,
    stream_timeout,
)
from tests.support import (
    Daemon,
    drop_store,
    dump_store,
    migrate,
    query_store,
    run_django_script,
    salon_cmd,
    salon_env,
)

STREAM = "/admin/live/stream"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One seeded store and its daemon for the module's process tests (each adds its own
    entries and looks only at those), with a TMPDIR short enough for the line socket."""
    data = tmp_path_factory.mktemp("live")
    short = tempfile.mkdtemp(prefix="st-", dir="/tmp")
    store = salon_env(data, TMPDIR=short)
    migrate(store)
    seed(store, data)
    daemon = Daemon(env=store, cwd=data).start()
    yield store, daemon
    daemon.stop()
    drop_store(store)
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def store(shared):
    return shared[0]


@pytest.fixture
def server(shared):
    return shared[1]


@pytest.fixture
def staff(server):
    with staff_client(server.url) as client:
        yield client


def is_ready(got: list[Event]) -> bool:
    return got[-1].name == "ready"


def entries_in(got: list[Event]) -> list[Event]:
    return [e for e in got if e.name == "entry"]


# ---------------------------------------------------------------- the stream


@pytest.mark.slow
def test_the_stream_sends_cli_entries_with_the_seats_they_wake_and_whose_quiet_held_them(
    store, staff
):
    with staff.stream("GET", STREAM, timeout=stream_timeout()) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = events(response)
        backlog = read_until(stream, is_ready)
        seeded = next(e for e in backlog if e.data["content"].startswith("Who owns the session"))
        assert seeded.data["wakes"] == [API_SEAT] and seeded.id is None  # the past: no id

        send(store, web, "team", "QUESTION", "Is the refresh endpoint v2 yet?", "--to", "docs")
        send(store, api, "team", "FACT", "Staging is down until 14:30.")
        got = read_until(stream, lambda got: len(entries_in(got)) == 2)

    question, fact = (e.data for e in entries_in(got))
    assert (question["from"], question["to"], question["wakes"]) == (WEB_SEAT, ["docs"], [])
    assert question["quieted"] == [DOCS_SEAT]  # docs is quiet for the hour
    assert (fact["type"], fact["wakes"], fact["content"]) == (
        "FACT",
        [],
        "Staging is down until 14:30.",
    )
    assert {e.name for e in got} <= {"entry", "panes"}  # the panes follow the sends
    team = query_store(store, "SELECT id, last_seq FROM bus_room WHERE name = 'team'")
    assert live.decode(entries_in(got)[1].id)[team[0][0]] == team[0][1]  # the position after


@pytest.mark.slow
def test_a_reconnect_with_last_event_id_gets_exactly_what_was_stored_meanwhile(store, staff):
    with staff.stream("GET", STREAM, timeout=stream_timeout()) as response:
        ready = read_until(events(response), is_ready)[-1]

    send(store, web, "team", "FACT", "stored while the page was away")
    send(store, api, "team", "ANSWER", "and this one too")

    headers = {"Last-Event-ID": ready.id}
    with staff.stream("GET", STREAM, headers=headers, timeout=stream_timeout()) as response:
        got = read_until(events(response), is_ready)

    assert [(e.name, e.data.get("content")) for e in got] == [
        ("entry", "stored while the page was away"),
        ("entry", "and this one too"),
        ("ready", None),
    ]
    assert live.decode(got[-1].id) == live.decode(got[-2].id)


MOBILE_SESSION = "0b11e000-aaaa-4bbb-8ccc-000000000005"
MOBILE_SEAT = "mobile#0b11e000"


def mobile(env, *args):
    return ok(salon(env, *args, agent="mobile", session=MOBILE_SESSION))


def seat_cells(event: Event, seat: str) -> str | None:
    """The text of a seat's row in a `panes` event's seats pane (tags dropped)."""
    found = re.search(rf'<tr data-seat="{re.escape(seat)}">(.*?)</tr>', event.data["seats"], re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1))) if found else None


def room_counts(event: Event, room: str) -> list[str]:
    """A room's numbers in a `panes` event's rooms pane: entries, seats, live."""
    found = re.search(
        rf'<tr data-room="{re.escape(room)}"[^>]*>(.*?)</tr>', event.data["rooms"], re.S
    )
    return re.findall(r'<td class="num">(\d+)', found.group(1))


@pytest.mark.slow
def test_the_stream_sends_the_rooms_and_seats_again_as_seats_join_focus_go_quiet_and_read(
    store, staff
):
    """REGRESSION: only the flow was live; a new seat, a focus, a quiet or a read showed
    only after a reload. Each step here is a real `salon` command; the stream's next
    `panes` event shows it."""
    with staff.stream("GET", STREAM + "?room=team", timeout=stream_timeout()) as response:
        stream = events(response)
        first = read_until(stream, lambda got: got[-1].name == "panes")[-1]
        assert seat_cells(first, MOBILE_SEAT) is None

        def next_panes(claim) -> Event:
            got = read_until(stream, lambda got: got[-1].name == "panes" and claim(got[-1]))
            return got[-1]

        mobile(store, "join", "team")
        joined = next_panes(lambda e: seat_cells(e, MOBILE_SEAT) is not None)
        assert "live" in seat_cells(joined, MOBILE_SEAT)
        entries, seats, _ = room_counts(first, "team")
        assert room_counts(joined, "team")[:2] == [entries, str(int(seats) + 1)]

        mobile(store, "focus", "the offline cache", "--phase", "apply")
        next_panes(lambda e: "the offline cache [apply]" in seat_cells(e, MOBILE_SEAT))

        mobile(store, "quiet", "--for", "1h")
        next_panes(lambda e: "quiet until" in seat_cells(e, MOBILE_SEAT))

        send(store, web, "team", "FACT", "the offline cache needs a schema version")
        next_panes(lambda e: "behind: " in seat_cells(e, MOBILE_SEAT))
        mobile(store, "inbox", "team")
        next_panes(lambda e: "reading, caught up" in seat_cells(e, MOBILE_SEAT))


# A logged-in user who is not staff (the admin's login form refuses one, so its session
# is made the way django.contrib.auth.login makes it).
VISITOR_SESSION = r"""
import django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
user = User.objects.create_user("visitor", password="visitor-pw-9315")
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print(session.session_key)
"""


@pytest.mark.slow
def test_the_stream_is_for_staff_only(store, server, tmp_path):
    anonymous = httpx.get(server.url + STREAM, timeout=5)
    assert anonymous.status_code == 403
    assert "staff only" in anonymous.text

    visitor = run_django_script(store, VISITOR_SESSION, tmp_path).strip()
    cookies = {"sessionid": visitor}
    assert httpx.get(server.url + STREAM, cookies=cookies, timeout=5).status_code == 403

    with staff_client(server.url) as staff:
        assert staff.get("/admin/live/").status_code == 200
        foreign = staff.get(STREAM, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403
    assert httpx.get(server.url + "/admin/live/", timeout=5).status_code == 302  # to login


@pytest.mark.slow
def test_a_session_cookie_copied_before_logging_out_opens_neither_the_admin_nor_the_flow(
    server,
):
    with staff_client(server.url) as staff:
        copied = dict(staff.cookies)
        page = staff.get("/admin/")
        assert page.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        assert staff.post("/admin/logout/", data={"csrfmiddlewaretoken": token}).is_success

    with httpx.Client(base_url=server.url, cookies=copied, timeout=5) as thief:
        admin = thief.get("/admin/")
        assert admin.status_code == 302
        assert admin.headers["location"].startswith("/admin/login/")
        assert thief.get(STREAM).status_code == 403

    # Logging in again works, with a cookie of its own.
    with staff_client(server.url) as staff:
        assert staff.get("/admin/").status_code == 200
        assert dict(staff.cookies)["sessionid"] != copied["sessionid"]


@pytest.mark.django_db
def test_the_page_shows_the_rooms_and_the_seats_liveness_reading_quiet_and_focus(client):
    seed_rows()
    client.login(username="staff", password=PASSWORD)
    page = client.get("/admin/live/?room=team").content.decode()

    rows = dict(re.findall(r'<tr data-seat="([^"]+)">(.*?)</tr>', page, re.S))
    assert list(rows) == [API_SEAT, WEB_SEAT, DOCS_SEAT, OLD_SEAT]  # live, ?, gone
    assert "reading, caught up" in rows[WEB_SEAT]
    assert "the login form" in rows[WEB_SEAT] and "[apply]" in rows[WEB_SEAT]
    assert "behind: 2 unread, 2 waking" in rows[API_SEAT]
    assert ">?</span>" in rows[DOCS_SEAT] and "quiet until" in rows[DOCS_SEAT]
    assert ">gone</span>" in rows[OLD_SEAT]
    assert "behind" not in rows[OLD_SEAT] and "unread" not in rows[OLD_SEAT]
    assert 'href="?room=ops"' in page and 'href="?room=team"' in page


@pytest.mark.django_db
def test_an_unknown_room_is_named_and_the_busiest_room_shown_instead(client):
    seed_rows()
    client.login(username="staff", password=PASSWORD)
    page = client.get("/admin/live/?room=tema").content.decode()

    assert "There is no room &#x27;tema&#x27;; showing &#x27;team&#x27;." in page
    assert "Seats in “team”" in page


@pytest.mark.django_db
def test_the_page_opens_on_the_busiest_room_never_on_an_empty_default_room(client):
    """REGRESSION: the page opened on the default room nobody had joined ("Nobody is in
    'salon'") while the agents talked in `team`. Busiest: a room somebody is in, then the
    newest entry, then the most live seats."""
    from bus import services

    seed_rows()  # `team` has four seats and two entries; `ops` and `salon` nobody
    client.login(username="staff", password=PASSWORD)
    ci = services.seats.check_in(agent="ci")  # a webhook caller: writes, is in no room
    services.entries.send_entry(seat=ci, room="salon", type="FACT", text="build 812 is green")

    assert "Seats in “team”" in client.get("/admin/live/").content.decode()

    lab = services.seats.check_in(agent="lab", session_id="1ab00000-aaaa-4bbb-8ccc-000000000009")
    services.rooms.join_room(seat=lab, room="lab", create=True)
    assert "Seats in “team”" in client.get("/admin/live/").content.decode()  # no entry yet
    services.entries.send_entry(seat=lab, room="lab", type="FACT", text="the lab is open")
    assert "Seats in “lab”" in client.get("/admin/live/").content.decode()


@pytest.mark.django_db
def test_the_seats_pane_counts_reading_in_one_query_however_many_seats_and_says_capped(
    monkeypatch,
):
    """The panes are drawn again every few seconds while a page is open: their cost must
    not grow with the seats of the room, and a count stops at the cap and says so."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bus import services
    from bus.models import Seat

    monkeypatch.setattr(live, "UNREAD_CAP", 3)
    seed_rows()
    web_seat = Seat.objects.get(name=WEB_SEAT)
    for n in range(4):
        services.entries.send_entry(seat=web_seat, room="team", type="FACT", text=f"fact {n}")
    with CaptureQueriesContext(connection) as few:
        live.panes("team")
    for n in range(12):
        seat = services.seats.check_in(agent=f"bot{n}", session_id=f"{n:08x}-aaaa-4bbb-8ccc-1")
        services.rooms.join_room(seat=seat, room="team")
    with CaptureQueriesContext(connection) as many:
        panes = live.panes("team")

    assert len(many) == len(few)
    rows = {row.name: row for row in panes.seats}
    assert len(rows) == 16
    assert rows[API_SEAT].reading_text == "behind: 3+ unread, 2 waking"
    assert rows[WEB_SEAT].reading_text == "reading, caught up"  # its own entries are read
    assert rows[OLD_SEAT].reading_text == "gone" and rows[OLD_SEAT].unread is None


def test_the_busiest_room_is_one_somebody_is_in_with_the_newest_entry_then_live_seats():
    def room(name, seats=0, live_=0, last=None):
        return live.RoomRow(name, 0, last, seats, live_, 0)

    assert live.busiest([]) is None
    assert live.busiest([room("ops"), room("salon")]) == "ops"  # nobody anywhere: by name
    newest = "2026-01-02T10:00:00.000Z"
    assert live.busiest([room("salon", last=newest), room("team", seats=2)]) == "team"
    older = "2026-01-01T10:00:00.000Z"
    rows = [room("ops", 1, 1, older), room("team", 3, 0, newest), room("web", 5, 5)]
    assert live.busiest(rows) == "team"
    assert live.busiest([room("ops", 1, 1), room("team", 3, 2), room("web", 3, 2)]) == "team"


# ---------------------------------------------------------------- read-only


def _links(page: str, base: str) -> set[str]:
    """The same-site links of a page's content (not the admin's header and menus)."""
    content = page.split('id="content-main"', 1)[-1]
    found = set()
    for href in re.findall(r'href="([^"#]+)"', content):
        url = urljoin(base, href.replace("&amp;", "&"))
        if url.startswith("/admin/") and "/logout" not in url:
            found.add(url)
    return found


@pytest.mark.slow
def test_every_view_and_action_of_the_live_view_leaves_every_row_of_the_store_unchanged(
    store, server, tmp_path
):
    """Compared: every row of every table — the bus's, mcpgate's, and Django's own
    (django_session and auth_user included: the login happens before the first look and
    nothing after it may touch them)."""
    with staff_client(server.url) as staff:
        staff.get("/admin/")
        before = dump_store(store)

        pages = ["/admin/", "/admin/live/", "/admin/live/?room=ops", "/admin/live/?room=nope"]
        seen: set[str] = set()
        while pages:  # the live pages and every page they link to, once
            url = pages.pop()
            if url in seen:
                continue
            seen.add(url)
            response = staff.get(url)
            assert response.status_code == 200, url
            if url.startswith("/admin/live/"):
                pages.extend(_links(response.text, url) - seen)
        assert {"/admin/live/?room=team", "/admin/live/?room=ops"} <= seen
        assert any(url.startswith("/admin/bus/seat/") for url in seen)

        with staff.stream("GET", STREAM, timeout=stream_timeout()) as response:
            flow = read_until(events(response), is_ready)
        with staff.stream("GET", STREAM + "?room=ops", timeout=stream_timeout()) as response:
            read_until(events(response), lambda got: got[-1].name == "panes")  # drawn again
        for entry in flow[:-1]:  # each entry opened in full, as the flow's links do
            assert staff.get(f"/admin/bus/entry/{entry.data['id']}/change/").status_code == 200
        resumed = {"Last-Event-ID": live.encode({})}
        with staff.stream("GET", STREAM, headers=resumed, timeout=stream_timeout()) as response:
            replayed = read_until(events(response), is_ready)[:-1]  # from the start
        assert len(replayed) == query_store(store, "SELECT COUNT(*) FROM bus_entry")[0][0]
        assert staff.post(STREAM).status_code == 405
        assert staff.post("/admin/live/").status_code == 403  # no CSRF token: refused

        watch = subprocess.Popen(
            salon_cmd("watch", "team"),
            env=store,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert "watching room 'team'" in watch.stderr.readline()
        watch.send_signal(signal.SIGINT)
        assert watch.wait(10) == 0

        assert dump_store(store) == before


# ---------------------------------------------------------------- the doorbell


@pytest.mark.slow
def test_the_store_watch_notices_an_entry_that_wakes_nobody_from_another_process(store):
    if store.get("DATABASE_URL"):
        pytest.skip("SQLite's watch; PostgreSQL notifies every entry instead")
    watch = SqliteWatch(store["AGENT_SALON_DB"], entries=True)
    try:
        assert watch.look() == ([], False)
        send(store, api, "team", "FACT", "wakes nobody")
        assert watch.look() == ([], True)
        send(store, web, "team", "QUESTION", "wakes api", "--to", "api-service")
        wakes, stored = watch.look()
        ((api_id,),) = query_store(store, "SELECT id FROM bus_seat WHERE name = ?", (API_SEAT,))
        assert stored and [seats for _, seats in wakes] == [{api_id}]
        assert watch.look() == ([], False)
    finally:
        watch.close()


# ---------------------------------------------------------------- positions (in-process)


def test_positions_round_trip_as_an_event_id_and_a_foreign_id_is_not_read():
    assert live.decode(live.encode({3: 17, 5: 2, 9: 0})) == {3: 17, 5: 2}
    assert live.decode(live.encode({})) == {}
    for foreign in ("", "42", "0190a1b2-7c3d-7e4f-8a5b-6c7d8e9f0a1b", "p1;3:x", "p1;3"):
        assert live.decode(foreign) is None


@pytest.mark.django_db
def test_entries_after_positions_come_per_room_in_order_and_a_new_room_from_its_start():
    from bus import services

    web_seat = services.seats.check_in(agent="web-app", session_id="3f9c1a20-0000-4000-8000-1")
    services.rooms.create_room(name="team")
    services.rooms.join_room(seat=web_seat, room="team")
    for n in range(3):
        services.entries.send_entry(seat=web_seat, room="team", type="FACT", text=f"t{n}")
    start = live.positions()
    services.entries.send_entry(seat=web_seat, room="team", type="FACT", text="t3")
    services.entries.send_entry(seat=web_seat, room="ops", type="FACT", text="o0", create=True)

    got = live.after(start)
    assert [i.data["content"] for i in got] == ["t3", "o0"]
    assert live.waiting(start) == 2
    assert [i.data["content"] for i in live.after(start, limit=1)] == ["t3", "o0"]
    assert [i.data["content"] for i in live.recent(start, limit=2)] == ["t1", "t2"]
    moved = dict(start)
    for item in got:
        moved[item.room_id] = item.seq
    assert live.after(moved) == [] and moved == live.positions()


@pytest.mark.django_db
def test_the_flow_lists_under_wakes_the_seats_send_reported_and_never_a_gone_one():
    """REGRESSION: the flow listed a gone seat under "wakes" (its ledger row says woken:
    the entry waits for it), though `send` leaves gone seats out of its `wakes`."""
    from datetime import timedelta

    from django.utils import timezone

    from bus import services
    from bus.models import Seat

    seed_rows()  # team: web-app and api-service live, docs unknown and quiet, old-tool gone
    start = live.positions()
    web_seat = Seat.objects.get(name=WEB_SEAT)
    report = services.entries.send_entry(
        seat=web_seat, room="team", type="REQUEST", text="Please review the rotation."
    )
    api_seat = Seat.objects.get(name=API_SEAT)
    asked = services.entries.send_entry(seat=api_seat, room="team", type="QUESTION", text="Who?")

    assert report["wakes"] == [API_SEAT] and asked["wakes"] == [WEB_SEAT]
    request, question = live.after(start)
    assert request.data["wakes"] == report["wakes"]
    assert request.data["waiting"] == [OLD_SEAT]  # the rule woke it; the entry waits for it
    assert question.data["wakes"] == asked["wakes"]

    # The flow says whom an entry woke when it was stored, whatever became of them since:
    # old-tool comes back (seen again), api-service goes.
    Seat.objects.filter(name=OLD_SEAT).update(last_seen=timezone.now())
    Seat.objects.filter(pk=api_seat.pk).update(last_seen=timezone.now() - timedelta(hours=3))
    again = [i.data["wakes"] for i in live.recent(live.positions(), limit=2)]
    assert again == [[API_SEAT], [WEB_SEAT]]


@pytest.mark.django_db
def test_entries_of_one_millisecond_in_two_rooms_come_and_look_back_in_the_order_written(
    monkeypatch,
):
    from django.utils import timezone

    from bus import services

    web_seat = services.seats.check_in(agent="web-app", session_id="3f9c1a20-0000-4000-8000-1")
    for room in ("team", "ops"):  # team's room id is the lower one
        services.rooms.create_room(name=room)
        services.rooms.join_room(seat=web_seat, room=room)
    start = live.positions()
    one_instant = timezone.now()
    monkeypatch.setattr(services.entries.timezone, "now", lambda: one_instant)
    for room, text in (("ops", "first"), ("team", "second"), ("ops", "third")):
        services.entries.send_entry(seat=web_seat, room=room, type="FACT", text=text)

    assert [i.data["content"] for i in live.after(start)] == ["first", "second", "third"]
    at = live.positions()
    assert [i.data["content"] for i in live.recent(at, limit=3)] == ["first", "second", "third"]


# ---------------------------------------------------------------- keep-alive (in-process)


class QuietHost:
    """The daemon's part the stream uses (its board), with no listener: nothing rings."""

    def __init__(self) -> None:
        self.board = Board()

    async def start(self) -> None:
        pass


@pytest.mark.django_db(transaction=True)
async def test_a_quiet_stream_sends_a_keep_alive_comment(monkeypatch):
    """In-process, with the keep-alive period shortened (the real one is 15 s)."""
    from channels.db import database_sync_to_async
    from channels.testing import ApplicationCommunicator
    from django.contrib.auth.models import User
    from django.db import connections

    from salon import live as live_stream

    monkeypatch.setattr(live_stream, "KEEPALIVE_SECONDS", 0.2)
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/admin/live/stream",
        "headers": [(b"host", b"127.0.0.1")],
        "user": User(username="staff", is_staff=True, is_active=True, is_superuser=True),
    }
    talk = ApplicationCommunicator(live_stream.LiveStream.as_asgi(host=QuietHost()), scope)
    await talk.send_input({"type": "http.request", "body": b""})
    try:
        start = await talk.receive_output(5)
        assert start["status"] == 200
        chunks = [(await talk.receive_output(5))["body"] for _ in range(3)]
        assert chunks[0].startswith(b"id: p1;\nevent: ready\n")  # an empty store
        assert chunks[1].startswith(b"event: panes\n")  # the rooms and seats, as they are
        assert chunks[2] == b": keep-alive\n\n"
    finally:
        await talk.send_input({"type": "http.disconnect"})
        await talk.wait(5)
        # the database thread's connection, so that the test database can be dropped
        await database_sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
async def test_staff_without_the_view_permission_get_neither_the_page_nor_the_flow(client):
    """The live view shows every entry: it needs what the history of entries needs."""
    from channels.db import database_sync_to_async
    from channels.testing import ApplicationCommunicator
    from django.contrib.auth.models import User
    from django.db import connections

    from salon import live as live_stream

    clerk = await database_sync_to_async(User.objects.create_user)(
        "clerk", password="clerk-pw-9315", is_staff=True
    )
    await database_sync_to_async(client.force_login)(clerk)
    page = await database_sync_to_async(client.get)("/admin/live/")
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/admin/live/stream",
        "headers": [(b"host", b"127.0.0.1")],
        "user": clerk,
    }
    talk = ApplicationCommunicator(live_stream.LiveStream.as_asgi(host=QuietHost()), scope)
    await talk.send_input({"type": "http.request", "body": b""})
    try:
        start = await talk.receive_output(5)
        body = await talk.receive_output(5)
    finally:
        await talk.wait(5)
        await database_sync_to_async(connections.close_all)()

    assert page.status_code == 403
    assert start["status"] == 403 and b"permission to view entries" in body["body"]
