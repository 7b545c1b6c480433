"""The live view in a real browser (Playwright + Debian's Chromium) against a real
`salon serve`, with entries sent by real `salon send` processes.

Its screenshot lands in tests/artifacts/ (gitignored); with SALON_DOCS_SCREENSHOTS=1 it
also replaces docs/live-view.png, the one the README shows (a plain run leaves the
tracked file alone). Skipped, with the reason, only where Playwright or a Chromium
binary is missing.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.claude_kit import API_SEAT, WEB_SEAT, api, ok, salon, send, web
from tests.live_kit import DOCS_SEAT, DOCS_SESSION, OLD_SEAT, PASSWORD, seed
from tests.support import REPO, Daemon, dump_store, query_store, run_django_script, stretched
from tests.test_browser import CHROMIUM, sync_playwright

if sync_playwright is not None:
    from playwright.sync_api import expect

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sync_playwright is None, reason="the playwright package is not installed"),
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no Chromium binary (apt-get install chromium, or set SALON_CHROMIUM)",
    ),
]

ARTIFACTS = REPO / "tests" / "artifacts"
DOCS_SCREENSHOT = REPO / "docs" / "live-view.png"


@pytest.fixture
def server(env, short_tmp, tmp_path):
    store = dict(env, TMPDIR=short_tmp)
    seed(store, tmp_path)
    daemon = Daemon(env=store, cwd=tmp_path).start()
    yield daemon, store
    daemon.stop()


def test_the_live_view_shows_three_cli_entries_within_a_second_with_their_wake_marks(server):
    daemon, store = server
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        context = browser.new_context(
            viewport={"width": 1400, "height": 960}, timezone_id="Europe/Berlin", locale="en-GB"
        )
        page = context.new_page()
        elsewhere: list[str] = []
        page.on(
            "request",
            lambda r: elsewhere.append(r.url) if not r.url.startswith(daemon.url) else None,
        )
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        page.goto(daemon.url + "/admin/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.click("#salon-live-link a")
        expect(page.locator("#content h1")).to_have_text("Live")
        expect(page.locator("#salon-flow-status")).to_have_attribute("data-state", "live")
        rows = page.locator("#salon-flow-rows li[data-id]")
        expect(rows).to_have_count(2)  # the room's past: the two seeded entries
        expect(page.locator(f'#salon-seats tr[data-seat="{DOCS_SEAT}"]')).to_contain_text("?")

        sends = [
            (
                web,
                "QUESTION",
                "Is /auth/refresh on v2 yet? The login form still calls the old path.",
                "--to",
                "api-service",
            ),
            (api, "FACT", "Staging is down for the database upgrade until 14:30 UTC."),
            (api, "REQUEST", "Please review the refresh-token rotation before I merge it."),
        ]
        for who, kind, text, *flags in sends:
            send(store, who, "team", kind, text, *flags)
            row = rows.filter(has_text=text[:40])
            # "within a second" on a quiet machine; a loaded one starts everything late
            expect(row).to_be_visible(timeout=stretched(1.0) * 1000)
        expect(rows).to_have_count(5)

        question, fact, request = (rows.nth(2), rows.nth(1), rows.nth(0))  # newest first
        expect(question.locator(".salon-wake")).to_have_text([f"→ wakes {API_SEAT}"])
        expect(question).to_contain_text(f"{WEB_SEAT}")
        expect(question).to_contain_text("to api-service")
        expect(fact.locator(".salon-wake")).to_have_count(0)
        # old-tool is gone: `send` does not list it, the flow neither; the entry waits for it
        expect(request.locator(".salon-wake")).to_have_text([f"→ wakes {WEB_SEAT}"])
        expect(request.locator(".salon-waiting")).to_have_text(
            f"(gone, the entry waits for: {OLD_SEAT})"
        )
        expect(request.locator(".salon-quieted")).to_have_text(f"(quiet: {DOCS_SEAT})")
        # the time in the browser's zone, UTC on hover
        assert question.locator("time").get_attribute("title").startswith("UTC ")

        page.click("#salon-flow-filters button[data-filter=waking]")
        expect(fact).to_be_hidden()
        expect(question).to_be_visible()
        page.click("#salon-flow-filters button[data-filter=FACT]")
        expect(rows.filter(visible=True)).to_have_count(1)
        expect(fact).to_be_visible()
        page.click("#salon-flow-filters button[data-filter=all]")
        expect(rows.filter(visible=True)).to_have_count(5)

        question.click()  # opens in place ...
        expect(question.locator(".salon-flow-full")).to_be_visible()
        expect(question.locator(".salon-flow-full")).to_contain_text("still calls the old path.")
        page.wait_for_function("!document.querySelector('.salon-new')")  # arrivals settled
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "live-view.png"), full_page=True)
        if os.environ.get("SALON_DOCS_SCREENSHOTS") == "1":
            shutil.copyfile(ARTIFACTS / "live-view.png", DOCS_SCREENSHOT)

        question.locator("a.salon-flow-open").click()  # ... and in full on its own page
        expect(page).to_have_url(re.compile(r".*/admin/bus/entry/[0-9a-f-]{36}/change/$"))
        expect(page.locator(".salon-content")).to_contain_text("Is /auth/refresh on v2 yet?")
        context.close()
        browser.close()
    assert errors == []
    assert elsewhere == []


@contextmanager
def live_page(daemon, *, width: int = 1400) -> Iterator:
    """Chromium logged in as staff, on /admin/live/ with its flow live; page errors fail."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": width, "height": 960}, locale="en-GB")
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(daemon.url + "/admin/login/?next=/admin/live/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        expect(page.locator("#salon-flow-status")).to_have_attribute("data-state", "live")
        yield page
        browser.close()
    assert errors == []


MOBILE_SEAT = "mobile#0b11e000"


def mobile(store, *args):
    return ok(salon(store, *args, agent="mobile", session="0b11e000-aaaa-4bbb-8ccc-000000000005"))


def test_the_rooms_and_seats_panes_follow_the_bus_without_a_reload(server):
    """REGRESSION: only the flow was live: a seat that joined, a focus, a quiet, a read
    or a seat coming back showed only after a reload. The page also opened on the empty
    default room: it opens on `team`, where the seats and the entries are."""
    daemon, store = server
    with live_page(daemon) as page:
        expect(page.locator("#salon-seats h2")).to_have_text("Seats in “team”")
        expect(page.locator("#salon-rooms tr.selected")).to_have_attribute("data-room", "team")
        page.evaluate("window.notReloaded = true")
        seats = page.locator("#salon-seats")
        team = page.locator('#salon-rooms tr[data-room="team"] td')
        expect(team.nth(2)).to_have_text("4")  # seats
        deadline = {"timeout": 10_000}  # the panes are drawn again every 2 s at the latest

        mobile(store, "join", "team")
        row = seats.locator(f'tr[data-seat="{MOBILE_SEAT}"]')
        expect(row).to_contain_text("live", **deadline)
        expect(team.nth(2)).to_have_text("5", **deadline)

        mobile(store, "focus", "the offline cache", "--phase", "apply")
        expect(row).to_contain_text("the offline cache [apply]", **deadline)
        mobile(store, "quiet", "--for", "1h")
        expect(row).to_contain_text("quiet until", **deadline)

        api_row = seats.locator(f'tr[data-seat="{API_SEAT}"]')
        expect(api_row).to_contain_text("behind: 2 unread")
        ok(api(store, "inbox", "team"))
        expect(api_row).to_contain_text("reading, caught up", **deadline)

        docs_row = seats.locator(f'tr[data-seat="{DOCS_SEAT}"]')
        expect(docs_row.locator(".salon-live")).to_have_text("?")  # unknown: seen 10 min ago
        ok(salon(store, "peek", "team", agent="docs", session=DOCS_SESSION))
        expect(docs_row.locator(".salon-live")).to_have_text("live", **deadline)

        send(store, web, "team", "FACT", "the cache schema is versioned now")
        expect(team.nth(1)).to_have_text("3", **deadline)  # entries
        expect(api_row).to_contain_text("behind: 1 unread", **deadline)
        assert page.evaluate("window.notReloaded") is True
        # the times swapped in are shown in the browser's zone, as on the first draw
        seen = row.locator("time").first
        expect(seen).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$"))
        assert seen.get_attribute("title").startswith("UTC ")
        flow_time = page.locator("#salon-flow-rows li[data-id] time").first  # left as it was
        expect(flow_time).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))


