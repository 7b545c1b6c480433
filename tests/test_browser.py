"""The history browser in a real browser (Playwright + Debian's Chromium) against a real
`salon serve`: log in, filter by source and a time range, open an entry.

Screenshots of the pages land in tests/artifacts/ (gitignored) for a person to look at.
Skipped, with the reason, only where Playwright or a Chromium binary is missing.
"""

from __future__ import annotations

import os
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.support import REPO, make_staff, run_django_script

ARTIFACTS = REPO / "tests" / "artifacts"
PASSWORD = "salon-staff-pw-9315"


def _chromium() -> str | None:
    for candidate in (os.environ.get("SALON_CHROMIUM"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

CHROMIUM = _chromium()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sync_playwright is None, reason="the playwright package is not installed"),
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no Chromium binary (apt-get install chromium, or set SALON_CHROMIUM)",
    ),
]

SEED = r"""
import django, os
django.setup()
from bus import services
from bus.models import Entry
services.rooms.create_room(name="team")
web = services.seats.check_in(agent="web-app", session_id="3f9c1a20-aaaa-4bbb-8ccc-000000000001")
api = services.seats.check_in(
    agent="api-service", session_id="c4e1aa01-aaaa-4bbb-8ccc-000000000002")
docs = services.seats.check_in(agent="docs", session_id="77aa0012-aaaa-4bbb-8ccc-000000000003")
for seat in (web, api, docs):
    services.rooms.join_room(seat=seat, room="team")
q = services.entries.send_entry(seat=web, room="team", type="QUESTION", to=["api-service"],
    text="Who owns the session-cookie refresh? The login form loses the user after 15 min.")
services.entries.send_entry(seat=api, room="team", type="ANSWER", to=[web.name], re=q["id"],
    text="I do. The refresh endpoint moved to /auth/refresh in v2.3; the old path 404s.\n\n"
         "Fix on your side: call `POST /auth/refresh` with the refresh token in the body.\n"
         "I will keep the old path alive until Friday.",
    meta={"kind": "reply", "ticket": "AUTH-412", "files": ["api/auth/views.py"]})
services.entries.send_entry(seat=docs, room="team", type="FACT",
    text="Docs for the v2.3 auth endpoints are published.")
services.entries.send_entry(seat=web, room="team", type="REQUEST", to=["docs"],
    text="Please add the refresh flow to the migration guide, with the curl example.")
services.entries.send_entry(seat=web, room="team", type="FACT",
    text="Login form fixed and deployed to staging; " + "details follow. " * 12)
bad = services.entries.send_entry(
    seat=api, room="team", type="FACT", text="Deploy window is 14:00 UTC.")
Entry.objects.filter(id=bad["id"]).update(content="Deploy window is 04:00 UTC.")
print(bad["id"])
"""


@pytest.fixture
def salon_with_history(daemon, env, tmp_path):
    make_staff(env, PASSWORD)
    seeded = run_django_script(env, SEED, tmp_path)
    for text in ("nightly build 812 is green", "nightly build 813 is red: 2 tests failed"):
        posted = httpx.post(
            daemon.url + "/notify?label=ci", json={"content": text, "room": "team"}, timeout=10
        )
        assert posted.status_code == 202, posted.text
    return {"tampered": seeded.strip().splitlines()[-1]}


