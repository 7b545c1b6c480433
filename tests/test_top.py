"""`salon top`, driven by Textual's pilot in this process against a real SQLite (or
PostgreSQL) store: the three panes, every key, and entries and seats changing while it
runs. What the screen shows as text (salon.top.view) is tested without a screen below.

The real terminal (tmux at 80x24, exit statuses, the terminal restored, read-only) is
tests/test_top_terminal.py."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from bus import live, services
from bus.models import Seat
from salon.top import view
from salon.top.app import Flow, Pane, SearchBox, TextScreen, Top
from tests.claude_kit import API_SEAT, WEB_SEAT
from tests.live_kit import DOCS_SEAT, OLD_SEAT, seed_rows

SIZE = (80, 24)
db = pytest.mark.django_db(transaction=True)


async def orm(function, *args, **kwargs):
    return await sync_to_async(function, thread_sensitive=True)(*args, **kwargs)


async def until(pilot, holds, seconds: float = 15) -> None:
    """Let the app run until `holds()` is true; fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while not holds():
        assert time.monotonic() < deadline, f"not within {seconds}s"
        await pilot.pause(0.05)


def rows(pane: Pane) -> list[list[str]]:
    return [[str(c) for c in pane.get_row_at(i)] for i in range(pane.row_count)]


def flow_texts(app: Top) -> list[str]:
    return [row[0] for row in rows(app.query_one("#flow", Flow))]


def send(agent_seat: str, room: str, kind: str, text: str, to: list[str] | None = None):
    seat = Seat.objects.get(name=agent_seat)
    return services.entries.send_entry(seat=seat, room=room, type=kind, to=to or [], text=text)


@pytest.fixture
def seeded_db(transactional_db):
    seed_rows()


async def opened(pilot) -> Top:
    app = pilot.app
    await until(pilot, lambda: app.query_one("#flow", Flow).row_count == 2 and app.room)
    return app


# ---------------------------------------------------------------- the panes


async def test_the_three_panes_show_the_rooms_the_busiest_rooms_seats_and_the_flow(seeded_db):
    async with Top().run_test(size=SIZE) as pilot:
        app = await opened(pilot)

        rooms = rows(app.query_one("#rooms", Pane))
        assert ["team", "2", "4", "2"] in rooms  # entries, seats, live
        assert ["ops", "0", "0", "0"] in rooms
        assert app.room == "team"  # the busiest, not the empty default room
        seats = {row[0]: row for row in rows(app.query_one("#seats", Pane))}
        assert seats[WEB_SEAT][1:5] == ["live", "reading", "the login form [apply]", ""]
        assert seats[API_SEAT][1:3] == ["live", "behind 2 (2 waking)"]
        assert seats[DOCS_SEAT][1:3] == ["?", "? 2"]  # unknown is `?`, never absent
        assert seats[DOCS_SEAT][4].startswith("until ")  # quiet for an hour
        assert seats[OLD_SEAT][1:3] == ["gone", "gone"]
        assert list(seats) == [API_SEAT, WEB_SEAT, DOCS_SEAT, OLD_SEAT]  # live, ?, gone
        first, second = flow_texts(app)
        assert "team QUESTION web-app#3f9c1a20 → api-service  wakes api-service#c4e1b7d2" in first
        assert first.endswith("\n  Who owns the session-cookie refresh?")
        # the gone sender's request: the live seats it woke, and no gone seat under wakes
        assert f"REQUEST {OLD_SEAT} → *  wakes {API_SEAT}, {WEB_SEAT}" in second
        assert "(gone" not in second


