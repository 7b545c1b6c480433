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
import time

import pytest

from tests.claude_kit import API_SEAT, WEB_SEAT, api, send, web
from tests.live_kit import DOCS_SEAT, OLD_SEAT, PASSWORD, seed
from tests.support import REPO, Daemon
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
            sent = time.monotonic()
            row = rows.filter(has_text=text[:40])
            expect(row).to_be_visible(timeout=1000)
            assert time.monotonic() - sent < 1.0
        expect(rows).to_have_count(5)

        question, fact, request = (rows.nth(2), rows.nth(1), rows.nth(0))  # newest first
        expect(question.locator(".salon-wake")).to_have_text([f"→ wakes {API_SEAT}"])
        expect(question).to_contain_text(f"{WEB_SEAT}")
        expect(question).to_contain_text("to api-service")
        expect(fact.locator(".salon-wake")).to_have_count(0)
        expect(request.locator(".salon-wake")).to_have_text(
            [f"→ wakes {OLD_SEAT}", f"→ wakes {WEB_SEAT}"]
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