def test_the_pager_keys_move_search_filter_open_and_help_but_not_while_typing(server):
    daemon, store = server
    send(store, api, "team", "FACT", "Staging is down for the database upgrade.")
    send(store, web, "team", "QUESTION", "Who rotates the staging keys?", "--to", "api-service")
    with live_page(daemon) as page:
        rows = page.locator("#salon-flow-rows li[data-id]")
        expect(rows).to_have_count(4)  # newest first: QUESTION, FACT, REQUEST, QUESTION
        before = dump_store(store)  # logged in and drawn: from here on, only keys
        cursor = page.locator("#salon-flow-rows li.salon-cursor")
        expect(cursor).to_have_count(0)

        page.keyboard.press("j")
        expect(cursor).to_contain_text("Who rotates the staging keys?")
        page.keyboard.press("j")
        page.keyboard.press("j")
        expect(cursor).to_contain_text("Please rotate the staging keys.")
        page.keyboard.press("k")
        expect(cursor).to_contain_text("Staging is down")

        page.keyboard.press("Enter")  # opens it in full, with its signature check
        expect(cursor.locator(".salon-flow-full")).to_be_visible()
        expect(cursor.locator(".salon-flow-full")).to_contain_text("✓ signature valid")
        page.keyboard.press("Enter")
        expect(cursor.locator(".salon-flow-full")).to_be_hidden()

        buttons = page.locator("#salon-flow-filters button[data-filter].selected")
        visible = rows.filter(visible=True)
        page.keyboard.press("f")  # waking only
        expect(buttons).to_have_text("waking only")
        expect(visible).to_have_count(3)
        page.keyboard.press("f")  # QUESTION
        expect(buttons).to_have_text("QUESTION")
        expect(visible).to_have_count(2)
        for _ in range(4):  # ANSWER, FACT, REQUEST, and round to all
            page.keyboard.press("f")
        expect(buttons).to_have_text("all")
        expect(visible).to_have_count(4)

        page.keyboard.press("/")
        search = page.locator("#salon-flow-search")
        expect(search).to_be_focused()
        page.keyboard.type("rotate jkf?")  # keys typed into the field are only text
        expect(search).to_have_value("rotate jkf?")
        expect(buttons).to_have_text("all")
        expect(cursor).to_contain_text("Staging is down")
        expect(page.locator("#salon-help")).to_be_hidden()
        expect(visible).to_have_count(0)
        search.fill("")
        page.keyboard.type("rotate")
        expect(visible).to_have_count(2)
        page.keyboard.press("Enter")  # keeps the search, leaves the field
        expect(search).not_to_be_focused()
        page.keyboard.press("j")
        expect(cursor).to_contain_text("Who rotates the staging keys?")
        page.keyboard.press("/")
        page.keyboard.press("Escape")  # clears it
        expect(search).to_have_value("")
        expect(visible).to_have_count(4)

        page.keyboard.press("?")
        expect(page.locator("#salon-help")).to_be_visible()
        expect(page.locator("#salon-help")).to_contain_text("the next filter")
        page.keyboard.press("Escape")
        expect(page.locator("#salon-help")).to_be_hidden()
        assert dump_store(store) == before  # every row as it was: the keys only read