@pytest.fixture
def browser():
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield instance
        instance.close()


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_staff_log_in_filter_by_source_and_time_and_open_an_entry(
    daemon, salon_with_history, browser
):
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(
        viewport={"width": 1400, "height": 900}, timezone_id="Europe/Berlin", locale="en-GB"
    )
    page = context.new_page()
    failed_assets: list[str] = []
    page.on(
        "response",
        lambda r: failed_assets.append(r.url) if "/static/" in r.url and r.status >= 400 else None,
    )

    page.goto(daemon.url + "/admin/")
    expect(page).to_have_url(daemon.url + "/admin/login/?next=/admin/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_contain_text("agent-salon")

    page.goto(daemon.url + "/admin/bus/entry/")
    expect(page.locator("#result_list tbody tr")).to_have_count(8)

    now = datetime.now(UTC)
    page.fill("#id_source", "web-app")
    page.fill("#id_since", iso(now - timedelta(hours=1)))
    page.fill("#id_until", iso(now + timedelta(hours=1)))
    page.click("#salon-filter-form input[type=submit]")

    expect(page).to_have_url(re.compile(r".*[?&]source=web-app(&.*)?$"))
    assert "since=" in page.url and "target=" not in page.url  # empty fields are not sent
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(3)
    for sender in rows.locator("td.field-sender_link").all_inner_texts():
        assert sender.startswith("web-app#")
    # Times are shown in the browser's zone (Berlin), with UTC on hover.
    first_time = rows.first.locator("time")
    shown = first_time.inner_text()
    assert "UTC" not in shown
    assert first_time.get_attribute("title").startswith("UTC ")
    page.screenshot(path=str(ARTIFACTS / "admin-list.png"), full_page=True)

    rows.nth(2).locator("th.field-when a").click()
    expect(page.locator("#content h1")).to_contain_text("View entry")
    expect(page.locator(".salon-signature-ok")).to_be_visible()
    expect(page.locator(".salon-content")).to_contain_text("session-cookie refresh")
    page.screenshot(path=str(ARTIFACTS / "admin-detail.png"), full_page=True)

    # The detail page's Close link goes back to the same filtered list.
    page.click("a.closelink")
    expect(page).to_have_url(re.compile(r".*/admin/bus/entry/\?.*source=web-app.*"))
    expect(page.locator("#result_list tbody tr")).to_have_count(3)

    # An answer: its meta as JSON, and a link to the question it answers.
    page.goto(daemon.url + "/admin/bus/entry/?type=answer")
    page.locator("#result_list th.field-when a").first.click()
    expect(page.locator("pre.salon-json")).to_contain_text('"ticket": "AUTH-412"')
    page.locator(".field-re_link a").click()
    expect(page.locator(".salon-content")).to_contain_text("session-cookie refresh")
    page.go_back()
    page.screenshot(path=str(ARTIFACTS / "admin-detail-answer.png"), full_page=True)

    page.goto(daemon.url + "/admin/bus/entry/" + salon_with_history["tampered"] + "/change/")
    expect(page.locator("#salon-tampered")).to_be_visible()
    color = page.locator("#salon-tampered").evaluate("el => getComputedStyle(el).color")
    assert color == "rgb(186, 33, 33)"  # the admin's error red
    page.screenshot(path=str(ARTIFACTS / "admin-tampered.png"), full_page=True)

    page.goto(daemon.url + "/admin/bus/seat/")
    expect(page.locator("#result_list")).to_contain_text("api-service#c4e1aa01")
    page.screenshot(path=str(ARTIFACTS / "admin-seats.png"), full_page=True)

    assert failed_assets == []
    context.close()


def _shot(page, name: str) -> None:
    """A screenshot in tests/artifacts/; with SALON_DOCS_SCREENSHOTS=1 also the copy the
    README shows (docs/), so an ordinary run never changes a tracked file."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)
    if os.environ.get("SALON_DOCS_SCREENSHOTS") == "1":
        shutil.copy(ARTIFACTS / name, REPO / "docs" / name)


def test_the_staff_pages_speak_the_browsers_zone_and_say_when_nothing_matches(
    daemon, salon_with_history, browser
):
    context = browser.new_context(
        viewport={"width": 1400, "height": 900}, timezone_id="Asia/Tokyo", locale="en-GB"
    )
    page = context.new_page()
    page.goto(daemon.url + "/admin/login/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_contain_text("agent-salon")
    expect(page.get_by_text("View site")).to_have_count(0)
    expect(page.locator("#content-main")).to_contain_text("MCP sessions")

    # A time typed without an offset is the browser's (Tokyo, UTC+9): an hour from now
    # in Tokyo keeps the last hour's entries, the same digits read as UTC would not.
    page.goto(daemon.url + "/admin/bus/entry/")
    soon = (datetime.now(UTC) + timedelta(hours=9, minutes=-60)).strftime("%Y-%m-%d %H:%M")
    page.fill("#id_since", soon)
    page.select_option("#id_room", "team")
    page.click("#salon-filter-form input[type=submit]")
    assert "tz=Asia%2FTokyo" in page.url
    expect(page.locator("#result_list tbody tr")).to_have_count(8)
    expect(page.locator("#changelist-filter")).to_contain_text("browser's time zone")
    _shot(page, "entries.png")

    page.goto(daemon.url + "/admin/bus/entry/?source=web-ap")
    expect(page.locator("#salon-empty")).to_contain_text("No entries match these filters.")
    expect(page.locator("#salon-empty")).to_contain_text("did you mean web-app")
    _shot(page, "entries-empty.png")

    page.goto(daemon.url + "/admin/bus/seat/")
    page.locator("#result_list th.field-name a").first.click()
    expect(page.locator(".object-tools")).to_have_count(0)  # no "History" of admin edits
    expect(page.locator("time").first).not_to_contain_text("UTC")

    page.goto(daemon.url + "/admin/stats/")
    expect(page.locator("#content")).to_contain_text("Stats")
    ticks = page.locator("svg text[data-utc]").all_text_contents()
    assert ticks and not any("UTC" in tick for tick in ticks)
    _shot(page, "stats.png")
