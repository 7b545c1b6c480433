"""Where cross-project requests show: the admin (each request's verdict and reason),
`salon stats` and the stats page (served, gated, denied, woken: the turns saved).
In-process, on the test store, with the receiving project's policy in a real directory.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from bus import services, stats
from bus.management.verbs.upkeep import format_report
from bus.models import Request
from tests.factories import make_room

SINCE = datetime.now(UTC).date() - timedelta(days=1)
POLICY = f"""\
[[grant]]
ask = "status:*"
to = ["consumer-b"]
since = {SINCE}
serve = ["scripts/status.sh", "{{2}}"]

[[grant]]
ask = "secrets:*"
to = ["consumer-b"]
since = {SINCE}
verdict = "deny"

[[grant]]
ask = "deploy:*"
to = ["consumer-b"]
since = {SINCE}
verdict = "gate"
"""


@pytest.fixture
def asked(transactional_db, tmp_path):
    """Four requests to web-app from consumer-b: served, denied, gated (no judge: woken)
    and one nothing covers (woken); their send reports by key."""
    root = tmp_path / "web-app"
    (root / ".agent-salon").mkdir(parents=True)
    (root / ".agent-salon" / "policy.toml").write_text(POLICY)
    (root / "scripts").mkdir()
    script = root / "scripts" / "status.sh"
    script.write_text('#!/bin/sh\necho "$1 is up"\n')
    script.chmod(0o755)
    make_room("team")
    web = services.seats.check_in(agent="web-app", session_id="aaaa1111")
    services.rooms.join_room(seat=web, room="team")
    services.seats.record_root(agent="web-app", root=str(root))
    consumer = services.seats.check_in(agent="consumer-b", session_id="bbbb2222")
    services.rooms.join_room(seat=consumer, room="team")
    return {
        key: services.entries.send_entry(
            seat=consumer, text="?", room="team", to=["web-app"], meta={"ask": key}
        )
        for key in ("status:db", "secrets:db", "deploy:prod", "uptime:db")
    }


def test_the_admin_lists_each_requests_verdict_and_shows_its_reason(asked, admin_client):
    listing = admin_client.get(reverse("admin:bus_entry_changelist")).content.decode()
    assert "status:db" in listing and "(served)" in listing
    assert "(denied)" in listing and "(woken)" in listing
    detail = admin_client.get(
        reverse("admin:bus_entry_change", args=[asked["secrets:db"]["id"]])
    ).content.decode()
    assert "salon-verdict-deny" in detail
    reason = Request.objects.get(pk=asked["secrets:db"]["id"]).reason
    assert reason == 'the policy declines "secrets:db" for consumer-b'
    assert html.escape(reason) in detail


def test_stats_count_requests_served_gated_denied_and_woken_and_the_turns_saved(asked):
    document = stats.report()
    assert document["requests"] == {
        "served": 1,
        "gated": 1,
        "denied": 1,
        "woken": 2,
        "pending": 0,
        "turnsSaved": 2,
    }
    text = format_report(document, "24h")
    assert "requests   1 served · 1 gated · 1 denied · 2 woken → 2 turns saved" in text


def test_the_stats_page_shows_the_turns_saved(asked, admin_client):
    page = admin_client.get(reverse("admin:salon_stats")).content.decode()
    assert 'id="salon-turns-saved-card"><span class="n">2</span>' in page