REMOTE_SEAT = "designer@desktop#de51de51"
# A roster of machine `desktop`, as its bridge would land it: one live seat in `team`.
REMOTE_ROSTER = """
import django
django.setup()
from datetime import timedelta
from bus import services
from bus.models import Room
services.seats.remote_roster(room=Room.objects.get(name="team"), device="desktop",
                             seats=[("designer@desktop#de51de51", "live")],
                             live_for=timedelta(hours=1))
"""


def test_a_seat_of_another_machine_is_shown_as_decided_there_never_as_woken(server):
    daemon, store = server
    run_django_script(store, REMOTE_ROSTER, daemon.cwd)
    with live_page(daemon) as page:
        send(store, web, "team", "QUESTION", "Which palette?", "--to", "designer@desktop")
        row = page.locator("#salon-flow-rows li[data-id]").filter(has_text="Which palette?")
        expect(row.locator(".salon-there")).to_have_text(f"(decided there: {REMOTE_SEAT})")
        expect(row.locator(".salon-wake")).to_have_count(0)
        expect(row.locator(".salon-waiting")).to_have_count(0)
        assert query_store(
            store, "SELECT woken FROM bus_wakedecision WHERE seat_name = ?", (REMOTE_SEAT,)
        ) == [(1,)]  # the ledger says woken: the page said "wakes" from it before