async def test_a_new_entry_appears_at_the_end_of_the_flow_and_the_rooms_and_seats_follow(
    seeded_db,
):
    async with Top().run_test(size=SIZE) as pilot:
        app = await opened(pilot)
        flow = app.query_one("#flow", Flow)
        assert flow.cursor_row == 1 and flow.following()

        await orm(send, API_SEAT, "team", "ANSWER", "I own it.\nMore below.", [WEB_SEAT])
        await until(pilot, lambda: flow.row_count == 3)

        assert "team ANSWER api-service#c4e1b7d2 → web-app#3f9c1a20" in flow_texts(app)[2]
        assert flow_texts(app)[2].endswith("\n  I own it.")  # the first line only
        assert flow.cursor_row == 2  # the cursor was on the last row: it follows
        await until(pilot, lambda: ["team", "3", "4", "2"] in rows(app.query_one("#rooms", Pane)))

        # a seat joins the room and goes quiet: nothing rings, the seats pane follows
        def join_ops():
            seat = services.seats.check_in(agent="ops", session_id="0b5e7f10-1111-4e3d-b2c1-0")
            services.rooms.join_room(seat=seat, room="team")
            services.seats.set_quiet(seat=seat, duration="30m")

        await orm(join_ops)
        seats = app.query_one("#seats", Pane)
        await until(pilot, lambda: any(r[0] == "ops#0b5e7f10" for r in rows(seats)))
        ops_row = next(r for r in rows(seats) if r[0] == "ops#0b5e7f10")
        assert ops_row[1] == "live" and ops_row[4].startswith("until ")


# ---------------------------------------------------------------- the keys


async def test_tab_moves_between_the_panes_and_a_room_moved_to_shows_its_seats(seeded_db):
    async with Top().run_test(size=SIZE) as pilot:
        app = await opened(pilot)
        assert app.focused.id == "flow"
        await pilot.press("tab")
        assert app.focused.id == "rooms"
        await pilot.press("tab")
        assert app.focused.id == "seats"
        await pilot.press("shift+tab", "shift+tab")
        assert app.focused.id == "flow"

        await pilot.press("tab")  # the rooms: team is the cursor's; up to ops
        rooms = app.query_one("#rooms", Pane)
        assert rows(rooms)[rooms.cursor_row][0] == "team"
        await pilot.press("home")
        assert rows(rooms)[rooms.cursor_row][0] == "ops"
        seats = app.query_one("#seats", Pane)
        await until(pilot, lambda: seats.row_count == 0 and app.room == "ops")
        assert "seats of ops" in str(seats.border_title)
        await pilot.press("end")
        await until(pilot, lambda: seats.row_count == 4 and app.room == "team")


async def test_j_k_home_end_and_the_page_keys_move_and_only_end_follows_new_entries(seeded_db):
    def more():
        for n in range(30):
            send(WEB_SEAT, "ops", "FACT", f"note {n}")

    await orm(more)
    async with Top().run_test(size=SIZE) as pilot:
        app = pilot.app
        flow = app.query_one("#flow", Flow)
        await until(pilot, lambda: flow.row_count == 32)
        assert flow.cursor_row == 31
        await pilot.press("k", "k")
        assert flow.cursor_row == 29 and not flow.following()
        assert flow.border_subtitle == "End follows"
        await pilot.press("j")
        assert flow.cursor_row == 30
        await pilot.press("pageup")
        assert flow.cursor_row < 30 - 2
        paged = flow.cursor_row
        await pilot.press("pagedown")
        assert flow.cursor_row > paged
        await pilot.press("home")
        assert flow.cursor_row == 0 and flow.scroll_y == 0

        await orm(send, API_SEAT, "ops", "FACT", "while scrolled back")
        await until(pilot, lambda: flow.row_count == 33)
        assert flow.cursor_row == 0  # away from the end: it stays where it was

        await pilot.press("end")
        assert flow.cursor_row == 32 and flow.following()
        await orm(send, API_SEAT, "ops", "FACT", "followed")
        await until(pilot, lambda: flow.row_count == 34)
        await until(pilot, lambda: flow.cursor_row == 33)
        assert flow.border_subtitle == "following"


async def test_f_cycles_the_filter_all_waking_only_then_each_type(seeded_db):
    await orm(send, WEB_SEAT, "team", "FACT", "wakes nobody")
    async with Top().run_test(size=SIZE) as pilot:
        app = pilot.app
        flow = app.query_one("#flow", Flow)
        await until(pilot, lambda: flow.row_count == 3)

        await pilot.press("f")
        assert app.filter == "waking" and flow.row_count == 2
        assert "flow: waking" in str(flow.border_title)
        seen = {}
        for _ in view.FILTERS[2:]:
            await pilot.press("f")
            seen[app.filter] = [t.split()[2] for t in flow_texts(app)]
        assert seen == {
            "QUESTION": ["QUESTION"],
            "ANSWER": [],
            "FACT": ["FACT"],
            "REQUEST": ["REQUEST"],
        }
        await pilot.press("f")
        assert app.filter == "all" and flow.row_count == 3


async def test_slash_searches_the_loaded_flow_and_escape_in_the_box_clears_the_search(seeded_db):
    async with Top().run_test(size=SIZE) as pilot:
        app = await opened(pilot)
        flow = app.query_one("#flow", Flow)

        await pilot.press("slash")
        assert isinstance(app.screen, SearchBox)
        await pilot.press(*"staging keys", "enter")  # q, f and j typed are text here
        assert not isinstance(app.screen, SearchBox)
        assert flow.row_count == 1 and "rotate the staging keys" in flow_texts(app)[0]
        assert "search 'staging keys'" in str(flow.border_title)

        # a new entry that matches comes in; one that does not stays out
        await orm(send, API_SEAT, "team", "FACT", "the staging keys are rotated")
        await orm(send, API_SEAT, "team", "FACT", "lunch")
        await until(pilot, lambda: len(app.entries) == 4)
        assert flow.row_count == 2

        await pilot.press("slash", "escape")
        assert app.query_text == "" and flow.row_count == 4


async def test_slash_speaks_the_search_language_of_the_store(seeded_db):
    """`rotat*` is a prefix in the search language: no entry holds those characters, the
    store's full-text search finds "rotate"."""
    async with Top().run_test(size=SIZE) as pilot:
        app = await opened(pilot)
        flow = app.query_one("#flow", Flow)

        await pilot.press("slash", *"rotat* -lunch", "enter")

        await until(pilot, lambda: flow.row_count == 1)
        assert "rotate the staging keys" in flow_texts(app)[0]


async def test_enter_opens_an_entry_in_full_with_its_signature_and_a_changed_row_reads_tampered(
    seeded_db,
):
    await orm(send, API_SEAT, "team", "FACT", "line one\nline two \x1b]0;owned\x07 end")
    async with Top().run_test(size=SIZE) as pilot:
        app = pilot.app
        flow = app.query_one("#flow", Flow)
        await until(pilot, lambda: flow.row_count == 3)

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TextScreen))
        text = app.screen.text
        assert "signature  valid: the entry reads as the bus stored it" in text
        assert "line one\nline two \\x1b]0;owned\\x07 end" in text  # whole, escapes written
        assert "\x1b" not in text
        await pilot.press("escape")
        assert not isinstance(app.screen, TextScreen)

        def change_outside_the_bus():  # as a hand-edit of the store would
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE bus_entry SET content = %s WHERE content LIKE %s",
                    ["Please rotate the PROD keys.", "Please rotate%"],
                )

        await orm(change_outside_the_bus)
        await pilot.press("k", "enter")
        await until(pilot, lambda: isinstance(app.screen, TextScreen))
        assert "signature  TAMPERED" in app.screen.text
        assert "Please rotate the PROD keys." in app.screen.text


async def test_question_mark_shows_the_keys_and_q_quits_with_0(seeded_db):
    async with Top().run_test(size=SIZE) as pilot:
        app = await opened(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, TextScreen)
        for key in ("Tab", "j / k", "PgDn", "Home / End", "Enter", "/", "f", "q, Ctrl-C"):
            assert key in app.screen.text
        await pilot.press("escape")
        await pilot.press("q")
        await until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0


async def test_ctrl_c_quits_with_130(seeded_db):
    async with Top().run_test(size=SIZE) as pilot:
        app = await opened(pilot)
        await pilot.press("ctrl+c")
        await until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 130


async def test_a_larger_terminal_shows_more_of_the_flow(seeded_db):
    async with Top().run_test(size=(160, 50)) as pilot:
        app = await opened(pilot)
        flow = app.query_one("#flow", Flow)
        assert flow.size.height > 20 and flow.size.width > 150
        assert flow_texts(app)[0].endswith("Who owns the session-cookie refresh?")


# ---------------------------------------------------------------- what is shown, as text


def test_no_stored_text_reaches_the_terminal_with_a_character_it_would_act_on():
    entry = {
        "id": "x",
        "ts": "2026-12-03T10:00:00.000Z",
        "room": "team\x1b[2J",
        "type": "FACT",
        "from": "web\x9b31m",
        "to": ["api\x07"],
        "wakes": ["api\x1b]0;t\x07"],
        "waiting": [],
        "quieted": [],
        "decidedThere": [],
        "content": "\n\nfirst \x1b[31mred\x1b[0m line\r\nsecond",
        "tampered": False,
    }
    row = view.flow_row(entry)
    shown = [row.head, row.text]
    assert all(not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in s) for s in shown)
    assert row.text == "first \\x1b[31mred\\x1b[0m line"  # the first line that has text
    assert row.room == "team\\x1b[2J" and row.sender == "web\\x9b31m"
    assert view.block("a\x1b[2Jb\nc") == "a\\x1b[2Jb\nc"


def test_the_search_matches_every_word_in_any_field_ignoring_case():
    entries = [
        {"id": "e1", "content": "Rotate the KEYS", "room": "ops", "type": "REQUEST",
         "from": "a#1", "to": [], "wakes": ["b#2"], "waiting": [], "decidedThere": []},
        {"id": "e2", "content": "lunch", "room": "team", "type": "FACT", "from": "b#2",
         "to": ["a"], "wakes": [], "waiting": [], "decidedThere": ["c@desktop#3"]},
    ]  # fmt: skip
    assert view.search(entries, "keys ops") == [entries[0]]
    assert view.search(entries, "c@desktop") == [entries[1]]  # a seat of another machine
    assert view.search(entries, "b#2") == entries
    assert view.search(entries, "  ") == entries
    assert view.search(entries, "keys lunch") == []
    assert view.search(entries, "lunch*", found=frozenset({"e2"})) == [entries[1]]


def test_the_filters_cycle_all_waking_and_each_type_and_back():
    names = ["all"]
    for _ in range(6):
        names.append(view.next_filter(names[-1]))
    assert names == ["all", "waking", "QUESTION", "ANSWER", "FACT", "REQUEST", "all"]
    gone_only = {"type": "FACT", "wakes": [], "waiting": ["old#1"]}
    assert view.passes(gone_only, "waking")  # it waits for a gone seat it woke
    assert not view.passes({"type": "FACT", "wakes": [], "waiting": []}, "waking")


@db
def test_a_seats_claims_are_shown_beside_it_and_nothing_where_it_has_none():
    seed_rows()
    api = Seat.objects.get(name=API_SEAT)
    services.claims.claim(seat=api, repo="/srv/web-app/.git", paths=["src/login.py"])
    services.claims.claim(
        seat=api, repo="/srv/web-app/.git", paths=["src/cart.py"], kind="soft", duration="30m"
    )
    shot = view.snapshot(None)
    cells = {s.name: view.seat_cells(s, shot.claims.get(s.seat_id, [])) for s in shot.panes.seats}
    assert cells[API_SEAT][5] == "src/login.py, src/cart.py (by editing)"
    assert cells[WEB_SEAT][5] == ""


@db
def test_a_seat_behind_past_the_cap_reads_1000_plus_and_quiet_without_end_reads_quiet():
    seed_rows()
    rows_ = {s.name: s for s in live.panes("team").seats}
    api = rows_[API_SEAT]
    capped = type(api)(**{**api.__dict__, "unread": live.UNREAD_CAP + 1, "waking": 3})
    assert view.reading_text(capped) == "behind 1,000+ (3 waking)"
    docs = rows_[DOCS_SEAT]
    forever = type(docs)(**{**docs.__dict__, "quiet_until": None})
    assert view.seat_cells(forever, [])[4] == "quiet"


@db
def test_opening_an_entry_no_longer_in_the_store_says_so():
    shown = {
        "id": "01a23cb8-600d-7000-b635-cd27260adb9b",
        "wakes": [],
        "waiting": [],
        "quieted": [],
        "decidedThere": [],
    }
    assert view.in_full(shown).endswith("no longer in the store")
